package version

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBuildInfoCarriesTheStampedVersion(t *testing.T) {
	defer func(v, r string) { Version, Revision = v, r }(Version, Revision)
	Version, Revision = "v1.2.3", "abc123"
	reg := prometheus.NewRegistry()
	if err := RegisterBuildInfo(reg); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP mcs_syncer_build_info The build of this mcs-syncer: its version, source revision and Go version; always 1.
# TYPE mcs_syncer_build_info gauge
mcs_syncer_build_info{goversion="` + goVersion() + `",revision="abc123",version="v1.2.3"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcs_syncer_build_info"); err != nil {
		t.Error(err)
	}
	if s := String(); !strings.HasPrefix(s, "mcs-syncer v1.2.3 (revision abc123, ") {
		t.Errorf("String() = %q", s)
	}
}

func TestRevisionIsNeverEmpty(t *testing.T) {
	defer func(r string) { Revision = r }(Revision)
	Revision = ""
	if _, r := Get(); r == "" {
		t.Error("Get() returned an empty revision: the gauge's label would be empty")
	}
}

func goVersion() string { return runtime.Version() }
