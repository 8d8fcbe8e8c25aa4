package imports

import (
	"cmp"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// The import's plan, stage by stage: what must exist in the consumer,
// computed from what was read (the merged exports, the objects as they
// are, the settings) with no client. The apply functions write what these
// return, in the order their inputs need: the ServiceImport, then its
// derived Service (owned by it: it needs its UID), then spec.ips (the
// Service's allocated ClusterIPs), the slices (one reconciler.Input per
// source: sourceInput, desiredGroups), then the status (whether slices
// are present, what failed).

// planServiceImport returns the ServiceImport of key as it must be:
// current (nil for a new one) with the merged exports' spec, metadata
// (setMetadata) and, for a ClusterSetIP import, the spec.ips it has.
// write says that current differs (always for a new one).
func planServiceImport(key types.NamespacedName, current *mcsv1beta1.ServiceImport, merged clusterset.Merged, managedBy string) (want *mcsv1beta1.ServiceImport, write bool) {
	want = &mcsv1beta1.ServiceImport{}
	if current != nil {
		want = current.DeepCopy()
	}
	want.Name, want.Namespace = key.Name, key.Namespace
	setMetadata(want, merged, managedBy)
	s := merged.Spec
	want.Spec = mcsv1beta1.ServiceImportSpec{
		Type: s.Type, Ports: s.Ports, SessionAffinity: s.SessionAffinity, SessionAffinityConfig: s.SessionAffinityConfig,
		IPFamilies: s.IPFamilies, InternalTrafficPolicy: s.InternalTrafficPolicy, TrafficDistribution: s.TrafficDistribution,
	}
	if want.Spec.Ports == nil {
		want.Spec.Ports = []mcsv1beta1.ServicePort{} // required by the CRD
	}
	if current == nil {
		return want, true
	}
	if s.Type == mcsv1beta1.ClusterSetIP {
		want.Spec.IPs = current.Spec.IPs
	}
	return want, !equality.Semantic.DeepEqual(want.Spec, current.Spec) || !maps.Equal(want.Labels, current.Labels) || !maps.Equal(want.Annotations, current.Annotations)
}

// planDerivedService returns the derived Service of a ClusterSetIP import
// as it must be: current (nil for a new one) with mcs-syncer's labels,
// owner and spec; others' labels and annotations are kept. write says
// that current differs (always for a new one).
func planDerivedService(name types.NamespacedName, si *mcsv1beta1.ServiceImport, merged clusterset.Merged, current *corev1.Service, managedBy string) (want *corev1.Service, write bool) {
	want = &corev1.Service{}
	if current != nil {
		want = current.DeepCopy()
	}
	want.Name, want.Namespace = name.Name, name.Namespace
	want.Labels = mergeOwned(want.Labels, nil, map[string]string{ManagedByLabel: managedBy, mcsv1beta1.LabelServiceName: si.Name})
	want.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(si, serviceImportGVK)}
	want.Spec.Type = corev1.ServiceTypeClusterIP
	want.Spec.Selector = nil
	want.Spec.Ports = nil
	for _, p := range merged.Spec.Ports {
		// Every field the API server would default is set, so that an
		// unchanged import compares equal and is not rewritten.
		want.Spec.Ports = append(want.Spec.Ports, corev1.ServicePort{
			Name: p.Name, Protocol: cmp.Or(p.Protocol, corev1.ProtocolTCP), AppProtocol: p.AppProtocol,
			Port: p.Port, TargetPort: intstr.FromInt32(p.Port),
		})
	}
	want.Spec.SessionAffinity = cmp.Or(merged.Spec.SessionAffinity, corev1.ServiceAffinityNone)
	want.Spec.SessionAffinityConfig = merged.Spec.SessionAffinityConfig
	if len(merged.Spec.IPFamilies) > 0 {
		want.Spec.IPFamilies = merged.Spec.IPFamilies
		policy := corev1.IPFamilyPolicySingleStack
		if len(merged.Spec.IPFamilies) > 1 {
			policy = corev1.IPFamilyPolicyRequireDualStack
		}
		want.Spec.IPFamilyPolicy = &policy
	}
	return want, current == nil || !equality.Semantic.DeepEqual(want.Spec, current.Spec) || !maps.Equal(want.Labels, current.Labels) ||
		!equality.Semantic.DeepEqual(want.OwnerReferences, current.OwnerReferences)
}

// planStatus returns the ServiceImport's status as it must be:
// status.clusters the exporting clusters; endpointSliceObjects Present when
// the import has slices, Absent when it has none (no endpoints anywhere);
// Ready True/Ready, or problem (Ready=False) when the derived Service or
// the slices could not be had. write says that si's differs.
//
// The status is compared field by field before anything is copied: an
// import of 1,000 sources deep-copied and deep-compared its 1,000
// clusters on every reconcile, for a status that had not changed.
func planStatus(si *mcsv1beta1.ServiceImport, merged clusterset.Merged, slicesPresent bool, problem *metav1.Condition) (status mcsv1beta1.ServiceImportStatus, write bool) {
	var clusters []mcsv1beta1.ClusterStatus
	for _, id := range merged.Clusters {
		clusters = append(clusters, mcsv1beta1.ClusterStatus{Cluster: string(id)})
	}
	objects := mcsv1beta1.EndpointSliceObjectsAbsent
	if slicesPresent {
		objects = mcsv1beta1.EndpointSliceObjectsPresent
	}
	ready := mcsv1beta1.NewServiceImportCondition(mcsv1beta1.ServiceImportConditionReady, metav1.ConditionTrue,
		mcsv1beta1.ServiceImportReasonReady, "imported from "+clusterList(merged.Clusters))
	if problem != nil {
		ready = *problem
	}
	ready.ObservedGeneration = si.Generation
	ready.Message = clusterset.CutMessage(ready.Message)
	conditions := slices.Clone(si.Status.Conditions)
	meta.SetStatusCondition(&conditions, ready)
	if slices.Equal(clusters, si.Status.Clusters) && objects == si.Status.EndpointSliceObjects &&
		equality.Semantic.DeepEqual(conditions, si.Status.Conditions) {
		return si.Status, false
	}
	// Every field is new: nothing of si's status is copied.
	return mcsv1beta1.ServiceImportStatus{Clusters: clusters, EndpointSliceObjects: objects, Conditions: conditions}, true
}
