package imports

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
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

// sliceInputs is what the slices' plan is made from: the import (its
// owner), its merged and per-cluster exports, which members are not all
// known yet, the members, the imported slices the consumer holds, the
// zones of the consumer's nodes (local-first imports; nil: unknown or not
// asked for) and the inputs under which each source was last found up to
// date (settled.go; read only).
type sliceInputs struct {
	si        *mcsv1beta1.ServiceImport
	siGVK     schema.GroupVersionKind
	merged    clusterset.Merged
	exports   []*clusterset.ExportedService
	unsettled map[clusterset.ClusterID]bool
	members   []clusterset.ClusterID
	held      []*discoveryv1.EndpointSlice
	consumer  clusterset.ClusterID
	zones     []string
	settled   settledSources
	// ranges are the members' address ranges (Options.AddressRanges).
	ranges map[clusterset.ClusterID][]netip.Prefix
	// checked are the arrays of endpoints found importable (checked.go;
	// nil: every endpoint is checked).
	checked *checkedArrays
}

// slicesPlan is what the slices' stage does.
type slicesPlan struct {
	// sources are every member, every cluster the held slices name (those
	// of a cluster that left the clusterset, or was renamed, are
	// withdrawn) and every exporter, each once.
	sources []clusterset.ClusterID
	// planned are the sources whose slices are reconciled, in that order.
	planned []sourcePlan
	// present says that a source left as it is holds slices.
	present bool
}

// sourcePlan is the reconciler's input for one source's slices and what
// applying it records.
type sourcePlan struct {
	source clusterset.ClusterID
	export *clusterset.ExportedService // nil: the source exports nothing
	input  reconciler.Input
	// endpoints counts the desired endpoints; leftOut those left out.
	endpoints int
	leftOut   leftOut
	// settled is recorded once the source's slices are found up to date;
	// never under local-first hints, which follow the consumer's zones,
	// not the inputs settled compares.
	settled  settledInputs
	remember bool
}

// planSlices returns the slices' plan: one reconciler.Input per source
// whose slices may differ from its export. A source is left as it is when
// it neither exports nor holds slices, when its exports are not all known
// yet (unsettled: absence proves nothing), or when nothing it is planned
// from changed since its slices were last up to date.
func planSlices(in sliceInputs) slicesPlan {
	bySource, named := bySourceCluster(in.held)
	exportOf := make(map[clusterset.ClusterID]*clusterset.ExportedService, len(in.exports))
	exporters := make([]clusterset.ClusterID, len(in.exports))
	for i, es := range in.exports {
		exportOf[es.Cluster] = es
		exporters[i] = es.Cluster
	}
	plan := slicesPlan{sources: membersAnd(in.members, named, exporters)}
	addressTypes := addressTypesOf(in.merged.Spec.IPFamilies)
	key := client.ObjectKeyFromObject(in.si)
	local, _ := desiredGroups(in.merged, exportOf[in.consumer], addressTypes, in.ranges, in.checked, key)
	hints := localFirstHints(in.merged, local, in.zones, in.consumer)
	shared := sharedInputs(in.si, in.merged, addressTypes)
	for _, source := range plan.sources {
		existing, es := bySource[source], exportOf[source]
		settled := settledInputs{export: es, shared: shared, slices: heldSlices(existing)}
		if (es == nil && len(existing) == 0) || in.unsettled[source] || (hints == nil && in.settled.same(source, settled)) {
			plan.present = plan.present || len(existing) > 0
			continue
		}
		p := sourcePlan{source: source, export: es, settled: settled, remember: hints == nil}
		p.input = reconciler.Input{
			Owner: in.si, OwnerGVK: in.siGVK,
			AddressTypes: addressTypes,
			Existing:     existing,
			Labeler:      sliceLabeler(in.si, in.merged, source),
			// See hints.go: never the source's hints, the import's own.
			TrafficDistribution: importTrafficDistribution(in.merged.Spec.TrafficDistribution),
		}
		if hints != nil {
			p.input.Hints = hints(source)
		}
		if es != nil {
			p.input.TriggerTime = es.LastChangeTriggerTime
			p.input.Desired, p.leftOut = desiredGroups(in.merged, es, addressTypes, in.ranges, in.checked, key)
		}
		for _, g := range p.input.Desired {
			p.endpoints += len(g.Endpoints)
		}
		plan.planned = append(plan.planned, p)
	}
	return plan
}
