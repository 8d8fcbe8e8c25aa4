package reconciler

import (
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/reconcilertest"
)

// TestMetrics: writes are counted by operation, and the gauges count the
// endpoints and slices of every address type (dual-stack counts both).
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	client := reconcilertest.NewClientset()
	r := newReconciler(t, client, WithMetrics(reg))
	svc := service()
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	pods := readyPods(150)
	for i, p := range pods {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: "fd00::" + strconv.FormatInt(int64(i+1), 16)})
	}
	reconcileService(t, r, client, svc, pods)

	m := r.metrics
	if got := testutil.ToFloat64(m.changes.WithLabelValues(opCreate)); got != 4 {
		t.Errorf("creates counted %v, want 4 (2 slices per family)", got)
	}
	if got := testutil.ToFloat64(m.endpointsDesired); got != 300 {
		t.Errorf("endpoints_desired %v, want 300 (150 per family)", got)
	}
	if got := testutil.ToFloat64(m.numSlices); got != 4 {
		t.Errorf("num_endpoint_slices %v, want 4", got)
	}
	if got := testutil.ToFloat64(m.desiredSlices); got != 4 {
		t.Errorf("desired_endpoint_slices %v, want 4", got)
	}

	// Scale down: the gauges replace this owner's share, not add to it.
	reconcileService(t, r, client, svc, pods[:20])
	if got := testutil.ToFloat64(m.endpointsDesired); got != 40 {
		t.Errorf("endpoints_desired after scale-down %v, want 40", got)
	}
	if got := testutil.ToFloat64(m.syncs.WithLabelValues(syncResultSuccess)); got != 2 {
		t.Errorf("successful syncs %v, want 2", got)
	}
	r.Forget(svc.UID)
	if got := testutil.ToFloat64(m.endpointsDesired); got != 0 {
		t.Errorf("endpoints_desired after Forget %v, want 0", got)
	}

	// A second reconciler on the same registry shares the metrics.
	r2, err := New(client.DiscoveryV1(), "other", WithMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	if r2.metrics.changes != r.metrics.changes {
		t.Error("a second reconciler did not reuse the registered metrics")
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	for _, want := range []string{
		"endpointslice_reconciler_changes_total", "endpointslice_reconciler_syncs_total",
		"endpointslice_reconciler_endpoints_desired", "endpointslice_reconciler_endpoints_added_per_sync",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("registry lacks %s (has %v)", want, names)
		}
	}
}

// TestMetricsAfterRestart: a new reconciler whose first plan for an owner is
// empty (its slices were written before a restart) still reports the
// owner's figures, and a plan over a stale cache is counted as stale.
func TestMetricsAfterRestart(t *testing.T) {
	client := reconcilertest.NewClientset()
	svc := service()
	pods := readyPods(4)
	reconcileService(t, newReconciler(t, client, WithMaxEndpointsPerSlice(2)), client, svc, pods)

	restarted := newReconciler(t, client, WithMaxEndpointsPerSlice(2), WithMetrics(prometheus.NewRegistry()))
	plan, err := restarted.Plan(serviceInput(t, client, svc, pods))
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Empty() {
		t.Fatalf("plan after restart: %s, want empty", plan)
	}
	if err := restarted.Apply(t.Context(), plan); err != nil {
		t.Fatal(err)
	}
	m := restarted.metrics
	if got := testutil.ToFloat64(m.endpointsDesired); got != 4 {
		t.Errorf("endpoints_desired %v, want 4", got)
	}
	if got := testutil.ToFloat64(m.numSlices); got != 2 {
		t.Errorf("num_endpoint_slices %v, want 2", got)
	}

	// The tracker knows of a slice the cache does not list yet.
	in := serviceInput(t, client, svc, pods)
	restarted.Tracker().written(svc.UID, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-new", Generation: 1}})
	if _, err := restarted.Plan(in); !errors.Is(err, ErrStaleCache) {
		t.Fatalf("plan over a stale cache: %v", err)
	}
	if got := testutil.ToFloat64(m.syncs.WithLabelValues(syncResultStale)); got != 1 {
		t.Errorf("syncs_total{result=stale} %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.syncs.WithLabelValues(syncResultSuccess)); got != 1 {
		t.Errorf("syncs_total{result=success} %v, want 1", got)
	}
}
