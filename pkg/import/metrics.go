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
//	    histogram: from the source slice's last-change-trigger-time to the
//	    write of the imported slices in the consumer
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

	mu sync.Mutex
	// importedByKey[consumer/source][key] is each import's share of the
	// imported gauge.
	importedByKey map[[2]clusterset.ClusterID]map[types.NamespacedName]int
}

// NewMetrics registers the import metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcs_syncer_propagation_latency_seconds",
			Help:    "Time from an endpoint change in the source cluster (its slice's last-change-trigger-time) to the write of the imported slices in the consumer cluster.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
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
	}
	for _, c := range []prometheus.Collector{m.latency, m.missing, m.imported} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// written records a write of source's slices into consumer.
func (m *Metrics) written(source, consumer clusterset.ClusterID, es *clusterset.ExportedService) {
	if m == nil || es == nil || es.LastChangeTriggerTime.IsZero() {
		return
	}
	m.latency.WithLabelValues(string(source), string(consumer)).Observe(time.Since(es.LastChangeTriggerTime).Seconds())
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
	if endpoints == 0 {
		delete(byKey, key)
	} else {
		byKey[key] = endpoints
	}
	total := 0
	for _, n := range byKey {
		total += n
	}
	m.imported.WithLabelValues(string(source), string(consumer)).Set(float64(total))
}

func (m *Metrics) namespaceMissing(consumer clusterset.ClusterID) {
	if m == nil {
		return
	}
	m.missing.WithLabelValues(string(consumer)).Inc()
}
