package imports

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// Metrics of the import side. Label values are cluster IDs (a bounded,
// configured set), never per-object names.
//
//	mcs_syncer_propagation_latency_seconds{source_cluster,consumer_cluster}
//	    histogram: one observation per endpoint change of the source (each
//	    distinct last-change-trigger-time of its slices), from that time to
//	    the write that brought it into the consumer
//	mcs_syncer_import_namespace_missing_total{consumer_cluster}
//	    counter: imports skipped because the consumer lacks the namespace
//	mcs_syncer_imported_endpoints{source_cluster,consumer_cluster}
//	    gauge: endpoints of the source imported into the consumer, all
//	    Services together
//	mcs_syncer_unimportable_endpoints{source_cluster,consumer_cluster}
//	    gauge: endpoints of the source that the consumer's imports cannot
//	    carry (FQDN, or an IP family the import does not have)
//	mcs_syncer_duplicate_endpoints{source_cluster,consumer_cluster}
//	    gauge: endpoints of the source whose address another source of the
//	    same import exports too (overlapping pod CIDRs); both are imported
//
// and the reconciler's, as mcs_syncer_endpointslice_reconciler_*.
type Metrics struct {
	latency              *prometheus.HistogramVec
	missing              *prometheus.CounterVec
	imported             *shareGauge
	unimportable         *shareGauge
	duplicate            *shareGauge
	reconcilerRegisterer prometheus.Registerer

	// start is when the metrics were made, truncated to the second: changes
	// older than that waited for mcs-syncer to start, not for it to work,
	// and are not observed. Truncated because trigger times often come from
	// timestamps of whole seconds (kube-controller-manager takes them from
	// creation times and condition transitions): a change made in the second
	// mcs-syncer started counts.
	start time.Time

	mu sync.Mutex
	// accounted[consumer, source, key] is the newest trigger time carried
	// by a write into the consumer: changes up to it are observed.
	accounted map[latencyKey]time.Time
}

type latencyKey struct {
	consumer, source clusterset.ClusterID
	key              types.NamespacedName
}

// NewMetrics registers the import metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcs_syncer_propagation_latency_seconds",
			Help:    "Time from each endpoint change in the source cluster (a distinct last-change-trigger-time of its slices) to the write of the imported slices that carried it into the consumer cluster.",
			Buckets: prometheus.ExponentialBucketsRange(0.002, 60, 40),
		}, []string{"source_cluster", "consumer_cluster"}),
		missing: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcs_syncer_import_namespace_missing_total",
			Help: "Imports skipped because the consumer cluster does not have the namespace.",
		}, []string{"consumer_cluster"}),
		imported: newShareGauge("mcs_syncer_imported_endpoints",
			"Endpoints of the source cluster imported into the consumer cluster, all Services together."),
		unimportable: newShareGauge("mcs_syncer_unimportable_endpoints",
			"Endpoints of the source cluster that the consumer cluster's imports cannot carry: FQDN endpoints, an IP family the import does not have, addresses the consumer's API server refuses, or addresses outside the source's address ranges."),
		duplicate: newShareGauge("mcs_syncer_duplicate_endpoints",
			"Endpoints of the source cluster whose address another source cluster of the same import exports too (overlapping pod CIDRs): both are imported."),
		reconcilerRegisterer: prometheus.WrapRegistererWithPrefix("mcs_syncer_", reg),
		accounted:            map[latencyKey]time.Time{},
		start:                time.Now().Truncate(time.Second),
	}
	for _, c := range []prometheus.Collector{m.latency, m.missing, m.imported.vec, m.unimportable.vec, m.duplicate.vec} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	// The reconcilers are made per source as imports come; their metrics
	// are there (at zero) from the start.
	if err := reconciler.RegisterMetrics(m.reconcilerRegisterer); err != nil {
		return nil, err
	}
	return m, nil
}

