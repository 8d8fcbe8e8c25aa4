package clusterset

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Merged is the result of merging every export of one namespace/name.
type Merged struct {
	// Spec is the ServiceImport's spec: the oldest export's fields, and the
	// union of all exports' ports by name.
	Spec ExportedSpec
	// Clusters are the exporting clusters, sorted by ID.
	Clusters []ClusterID
	// Oldest is the cluster whose export is the oldest (ties: lowest ID);
	// its definitions win conflicts.
	Oldest ClusterID
	// Conflict is nil when the exports agree; otherwise it applies to every
	// constituent export, not only to the ones that differ.
	Conflict *Conflict
}

// Conflict says how the exports of one namespace/name disagree.
type Conflict struct {
	// Reasons are the standard reasons that apply, in the standard's order.
	Reasons []mcsv1beta1.ServiceExportConditionReason
	// Message names each field that differs, the clusters and their values,
	// and the winning (oldest) cluster.
	Message string
}

// Reason returns the reasons comma-joined, as the Conflict condition's
// reason (the standard allows several).
func (c *Conflict) Reason() string {
	parts := make([]string, len(c.Reasons))
	for i, r := range c.Reasons {
		parts[i] = string(r)
	}
	return strings.Join(parts, ",")
}

// fieldRule is one field whose values must agree across exports.
type fieldRule struct {
	reason mcsv1beta1.ServiceExportConditionReason
	field  string
	equal  func(a, b *ExportedSpec) bool
	show   func(s *ExportedSpec) string
}

// fieldRules, in the standard's order of reasons (ports come first and are
// merged apart).
var fieldRules = []fieldRule{
	{mcsv1beta1.ServiceExportReasonTypeConflict, "type",
		func(a, b *ExportedSpec) bool { return a.Type == b.Type },
		func(s *ExportedSpec) string { return string(s.Type) }},
	{mcsv1beta1.ServiceExportReasonSessionAffinityConflict, "sessionAffinity",
		func(a, b *ExportedSpec) bool { return affinity(a) == affinity(b) },
		func(s *ExportedSpec) string { return string(affinity(s)) }},
	{mcsv1beta1.ServiceExportReasonSessionAffinityConfigConflict, "sessionAffinityConfig",
		func(a, b *ExportedSpec) bool {
			// Both unset, the common case, without reflection: Merge
			// compares every export of an import (1,000 sources) with the
			// oldest on every reconcile.
			return a.SessionAffinityConfig == b.SessionAffinityConfig ||
				equality.Semantic.DeepEqual(a.SessionAffinityConfig, b.SessionAffinityConfig)
		},
		func(s *ExportedSpec) string { return showAffinityConfig(s.SessionAffinityConfig) }},
	{mcsv1beta1.ServiceExportReasonLabelsConflict, "exportedLabels",
		func(a, b *ExportedSpec) bool { return maps.Equal(a.Labels, b.Labels) },
		func(s *ExportedSpec) string { return showMap(s.Labels) }},
	{mcsv1beta1.ServiceExportReasonAnnotationsConflict, "exportedAnnotations",
		func(a, b *ExportedSpec) bool { return maps.Equal(a.Annotations, b.Annotations) },
		func(s *ExportedSpec) string { return showMap(s.Annotations) }},
	{mcsv1beta1.ServiceExportReasonInternalTrafficPolicyConflict, "internalTrafficPolicy",
		func(a, b *ExportedSpec) bool { return internalPolicy(a) == internalPolicy(b) },
		func(s *ExportedSpec) string { return string(internalPolicy(s)) }},
	{mcsv1beta1.ServiceExportReasonTrafficDistributionConflict, "trafficDistribution",
		func(a, b *ExportedSpec) bool {
			return ptr.Deref(a.TrafficDistribution, "") == ptr.Deref(b.TrafficDistribution, "")
		},
		func(s *ExportedSpec) string { return ptr.Deref(s.TrafficDistribution, "<unset>") }},
	{mcsv1beta1.ServiceExportReasonIPFamilyConflict, "ipFamilies",
		func(a, b *ExportedSpec) bool { return slices.Equal(a.IPFamilies, b.IPFamilies) },
		func(s *ExportedSpec) string { return fmt.Sprint(s.IPFamilies) }},
	{ReasonLocalClusterFirstConflict, LocalClusterFirstAnnotation,
		func(a, b *ExportedSpec) bool { return a.LocalClusterFirst == b.LocalClusterFirst },
		func(s *ExportedSpec) string { return fmt.Sprint(s.LocalClusterFirst) }},
}

// ReasonLocalClusterFirstConflict is the Conflict reason of exports whose
// LocalClusterFirstAnnotation differs (mcs-syncer's own, as the
// annotation is).
const ReasonLocalClusterFirstConflict mcsv1beta1.ServiceExportConditionReason = "LocalClusterFirstConflict"

// affinity and internalPolicy apply the API's defaults, so that an unset
// field equals its default.
func affinity(s *ExportedSpec) corev1.ServiceAffinity {
	return cmp.Or(s.SessionAffinity, corev1.ServiceAffinityNone)
}

func internalPolicy(s *ExportedSpec) corev1.ServiceInternalTrafficPolicy {
	return ptr.Deref(s.InternalTrafficPolicy, corev1.ServiceInternalTrafficPolicyCluster)
}

// SortByAge orders exports oldest first by their Age (ties: lowest
// cluster ID), the order in which they win conflicts.
func SortByAge(exports []*ExportedService) {
	slices.SortStableFunc(exports, func(a, b *ExportedService) int {
		return cmp.Or(a.Age().Compare(b.Age()), cmp.Compare(a.Cluster, b.Cluster))
	})
}

