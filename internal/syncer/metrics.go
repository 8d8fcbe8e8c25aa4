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

// metrics are one mcs-syncer's metrics (and, with them, what its
// publication readers share), all but the membership's (membership.NewSet
// registers those): nothing of them is the package's, so two mcs-syncers
// in one process share nothing.
type metrics struct {
	imports *imports.Metrics
	exports *export.Metrics
	readers *publish.ReaderGroup
}

// registerMetrics registers mcs-syncer's metrics with reg. docs/metrics.md
// lists them (TestMetricsAreDocumented).
func registerMetrics(reg prometheus.Registerer, store *clusterset.Store) (*metrics, error) {
	importMetrics, err := imports.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	exportMetrics, err := export.NewMetrics(reg, store)
	if err != nil {
		return nil, err
	}
	readers := publish.NewReaderGroup()
	if err := errors.Join(readers.RegisterMetrics(reg), version.RegisterBuildInfo(reg)); err != nil {
		return nil, err
	}
	return &metrics{imports: importMetrics, exports: exportMetrics, readers: readers}, nil
}
