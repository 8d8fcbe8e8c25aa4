package reconciler

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// The reconciler's metrics, under the name prefix
// endpointslice_reconciler_ (wrap the registerer, e.g. with
// prometheus.WrapRegistererWithPrefix, to put your component's name before
// it). No label carries a per-object value.
//
//	endpoints_added_per_sync     histogram  endpoints added to slices by one reconcile
//	endpoints_removed_per_sync   histogram  endpoints removed from slices by one reconcile
//	endpointslices_changed_per_sync histogram  slices created, updated or deleted by one reconcile
//	endpoints_desired            gauge      desired endpoints of all owners, every address type
//	num_endpoint_slices          gauge      slices of all owners after the last reconciles
//	desired_endpoint_slices      gauge      slices all owners would need if packed full
//	changes_total{operation}     counter    writes; operation: create, update, delete
//	syncs_total{result}          counter    reconciles; result: success, error, stale
const (
	metricsSubsystem = "endpointslice_reconciler"

	opCreate = "create"
	opUpdate = "update"
	opDelete = "delete"

	syncResultSuccess = "success"
	syncResultError   = "error"
	syncResultStale   = "stale"
)

type metrics struct {
	added, removed, changedPerSync             prometheus.Histogram
	endpointsDesired, numSlices, desiredSlices prometheus.Gauge
	changes, syncs                             *prometheus.CounterVec

	// The gauges are sums over owners: each owner's last figures are kept
	// so that a reconcile replaces its own share.
	mu      sync.Mutex
	byOwner map[types.UID]ownerFigures
}

// ownerFigures are one owner's share of the gauges.
type ownerFigures struct {
	endpoints, slices, desiredSlices int
}

func newUnregisteredMetrics() *metrics {
	sizes := prometheus.ExponentialBuckets(2, 2, 15)
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Subsystem: metricsSubsystem, Name: name, Help: help}
	}
	hist := func(name, help string) prometheus.Histogram {
		o := opts(name, help)
		return prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: o.Subsystem, Name: o.Name, Help: o.Help, Buckets: sizes})
	}
	return &metrics{
		added:            hist("endpoints_added_per_sync", "Endpoints added to EndpointSlices by one reconcile."),
		removed:          hist("endpoints_removed_per_sync", "Endpoints removed from EndpointSlices by one reconcile."),
		changedPerSync:   hist("endpointslices_changed_per_sync", "EndpointSlices created, updated or deleted by one reconcile."),
		endpointsDesired: prometheus.NewGauge(prometheus.GaugeOpts(opts("endpoints_desired", "Desired endpoints of all owners, every address type."))),
		numSlices:        prometheus.NewGauge(prometheus.GaugeOpts(opts("num_endpoint_slices", "EndpointSlices of all owners after their last reconcile."))),
		desiredSlices:    prometheus.NewGauge(prometheus.GaugeOpts(opts("desired_endpoint_slices", "EndpointSlices all owners would need if every slice were full."))),
		changes:          prometheus.NewCounterVec(prometheus.CounterOpts(opts("changes_total", "EndpointSlice writes, by operation (create, update, delete).")), []string{"operation"}),
		syncs:            prometheus.NewCounterVec(prometheus.CounterOpts(opts("syncs_total", "Reconciles, by result (success, error, stale).")), []string{"result"}),
		byOwner:          map[types.UID]ownerFigures{},
	}
}

// newMetrics registers the metrics with reg; where reg already has them
// (another reconciler registered them), those are used.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := newUnregisteredMetrics()
	register := func(c prometheus.Collector) (prometheus.Collector, error) {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return are.ExistingCollector, nil
			}
			return nil, err
		}
		return c, nil
	}
	var errs []error
	for _, c := range []any{&m.added, &m.removed, &m.changedPerSync, &m.endpointsDesired, &m.numSlices, &m.desiredSlices, &m.changes, &m.syncs} {
		var got prometheus.Collector
		var err error
		switch p := c.(type) {
		case *prometheus.Histogram:
			if got, err = register(*p); err == nil {
				*p = got.(prometheus.Histogram)
			}
		case *prometheus.Gauge:
			if got, err = register(*p); err == nil {
				*p = got.(prometheus.Gauge)
			}
		case **prometheus.CounterVec:
			if got, err = register(*p); err == nil {
				*p = got.(*prometheus.CounterVec)
			}
		}
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}

// setOwner replaces an owner's share of the gauges.
func (m *metrics) setOwner(owner types.UID, f ownerFigures) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.byOwner[owner]
	m.byOwner[owner] = f
	m.endpointsDesired.Add(float64(f.endpoints - old.endpoints))
	m.numSlices.Add(float64(f.slices - old.slices))
	m.desiredSlices.Add(float64(f.desiredSlices - old.desiredSlices))
}

func (m *metrics) forgetOwner(owner types.UID) {
	m.setOwner(owner, ownerFigures{})
	m.mu.Lock()
	delete(m.byOwner, owner)
	m.mu.Unlock()
}
