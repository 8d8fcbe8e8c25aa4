package export

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// Metrics are the export side's metrics of one mcs-syncer, shared by its
// watchers (Options.Metrics).
type Metrics struct {
	conditions *conditionCounts
}

// NewMetrics registers mcs_syncer_exported_services{cluster}: the number
// of Services each member exports, read from store when scraped (members
// come and go while mcs-syncer runs); and
// mcs_syncer_service_exports_by_condition (conditions.go), which the
// watchers given the returned Metrics keep.
func NewMetrics(reg prometheus.Registerer, store *clusterset.Store) (*Metrics, error) {
	m := &Metrics{conditions: newConditionCounts()}
	if err := errors.Join(reg.Register(&exportedServices{store: store}), reg.Register(m.conditions)); err != nil {
		return nil, err
	}
	return m, nil
}

var exportedServicesDesc = prometheus.NewDesc("mcs_syncer_exported_services",
	"Services the member cluster exports into the clusterset.", []string{"cluster"}, nil)

type exportedServices struct{ store *clusterset.Store }

func (e *exportedServices) Describe(ch chan<- *prometheus.Desc) { ch <- exportedServicesDesc }

func (e *exportedServices) Collect(ch chan<- prometheus.Metric) {
	for id, n := range e.store.Counts() {
		ch <- prometheus.MustNewConstMetric(exportedServicesDesc, prometheus.GaugeValue, float64(n), string(id))
	}
}
