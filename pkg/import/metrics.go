package imports

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
//
// and the reconciler's, as mcs_syncer_endpointslice_reconciler_*.
type Metrics struct {
	latency              *prometheus.HistogramVec
	missing              *prometheus.CounterVec
	reconcilerRegisterer prometheus.Registerer
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
		reconcilerRegisterer: prometheus.WrapRegistererWithPrefix("mcs_syncer_", reg),
	}
	for _, c := range []prometheus.Collector{m.latency, m.missing} {
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

func (m *Metrics) namespaceMissing(consumer clusterset.ClusterID) {
	if m == nil {
		return
	}
	m.missing.WithLabelValues(string(consumer)).Inc()
}
