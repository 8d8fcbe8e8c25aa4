package imports

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// applySlicesPlan applies the slices' plan (planSlices) source by source,
// records which sources are up to date (known) and reports whether the
// import has any slice once done.
func (c *Controller) applySlicesPlan(ctx context.Context, si *mcsv1beta1.ServiceImport, exports []*clusterset.ExportedService, plan slicesPlan, known settledSources) (present bool, err error) {
	c.reportDuplicates(si, exports, plan.sources)
	present = plan.present
	var errs []error
	for _, p := range plan.planned {
		left, wrote, err := c.applySourceSlices(ctx, si, p)
		if err != nil {
			errs = append(errs, fmt.Errorf("EndpointSlices from %s: %w", p.source, err))
		}
		known.record(p.source, p.settled, p.remember && err == nil && !wrote)
		present = present || left > 0
	}
	return present, errors.Join(errs...)
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

// applySourceSlices reconciles the slices of one source as p says, and
// returns how many slices the import then has from it and whether it
// wrote any.
func (c *Controller) applySourceSlices(ctx context.Context, si *mcsv1beta1.ServiceImport, p sourcePlan) (left int, wrote bool, err error) {
	existing := p.input.Existing
	key := client.ObjectKeyFromObject(si)
	if p.export == nil {
		c.checked.forget(key, p.source)
	}
	skipped := p.leftOut.total()
	if c.opts.Metrics.setUnimportable(p.source, c.opts.Consumer, key, skipped) && skipped > 0 && c.recorder != nil {
		c.recorder.Eventf(si, nil, corev1.EventTypeWarning, "EndpointsNotImported", "Import",
			"%d endpoints from %s are not imported: %s", skipped, p.source, p.leftOut)
	}
	r := c.reconcilerFor(p.source)
	plan, err := r.Plan(p.input)
	wrote = err == nil && !plan.Empty()
	if wrote {
		// What an importer writes, and from what: a write that no change
		// explains (an importer's restart) is found with -v=2.
		log.FromContext(ctx).V(2).Info("Imported EndpointSlices written", "serviceImport", key, "source", p.source,
			"exported", p.export != nil, "endpoints", p.endpoints, "held", len(existing), "plan", plan.String())
	}
	if err == nil {
		// Applied even when empty: it writes nothing then, but keeps the
		// reconciler's metrics true.
		err = r.Apply(ctx, plan)
	}
	if err != nil {
		// The gauge counts what the consumer holds, not what was meant to
		// be written: what was there before (the next reconcile recounts).
		c.opts.Metrics.setImported(p.source, c.opts.Consumer, key, endpointsIn(existing))
		return len(existing), wrote, err
	}
	c.opts.Metrics.setImported(p.source, c.opts.Consumer, key, p.endpoints)
	c.opts.Metrics.propagated(p.source, c.opts.Consumer, key, p.export, !plan.Empty())
	return len(existing) + len(plan.Create) - len(plan.Delete), wrote, nil
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

// sameGroup reports whether a and b are the same group: the same arrays
// of ports and endpoints.
func sameGroup(a, b reconciler.EndpointGroup) bool {
	return a.AddressType == b.AddressType && len(a.Ports) == len(b.Ports) && len(a.Endpoints) == len(b.Endpoints) &&
		(len(a.Ports) == 0 || &a.Ports[0] == &b.Ports[0]) && (len(a.Endpoints) == 0 || &a.Endpoints[0] == &b.Endpoints[0])
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

// reportDuplicates finds the addresses that more than one source of the
// import exports (overlapping pod CIDRs: kube-proxy would balance over
// both entries as if they were two endpoints, and reach only one of
// them). Both are imported, as the standard has no rule for it; the
// duplicate_endpoints gauge counts them, and a Warning event on the
// ServiceImport names the clusters whenever their number changes.
//
// sources are every member and every exporter: each one's share is set,
// so that one that stopped exporting drops to 0.
func (c *Controller) reportDuplicates(si *mcsv1beta1.ServiceImport, exports []*clusterset.ExportedService, sources []clusterset.ClusterID) {
	key := client.ObjectKeyFromObject(si)
	r := c.addresses.update(key, exports)
	changed := false
	for _, id := range sources {
		changed = c.opts.Metrics.setDuplicate(id, c.opts.Consumer, key, r.Shared[id]) || changed
	}
	if changed && r.Duplicated > 0 && c.recorder != nil {
		c.recorder.Eventf(si, nil, corev1.EventTypeWarning, "DuplicateAddresses", "Import",
			"%d addresses are exported by more than one of %v (overlapping pod CIDRs?), e.g. %s by %v: each is imported once per cluster",
			r.Duplicated, slices.Sorted(maps.Keys(r.Shared)), r.Example, r.ExampleSources)
	}
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

// endpointsIn counts the endpoints of slices.
func endpointsIn(held []*discoveryv1.EndpointSlice) int {
	n := 0
	for _, s := range held {
		n += len(s.Endpoints)
	}
	return n
}

// sourceOf returns the source cluster of an imported slice.
func sourceOf(s *discoveryv1.EndpointSlice) clusterset.ClusterID {
	return clusterset.ClusterID(s.Labels[mcsv1beta1.LabelSourceCluster])
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
