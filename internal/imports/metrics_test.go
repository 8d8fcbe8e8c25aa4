package imports

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// latencyCount returns how many observations the latency histogram holds.
func latencyCount(t *testing.T, reg *prometheus.Registry) uint64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, f := range families {
		if f.GetName() == "mcs_syncer_propagation_latency_seconds" {
			for _, m := range f.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return n
}

// TestLatencyObservesEveryChangeOnce: changes carried by one write are
// observed each; a change is never observed twice; changes older than the
// start, and exports that needed no write, observe nothing.
func TestLatencyObservesEveryChangeOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "ns", Name: "svc"}
	export := func(times ...time.Time) *clusterset.ExportedService {
		return &clusterset.ExportedService{Cluster: "east", Key: key, LastChangeTriggerTime: times[len(times)-1], RecentTriggerTimes: times}
	}
	beforeStart := m.start.Add(-time.Hour)
	// The start's own second counts: trigger times are often whole seconds.
	t1, t2, t3 := m.start, m.start.Add(2*time.Millisecond), m.start.Add(3*time.Millisecond)

	m.propagated("east", "west", key, export(beforeStart), true)
	if n := latencyCount(t, reg); n != 0 {
		t.Fatalf("a change from before the start was observed (%d)", n)
	}
	m.propagated("east", "west", key, export(beforeStart, t1, t2), true)
	if n := latencyCount(t, reg); n != 2 {
		t.Fatalf("two changes in one write: %d observations, want 2", n)
	}
	m.propagated("east", "west", key, export(t1, t2), true)
	if n := latencyCount(t, reg); n != 2 {
		t.Fatalf("the same changes again: %d observations, want still 2", n)
	}
	// An export that needed no write (say, no endpoints yet) and the one
	// that brings the endpoints can carry the same whole-second trigger
	// time: the write counts it.
	m.propagated("east", "west", key, export(t1, t2, t3), false)
	if n := latencyCount(t, reg); n != 2 {
		t.Fatalf("an export that needed no write was observed: %d observations", n)
	}
	m.propagated("east", "west", key, export(t1, t2, t3), true)
	if n := latencyCount(t, reg); n != 3 {
		t.Fatalf("the write of a change seen before without a write: %d observations, want 3", n)
	}
	m.propagated("east", "north", key, export(t1, t2, t3), true)
	if got := testutil.CollectAndCount(m.latency); got != 2 {
		t.Errorf("%d series, want one per consumer", got)
	}
	if n := latencyCount(t, reg); n != 6 {
		t.Errorf("another consumer: %d observations, want 3+3", n)
	}
	m.forget("north", []clusterset.ClusterID{"east"}, key)
	m.propagated("east", "north", key, export(t1, t2, t3), true)
	if n := latencyCount(t, reg); n != 9 {
		t.Errorf("after forget, the import is new: %d observations, want 9", n)
	}
}

func TestImportedEndpointsGaugeSumsImports(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	m.setImported("east", "west", a, 3)
	m.setImported("east", "west", b, 4)
	m.setImported("east", "west", a, 1)
	if got := testutil.ToFloat64(m.imported.vec.WithLabelValues("east", "west")); got != 5 {
		t.Errorf("gauge %v, want 5", got)
	}
	m.forget("west", []clusterset.ClusterID{"east"}, b)
	if got := testutil.ToFloat64(m.imported.vec.WithLabelValues("east", "west")); got != 1 {
		t.Errorf("after forget: %v, want 1", got)
	}
}