// Merge merges the exports of one namespace/name (in any order) by the
// rules of KEP-1645 and mcs-api v1beta1: the oldest export wins every
// conflict; ports are the union by name (the oldest definition of a name
// wins), and port sets that are not identical in every export (a port
// defined differently, or missing somewhere) are a PortConflict. Merge of
// no exports is the zero Merged.
func Merge(exports []*ExportedService) Merged {
	if len(exports) == 0 {
		return Merged{}
	}
	byAge := slices.Clone(exports)
	SortByAge(byAge)
	oldest := byAge[0]

	m := Merged{Spec: oldest.Spec, Oldest: oldest.Cluster}
	m.Spec.Ports = nil
	for _, es := range byAge {
		m.Clusters = append(m.Clusters, es.Cluster)
	}
	slices.Sort(m.Clusters)

	var reasons []mcsv1beta1.ServiceExportConditionReason
	var messages []string
	from := fmt.Sprintf("from %s (oldest export)", oldest.Cluster)

	// Ports: the union by name, the oldest definition of each name wins.
	for _, es := range byAge {
		for _, p := range es.Spec.Ports {
			if !slices.ContainsFunc(m.Spec.Ports, func(q mcsv1beta1.ServicePort) bool { return q.Name == p.Name }) {
				m.Spec.Ports = append(m.Spec.Ports, p)
			}
		}
	}
	// The standard's PortConflict applies "if the ports are not identical
	// in all the constituent Services": a port defined differently, and a
	// port that some exports lack, both raise it.
	if diffs := portDiffs(byAge, m.Spec.Ports); len(diffs) > 0 {
		reasons = append(reasons, mcsv1beta1.ServiceExportReasonPortConflict)
		messages = append(messages, fmt.Sprintf("ports differ %s: %s", from, strings.Join(diffs, "; ")))
	}

	for _, rule := range fieldRules {
		var diffs []string
		for _, es := range byAge[1:] {
			if !rule.equal(&oldest.Spec, &es.Spec) {
				diffs = append(diffs, fmt.Sprintf("%s has %s", es.Cluster, rule.show(&es.Spec)))
			}
		}
		if len(diffs) > 0 {
			reasons = append(reasons, rule.reason)
			messages = append(messages, fmt.Sprintf("%s differs %s: %s vs %s", rule.field, from, strings.Join(diffs, ", "), rule.show(&oldest.Spec)))
		}
	}
	if len(reasons) > 0 {
		m.Conflict = &Conflict{Reasons: reasons, Message: strings.Join(messages, "; ")}
	}
	return m
}

// portDiffs describes, for each port of the union (the winning
// definitions), the exports that define it differently or not at all.
func portDiffs(byAge []*ExportedService, union []mcsv1beta1.ServicePort) []string {
	var diffs []string
	for _, won := range union {
		var other, otherClusters, missing []string
		var definedBy ClusterID
		for _, es := range byAge {
			i := slices.IndexFunc(es.Spec.Ports, func(q mcsv1beta1.ServicePort) bool { return q.Name == won.Name })
			switch {
			case i < 0:
				missing = append(missing, string(es.Cluster))
			case definedBy == "":
				definedBy = es.Cluster // the oldest definition: the one that won
			case !portEqual(won, es.Spec.Ports[i]):
				other = append(other, fmt.Sprintf("%s has %s", es.Cluster, showPort(es.Spec.Ports[i])))
				otherClusters = append(otherClusters, string(es.Cluster))
			}
		}
		if len(other) > 0 {
			diffs = append(diffs, fmt.Sprintf("%s, %s has %s: the endpoints of %s are left out of port %q",
				strings.Join(other, ", "), definedBy, showPort(won), strings.Join(otherClusters, ", "), won.Name))
		}
		if len(missing) > 0 {
			diffs = append(diffs, fmt.Sprintf("%s from %s is missing in %s", showPort(won), definedBy, strings.Join(missing, ", ")))
		}
	}
	return diffs
}

// ExposedPorts returns the names of the import's ports that es's Service
// defines exactly as the import does (name, protocol, port and
// appProtocol): es's endpoints are imported under these ports and no
// others. KEP-1645, "Service Port": "network traffic to a conflicting port
// should only be directed to endpoints from constituent services that
// actually expose the port."
func (m Merged) ExposedPorts(es *ExportedService) map[string]bool {
	exposed := map[string]bool{}
	for _, p := range m.Spec.Ports {
		if slices.ContainsFunc(es.Spec.Ports, func(q mcsv1beta1.ServicePort) bool { return portEqual(p, q) }) {
			exposed[p.Name] = true
		}
	}
	return exposed
}

func portEqual(a, b mcsv1beta1.ServicePort) bool {
	return a.Name == b.Name && cmp.Or(a.Protocol, corev1.ProtocolTCP) == cmp.Or(b.Protocol, corev1.ProtocolTCP) &&
		a.Port == b.Port && ptr.Deref(a.AppProtocol, "") == ptr.Deref(b.AppProtocol, "")
}

func showPort(p mcsv1beta1.ServicePort) string {
	s := fmt.Sprintf("%q %s/%d", p.Name, strings.ToLower(string(cmp.Or(p.Protocol, corev1.ProtocolTCP))), p.Port)
	if p.AppProtocol != nil {
		s += " appProtocol " + *p.AppProtocol
	}
	return s
}

func showAffinityConfig(c *corev1.SessionAffinityConfig) string {
	if c == nil || c.ClientIP == nil || c.ClientIP.TimeoutSeconds == nil {
		return "<unset>"
	}
	return fmt.Sprintf("clientIP.timeoutSeconds=%d", *c.ClientIP.TimeoutSeconds)
}

func showMap(m map[string]string) string {
	if len(m) == 0 {
		return "{}"
	}
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return "{" + strings.Join(parts, ",") + "}"
}
