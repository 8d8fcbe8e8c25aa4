package imports

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// TestSlicesNotWrittenIsNotReady: a consumer whose credentials may not
// create EndpointSlices: the ServiceImport says Ready=False with the API
// server's answer, the exports hear that the import is blocked there, and
// the gauge counts no endpoint; once writes are allowed, all of it clears.
func TestSlicesNotWrittenIsNotReady(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Options{Metrics: m})
	h.fail = func(verb string, obj client.Object) error {
		if _, ok := obj.(*discoveryv1.EndpointSlice); ok && verb == "create" {
			return apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "", nil)
		}
		return nil
	}
	h.put(h.export("east", 0, "10.1.0.1"))
	if _, err := h.c.Reconcile(t.Context(), reconcile.Request{NamespacedName: key}); err == nil {
		t.Fatal("a reconcile whose slices were refused returned no error")
	}
	si := h.serviceImport()
	if got := ready(si); got != "False/"+string(ReasonEndpointSlicesNotWritten) {
		t.Errorf("Ready %s, want False/%s", got, ReasonEndpointSlicesNotWritten)
	}
	if why := h.store.ImportBlocked(key)["north"]; !strings.Contains(why, "could not be written") || !strings.Contains(why, "forbidden") {
		t.Errorf("the exports hear %q, want the slices' refusal", why)
	}
	if got := testutil.ToFloat64(m.imported.vec.WithLabelValues("east", "north")); got != 0 {
		t.Errorf("imported_endpoints %v while nothing was written, want 0", got)
	}

	h.fail = nil
	h.reconcile()
	if got := ready(h.serviceImport()); got != "True/Ready" {
		t.Errorf("Ready %s after the writes went through", got)
	}
	if blocked := h.store.ImportBlocked(key); len(blocked) != 0 {
		t.Errorf("still blocked: %v", blocked)
	}
	if got := testutil.ToFloat64(m.imported.vec.WithLabelValues("east", "north")); got != 1 {
		t.Errorf("imported_endpoints %v, want 1", got)
	}
}

// TestDuplicateAddressesReported: the same address from east and west
// (overlapping pod CIDRs) is imported from both, counted by the
// duplicate_endpoints gauge of each and named in one Warning event; the
// gauge drops when the overlap ends.
func TestDuplicateAddressesReported(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Options{Metrics: m})
	h.put(h.export("east", 0, "10.9.0.1", "10.1.0.2"), h.export("west", 1, "10.9.0.1"))
	h.reconcile()
	if got := h.slicesBySource(); len(got["east"]) != 2 || len(got["west"]) != 1 {
		t.Errorf("slices %v: want both copies imported", got)
	}
	for _, source := range []string{"east", "west"} {
		if got := testutil.ToFloat64(m.duplicate.vec.WithLabelValues(source, "north")); got != 1 {
			t.Errorf("duplicate_endpoints{%s} %v, want 1", source, got)
		}
	}
	ev := h.events()
	if len(ev) != 1 || !strings.Contains(ev[0], "DuplicateAddresses") || !strings.Contains(ev[0], "10.9.0.1 by [east west]") {
		t.Errorf("events %v, want one naming 10.9.0.1 and both clusters", ev)
	}
	h.reconcile()
	if ev := h.events(); len(ev) != 0 {
		t.Errorf("reported again: %v", ev)
	}

	h.put(h.export("west", 1, "10.2.0.1"))
	h.reconcile()
	for _, source := range []string{"east", "west"} {
		if got := testutil.ToFloat64(m.duplicate.vec.WithLabelValues(source, "north")); got != 0 {
			t.Errorf("after the overlap ended: duplicate_endpoints{%s} %v, want 0", source, got)
		}
	}
}
