package imports

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
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

// endpointsIn counts the endpoints of slices.
func endpointsIn(held []*discoveryv1.EndpointSlice) int {
	n := 0
	for _, s := range held {
		n += len(s.Endpoints)
	}
	return n
}
