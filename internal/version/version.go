package version

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Version and Revision are set at link time:
//
//	-ldflags "-X github.com/mcs-syncer/mcs-syncer/internal/version.Version=v0.3.0
//	          -X github.com/mcs-syncer/mcs-syncer/internal/version.Revision=<commit>"
//
// A plain `go build` leaves Version "dev"; Revision then falls back to the
// commit Go's VCS stamping recorded, if any.
var (
	Version  = "dev"
	Revision = ""
)

// Get returns the version and the revision ("unknown" when neither the
// linker nor Go's VCS stamping set one).
func Get() (version, revision string) {
	revision = Revision
	if revision == "" {
		revision = "unknown"
		if info, ok := debug.ReadBuildInfo(); ok {
			for _, s := range info.Settings {
				if s.Key == "vcs.revision" {
					revision = s.Value
				}
			}
		}
	}
	return Version, revision
}

// String is what `mcs-syncer --version` prints.
func String() string {
	v, r := Get()
	return fmt.Sprintf("mcs-syncer %s (revision %s, %s %s/%s)", v, r, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// RegisterBuildInfo registers mcs_syncer_build_info{version,revision,goversion},
// always 1: the usual way to see from metrics which build runs where, and
// when a rolling update reached each replica.
func RegisterBuildInfo(reg prometheus.Registerer) error {
	v, r := Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "mcs_syncer_build_info",
		Help:        "The build of this mcs-syncer: its version, source revision and Go version; always 1.",
		ConstLabels: prometheus.Labels{"version": v, "revision": r, "goversion": runtime.Version()},
	})
	g.Set(1)
	return reg.Register(g)
}
