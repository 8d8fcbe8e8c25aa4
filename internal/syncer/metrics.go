package syncer

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/export"
	"github.com/mcs-syncer/mcs-syncer/internal/imports"
	"github.com/mcs-syncer/mcs-syncer/internal/publish"
	"github.com/mcs-syncer/mcs-syncer/internal/version"
)

// registerMetrics registers mcs-syncer's metrics with reg, all but the
// membership's (membership.NewSet registers those), and returns the
// import side's. docs/metrics.md lists them (TestMetricsAreDocumented).
func registerMetrics(reg prometheus.Registerer, store *clusterset.Store) (*imports.Metrics, error) {
	importMetrics, err := imports.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	if err := errors.Join(export.RegisterMetrics(reg, store), publish.RegisterMetrics(reg), version.RegisterBuildInfo(reg)); err != nil {
		return nil, err
	}
	return importMetrics, nil
}
