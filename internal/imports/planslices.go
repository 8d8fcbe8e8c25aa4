package imports

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

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

// bySourceCluster groups imported slices by their source cluster, and
// names the sources in the order they first appear.
func bySourceCluster(held []*discoveryv1.EndpointSlice) (map[clusterset.ClusterID][]*discoveryv1.EndpointSlice, []clusterset.ClusterID) {
	bySource := map[clusterset.ClusterID][]*discoveryv1.EndpointSlice{} // a few sources, not one per slice
	var named []clusterset.ClusterID
	for _, s := range held {
		id := sourceOf(s)
		if _, ok := bySource[id]; !ok {
			named = append(named, id)
		}
		bySource[id] = append(bySource[id], s)
	}
	return bySource, named
}

// sourceOf returns the source cluster of an imported slice.
func sourceOf(s *discoveryv1.EndpointSlice) clusterset.ClusterID {
	return clusterset.ClusterID(s.Labels[mcsv1beta1.LabelSourceCluster])
}

// membersAnd returns the members, then the others of each of more in
// their order, each once. A set, not a search of the list for each: an
// import has a source per member (1,000 in make bench-scale's largest hub
// load), and a reconcile once built it twice. members is never changed
// (Membership.IDs shares its own).
func membersAnd(members []clusterset.ClusterID, more ...[]clusterset.ClusterID) []clusterset.ClusterID {
	out := slices.Clone(members)
	seen := make(map[clusterset.ClusterID]bool, len(members))
	for _, id := range members {
		seen[id] = true
	}
	for _, ids := range more {
		for _, id := range ids {
			if !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	return out
}

// addressTypesOf returns the address types of the import's IP families;
// without families (an export from a cluster without dual-stack fields),
// both, and the endpoints decide.
func addressTypesOf(families []corev1.IPFamily) []discoveryv1.AddressType {
	if types := reconciler.AddressTypesForIPFamilies(families); len(types) > 0 {
		return types
	}
	return []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6}
}

// desiredGroups returns the endpoint groups of an export (nil: none) that
// the import takes: those of its address types, on the ports the export
// exposes as the import defines them, without the endpoints that the
// consumer's API server would refuse or that lie outside the export's
// cluster's address ranges (importable.go, checked only where they moved:
// checked.go); left counts the endpoints left out.
func desiredGroups(merged clusterset.Merged, es *clusterset.ExportedService, addressTypes []discoveryv1.AddressType, ranges map[clusterset.ClusterID][]netip.Prefix, checked *checkedArrays, key types.NamespacedName) (groups []reconciler.EndpointGroup, left leftOut) {
	if es == nil {
		return nil, left
	}
	exposed := merged.ExposedPorts(es)
	large := es.EndpointCount() >= incrementalPlansFrom
	// The export's own groups when every one is taken as it is (the
	// usual case: a Service of 50,000 endpoints is 500 runs, copied with
	// each change before).
	asItIs := true
	for i, g := range es.Endpoints {
		taken, ok := g, slices.Contains(addressTypes, g.AddressType)
		if !ok {
			left.otherType += len(g.Endpoints)
		} else if taken, ok = onExposedPorts(g, exposed); ok {
			k := checkedKey{key: key, source: es.Cluster, group: i, addressType: g.AddressType}
			taken.Endpoints = checked.importable(k, g.Endpoints, large, ranges[es.Cluster], &left)
		}
		switch {
		case asItIs && ok && sameGroup(taken, g):
			continue
		case asItIs:
			groups = make([]reconciler.EndpointGroup, i, len(es.Endpoints))
			copy(groups, es.Endpoints[:i])
			asItIs = false
		}
		if ok {
			groups = append(groups, taken)
		}
	}
	if asItIs {
		return es.Endpoints, left
	}
	return groups, left
}

// onExposedPorts returns g with only the ports that its cluster exposes as
// the import defines them (Merged.ExposedPorts), so that kube-proxy never
// sends a conflicting port's traffic to a cluster that serves it under
// another number or protocol. A group left with none of its ports is not
// imported at all (false); a group that had no ports (a Service without
// ports) is imported as it is.
func onExposedPorts(g reconciler.EndpointGroup, exposed map[string]bool) (reconciler.EndpointGroup, bool) {
	if len(g.Ports) == 0 {
		return g, true
	}
	isExposed := func(p discoveryv1.EndpointPort) bool { return exposed[ptr.Deref(p.Name, "")] }
	if !slices.ContainsFunc(g.Ports, func(p discoveryv1.EndpointPort) bool { return !isExposed(p) }) {
		return g, true // its very ports: later stages know a group's runs by them
	}
	var ports []discoveryv1.EndpointPort
	for _, p := range g.Ports {
		if isExposed(p) {
			ports = append(ports, p)
		}
	}
	if len(ports) == 0 {
		return g, false
	}
	g.Ports = ports // g is a copy; the Store's group is not changed
	return g, true
}

// sameGroup reports whether a and b are the same group: the same arrays
// of ports and endpoints.
func sameGroup(a, b reconciler.EndpointGroup) bool {
	return a.AddressType == b.AddressType && len(a.Ports) == len(b.Ports) && len(a.Endpoints) == len(b.Endpoints) &&
		(len(a.Ports) == 0 || &a.Ports[0] == &b.Ports[0]) && (len(a.Endpoints) == 0 || &a.Endpoints[0] == &b.Endpoints[0])
}

// sliceLabeler labels the slices of source: the import's name, the source
// cluster and, for a ClusterSetIP import, the derived Service's name.
func sliceLabeler(si *mcsv1beta1.ServiceImport, merged clusterset.Merged, source clusterset.ClusterID) reconciler.Labeler {
	return reconciler.LabelerFunc(func() (map[string]string, map[string]string) {
		l := map[string]string{
			mcsv1beta1.LabelServiceName:   si.Name,
			mcsv1beta1.LabelSourceCluster: string(source),
		}
		// Only for ClusterSetIP: kube-proxy then routes the derived
		// Service's IP to these endpoints. Never the plain Service name,
		// which would mix them into the local Service.
		if merged.Spec.Type == mcsv1beta1.ClusterSetIP {
			l[discoveryv1.LabelServiceName] = DerivedServiceName(client.ObjectKeyFromObject(si))
		}
		return l, nil
	})
}
