package imports

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcs-syncer/mcs-syncer/pkg/clusterset"
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
//
// and the reconciler's, as mcs_syncer_endpointslice_reconciler_*.
type Metrics struct {
	latency              *prometheus.HistogramVec
	missing              *prometheus.CounterVec
	imported             *prometheus.GaugeVec
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
	// importedByKey[consumer/source][key] is each import's share of the
	// imported gauge.
	importedByKey map[[2]clusterset.ClusterID]map[types.NamespacedName]int
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
		imported: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcs_syncer_imported_endpoints",
			Help: "Endpoints of the source cluster imported into the consumer cluster, all Services together.",
		}, []string{"source_cluster", "consumer_cluster"}),
		reconcilerRegisterer: prometheus.WrapRegistererWithPrefix("mcs_syncer_", reg),
		importedByKey:        map[[2]clusterset.ClusterID]map[types.NamespacedName]int{},
		accounted:            map[latencyKey]time.Time{},
		start:                time.Now().Truncate(time.Second),
	}
	for _, c := range []prometheus.Collector{m.latency, m.missing, m.imported} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
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
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	pair := [2]clusterset.ClusterID{consumer, source}
	byKey := m.importedByKey[pair]
	if byKey == nil {
		byKey = map[types.NamespacedName]int{}
		m.importedByKey[pair] = byKey
	}
	// Only this import's share changes: add the difference (a sum over
	// every import would cost time in proportion to the imports, per sync).
	delta := endpoints - byKey[key]
	if endpoints == 0 {
		delete(byKey, key)
	} else {
		byKey[key] = endpoints
	}
	m.imported.WithLabelValues(string(source), string(consumer)).Add(float64(delta))
}

// forget drops what the metrics keep of an import that is gone.
func (m *Metrics) forget(consumer clusterset.ClusterID, sources []clusterset.ClusterID, key types.NamespacedName) {
	if m == nil {
		return
	}
	for _, source := range sources {
		m.setImported(source, consumer, key, 0)
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