// propagated records that the consumer now holds source's export es of
// key: written tells whether that took a write. Every change of es not yet
// accounted for is observed once, from its own trigger time: changes that
// arrived while an earlier write was under way and were carried by one
// write each count, so the histogram sees what every change waited. Only a
// write accounts for a change: trigger times are often whole seconds, so
// an export that needed no write (no endpoints yet) and the one that brings
// the endpoints can carry the same time.
func (m *Metrics) propagated(source, consumer clusterset.ClusterID, key types.NamespacedName, es *clusterset.ExportedService, written bool) {
	if m == nil || es == nil || es.LastChangeTriggerTime.IsZero() || !written {
		return
	}
	now := time.Now()
	lk := latencyKey{consumer: consumer, source: source, key: key}
	m.mu.Lock()
	accounted := m.accounted[lk]
	if es.LastChangeTriggerTime.After(accounted) {
		m.accounted[lk] = es.LastChangeTriggerTime
	}
	m.mu.Unlock()
	observer := m.latency.WithLabelValues(string(source), string(consumer))
	for _, t := range es.ChangeTriggerTimes() {
		if t.After(accounted) && !t.Before(m.start) {
			observer.Observe(now.Sub(t).Seconds())
		}
	}
}

// setImported records how many endpoints of source one import holds in
// consumer.
func (m *Metrics) setImported(source, consumer clusterset.ClusterID, key types.NamespacedName, endpoints int) {
	if m != nil {
		m.imported.set(source, consumer, key, endpoints)
	}
}

// setUnimportable records how many endpoints of source one import cannot
// carry, and reports whether that changed.
func (m *Metrics) setUnimportable(source, consumer clusterset.ClusterID, key types.NamespacedName, endpoints int) bool {
	return m != nil && m.unimportable.set(source, consumer, key, endpoints)
}

// setDuplicate records how many endpoints of source one import shares
// addresses with another source, and reports whether that changed.
func (m *Metrics) setDuplicate(source, consumer clusterset.ClusterID, key types.NamespacedName, endpoints int) bool {
	return m != nil && m.duplicate.set(source, consumer, key, endpoints)
}

// shareGauge is a gauge by source and consumer that sums the shares of
// every import: a sync replaces its own share only (a sum over every
// import would cost time in proportion to the imports, per sync).
type shareGauge struct {
	vec *prometheus.GaugeVec
	mu  sync.Mutex
	// byKey[consumer/source][key] is each import's share.
	byKey map[[2]clusterset.ClusterID]map[types.NamespacedName]int
}

func newShareGauge(name, help string) *shareGauge {
	return &shareGauge{
		vec:   prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"source_cluster", "consumer_cluster"}),
		byKey: map[[2]clusterset.ClusterID]map[types.NamespacedName]int{},
	}
}

// set replaces one import's share and reports whether it changed.
func (g *shareGauge) set(source, consumer clusterset.ClusterID, key types.NamespacedName, n int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	pair := [2]clusterset.ClusterID{consumer, source}
	shares := g.byKey[pair]
	if shares == nil {
		shares = map[types.NamespacedName]int{}
		g.byKey[pair] = shares
	}
	delta := n - shares[key]
	if n == 0 {
		delete(shares, key)
	} else {
		shares[key] = n
	}
	if delta != 0 {
		g.vec.WithLabelValues(string(source), string(consumer)).Add(float64(delta))
	}
	return delta != 0
}

// forget drops what the metrics keep of an import that is gone.
func (m *Metrics) forget(consumer clusterset.ClusterID, sources []clusterset.ClusterID, key types.NamespacedName) {
	if m == nil {
		return
	}
	for _, source := range sources {
		m.imported.set(source, consumer, key, 0)
		m.unimportable.set(source, consumer, key, 0)
		m.duplicate.set(source, consumer, key, 0)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, source := range sources {
		delete(m.accounted, latencyKey{consumer: consumer, source: source, key: key})
	}
}

func (m *Metrics) namespaceMissing(consumer clusterset.ClusterID) {
	if m == nil {
		return
	}
	m.missing.WithLabelValues(string(consumer)).Inc()
}
