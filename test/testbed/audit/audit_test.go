package audit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCountWrites: only mcs-syncer's writes in the window count; Lease
// writes, markers' heartbeats and leader election events are renewals,
// reported apart from the work.
func TestCountWrites(t *testing.T) {
	lines := []string{
		`{"verb":"create","userAgent":"mcs-syncer/v0.1.0","objectRef":{"resource":"serviceimports","name":"web"},"requestReceivedTimestamp":"2026-01-01T00:00:01Z","responseStatus":{"metadata":{},"code":201}}`,
		`{"verb":"update","userAgent":"mcs-syncer/v0.1.0","objectRef":{"resource":"endpointslices","name":"web-east-abc"},"requestReceivedTimestamp":"2026-01-01T00:00:02Z"}`,
		`{"verb":"update","userAgent":"mcs-syncer/v0.1.0","objectRef":{"resource":"leases","name":"mcs-syncer-demo"},"requestReceivedTimestamp":"2026-01-01T00:00:02Z"}`,
		`{"verb":"create","userAgent":"mcs-syncer/v0.1.0","objectRef":{"resource":"events","name":"mcs-syncer-demo.18a2b"},"requestReceivedTimestamp":"2026-01-01T00:00:02Z"}`,
		`{"verb":"update","userAgent":"mcs-syncer/v0.1.0","objectRef":{"resource":"publishedexports","name":"east"},"requestReceivedTimestamp":"2026-01-01T00:00:02Z"}`,
		`{"verb":"create","userAgent":"mcs-syncer/v0.1.0","objectRef":{"resource":"events","name":"web.18a2c"},"requestReceivedTimestamp":"2026-01-01T00:00:02Z"}`,
		`{"verb":"update","userAgent":"kube-controller-manager/v1.36.3","objectRef":{"resource":"endpointslices","name":"web-x"},"requestReceivedTimestamp":"2026-01-01T00:00:02Z"}`,
		`{"verb":"create","userAgent":"mcs-syncer/v0.1.0","objectRef":{"resource":"serviceimports","name":"late"},"requestReceivedTimestamp":"2026-01-01T00:00:09Z"}`,
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	from, to := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 5, 0, time.UTC)
	w, err := CountWrites([]string{path}, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if w.Total() != 3 || w["serviceimports create"] != 1 || w["endpointslices update"] != 1 || w["events create"] != 1 {
		t.Errorf("work: %v (total %d), want a create of serviceimports, an update of endpointslices and web's event", w, w.Total())
	}
	if w.Leases() != 3 {
		t.Errorf("renewals: %d, want the Lease update, its leader election event and the heartbeat: %v", w.Leases(), w)
	}
	listed, err := ListWrites([]string{path}, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 3 || !strings.HasPrefix(listed[0], "serviceimports create /web at ") || !strings.HasSuffix(listed[0], " (201)") {
		t.Errorf("ListWrites: %q, want the three writes of the work", listed)
	}
}
