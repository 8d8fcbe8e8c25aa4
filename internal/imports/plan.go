package imports

import (
	"cmp"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// The import's plan, stage by stage: what must exist in the consumer,
// computed with no client from what reconcile read (the merged exports,
// the objects as they are: observed, the settings). The apply functions
// write what these return, in the order their inputs need: the
// ServiceImport, then its derived Service (owned by it: it needs its UID),
// then spec.ips (the Service's allocated ClusterIPs), the slices (one
// reconciler.Input per source: planSlices), then the status (whether
// slices are present, what failed).

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
func planDerivedService(name types.NamespacedName, si *mcsv1beta1.ServiceImport, siGVK schema.GroupVersionKind, merged clusterset.Merged, current *corev1.Service, managedBy string) (want *corev1.Service, write bool) {
	want = &corev1.Service{}
	if current != nil {
		want = current.DeepCopy()
	}
	want.Name, want.Namespace = name.Name, name.Namespace
	want.Labels = mergeOwned(want.Labels, nil, map[string]string{ManagedByLabel: managedBy, mcsv1beta1.LabelServiceName: si.Name})
	want.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(si, siGVK)}
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
// the slices could not be had; Ready's message says first which sources'
// publications are incomplete (incompleteNote). write says that si's
// differs.
//
// The status is compared field by field before anything is copied: an
// import of 1,000 sources deep-copied and deep-compared its 1,000
// clusters on every reconcile, for a status that had not changed.
func planStatus(si *mcsv1beta1.ServiceImport, merged clusterset.Merged, slicesPresent bool, problem *metav1.Condition, incomplete []clusterset.ClusterID) (status mcsv1beta1.ServiceImportStatus, write bool) {
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
	if note := incompleteNote(incomplete); note != "" {
		ready.Message = note + "; " + ready.Message
	}
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

// setMetadata gives si the labels and annotations of the merged exports
// and mcs-syncer's own (managed-by, derived-service, local-cluster-first),
// removes those that the exports carried before and no longer do, and
// leaves every other key alone.
func setMetadata(si *mcsv1beta1.ServiceImport, merged clusterset.Merged, managedBy string) {
	var before exportedKeys
	_ = json.Unmarshal([]byte(si.Annotations[ExportedKeysAnnotation]), &before) // unreadable: nothing was ours
	si.Labels = mergeOwned(si.Labels, before.Labels, merged.Spec.Labels)
	si.Annotations = mergeOwned(si.Annotations, before.Annotations, merged.Spec.Annotations)

	si.Labels[ManagedByLabel] = managedBy
	delete(si.Annotations, DerivedServiceAnnotation)
	if merged.Spec.Type == mcsv1beta1.ClusterSetIP {
		si.Annotations[DerivedServiceAnnotation] = DerivedServiceName(client.ObjectKeyFromObject(si))
	}
	delete(si.Annotations, clusterset.LocalClusterFirstAnnotation)
	if merged.Spec.LocalClusterFirst {
		si.Annotations[clusterset.LocalClusterFirstAnnotation] = "true"
	}
	delete(si.Annotations, ExportedKeysAnnotation)
	now := exportedKeys{Labels: slices.Sorted(maps.Keys(merged.Spec.Labels)), Annotations: slices.Sorted(maps.Keys(merged.Spec.Annotations))}
	if len(now.Labels)+len(now.Annotations) > 0 {
		value, _ := json.Marshal(now) // cannot fail: two string slices
		si.Annotations[ExportedKeysAnnotation] = string(value)
	}
	if len(si.Annotations) == 0 {
		si.Annotations = nil
	}
}

// mergeOwned returns current without the keys it owned before and with
// the keys of want; other keys are kept. Never nil.
func mergeOwned(current map[string]string, ownedBefore []string, want map[string]string) map[string]string {
	out := maps.Clone(current)
	if out == nil {
		out = map[string]string{}
	}
	for _, k := range ownedBefore {
		delete(out, k)
	}
	maps.Copy(out, want)
	return out
}

// incompleteNote says which sources' endpoints are imported in part, and
// why ("" for none). It names no count: a count that follows a member's
// flood would rewrite the status at each of its writes.
func incompleteNote(sources []clusterset.ClusterID) string {
	if len(sources) == 0 {
		return ""
	}
	return "incomplete: " + clusterList(sources) + " publish more than this cluster's mcs-syncer holds of one member " +
		"(--max-publications-per-member, --max-publication-bytes-per-member); parts of their publications, and the endpoints in them, are left out"
}

// clusterList formats ids as fmt's %v does ("[east west]"), without a
// reflection per ID.
func clusterList(ids []clusterset.ClusterID) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(string(id))
	}
	b.WriteByte(']')
	return b.String()
}
