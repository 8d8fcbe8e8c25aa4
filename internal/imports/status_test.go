package imports

import (
	"errors"
	"fmt"
	"slices"
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
	if why := h.feedback.ImportBlocked(key)["north"]; !strings.Contains(why, "could not be written") || !strings.Contains(why, "forbidden") {
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
	if blocked := h.feedback.ImportBlocked(key); len(blocked) != 0 {
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

// TestRefusedSlicesBackOff: a consumer whose API server refuses every
// slice create (a quota of 0 EndpointSlices), naming the slice it
// generated a name for, a new one each try. Each try reads the same: the
// ServiceImport's status is written once, the exports hear one reason,
// and the Warning events are identical (so that they aggregate). The
// controller's own notice that the import is blocked does not requeue the
// key: only the controller's backoff tries it again.
func TestRefusedSlicesBackOff(t *testing.T) {
	h := newHarness(t, Options{})
	tries := 0
	h.fail = func(verb string, obj client.Object) error {
		if _, ok := obj.(*discoveryv1.EndpointSlice); ok && verb == "create" {
			tries++
			return apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"},
				fmt.Sprintf("%s%05d", obj.GetGenerateName(), tries), errors.New("exceeded quota: no-slices, requested: count/endpointslices.discovery.k8s.io=1"))
		}
		return nil
	}
	h.put(h.export("east", 0, "10.1.0.1"))
	in := h.start()
	var whys []string
	for try := range 5 {
		req, _ := in.q.Get()
		if _, err := h.c.Reconcile(t.Context(), req); err == nil {
			t.Fatal("a reconcile whose slices were refused returned no error")
		}
		in.q.Done(req)
		whys = append(whys, h.feedback.ImportBlocked(key)["north"])
		if in.q.Len() != 0 {
			t.Fatalf("try %d: the key is queued again at once (%d queued): only the backoff may retry it", try, in.q.Len())
		}
		in.q.Add(req) // what the backoff does, later
	}
	if tries != 5 {
		t.Fatalf("%d creates tried, want 5", tries)
	}
	for _, why := range whys[1:] {
		if why != whys[0] {
			t.Fatalf("the exports hear a new reason each try: %q", whys)
		}
	}
	if strings.Contains(whys[0], "00001") || !strings.Contains(whys[0], "exceeded quota") {
		t.Errorf("the exports hear %q: want the quota's refusal, without the generated name", whys[0])
	}
	statusWrites := 0
	for _, w := range h.takeWrites() {
		if strings.HasPrefix(w, "update/status ServiceImport") {
			statusWrites++
		}
	}
	if statusWrites != 1 {
		t.Errorf("ServiceImport status written %d times over 5 tries, want once", statusWrites)
	}
	var failed []string
	for _, e := range h.events() {
		if strings.Contains(e, "FailedToUpdateEndpointSlices") {
			failed = append(failed, e)
		}
	}
	if len(failed) != 5 || slices.Compact(slices.Clone(failed))[0] != failed[0] || len(slices.Compact(slices.Clone(failed))) != 1 {
		t.Errorf("events %q: want 5 identical ones (the recorder aggregates them into a series)", failed)
	}
}

// TestCacheBehindOwnWriteWritesNothingAgain: an import tried again (here
// on the backoff of a refused slice create) before the cache has heard of
// the controller's own writes reads the ServiceImport and the derived
// Service as it wrote them, not as they were: nothing is written again
// (each such write was refused by the API server for its stale
// resourceVersion: a 409 per try, several in an import's first second).
func TestCacheBehindOwnWriteWritesNothingAgain(t *testing.T) {
	h := newHarness(t, Options{})
	h.fail = func(verb string, obj client.Object) error {
		if _, ok := obj.(*discoveryv1.EndpointSlice); ok && verb == "create" {
			return apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"},
				obj.GetGenerateName()+"x", errors.New("exceeded quota: no-slices"))
		}
		return nil
	}
	h.put(h.export("east", 0, "10.1.0.1"))
	if _, err := h.c.Reconcile(t.Context(), reconcile.Request{NamespacedName: key}); err == nil {
		t.Fatal("a reconcile whose slices were refused returned no error")
	}
	first := h.takeWrites()
	if !slices.Contains(first, "update/status ServiceImport ns/web") || !slices.Contains(first, "update ServiceImport ns/web") {
		t.Fatalf("first try wrote %q: want the ServiceImport's spec.ips and status updated", first)
	}
	h.behind = true
	for try := range 3 {
		if _, err := h.c.Reconcile(t.Context(), reconcile.Request{NamespacedName: key}); err == nil || apierrors.IsConflict(err) {
			t.Fatalf("try %d: %v, want the slice's refusal", try, err)
		}
		for _, w := range h.takeWrites() {
			if !strings.Contains(w, "EndpointSlice") {
				t.Errorf("try %d from a cache behind the first: %s written again", try, w)
			}
		}
	}
	h.behind = false
	if got := h.serviceImport(); len(got.Spec.IPs) != 1 || !strings.Contains(readyMessage(got.Status), "exceeded quota") {
		t.Errorf("the ServiceImport holds ips %v and Ready %q", got.Spec.IPs, readyMessage(got.Status))
	}
}
