package imports

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// TestLargeImportFollowsSharedChanges: an import of more endpoints than
// incrementalPlansFrom, changed as the export watcher changes an export
// (a new array sharing the unchanged endpoints: conditions flipped,
// endpoints added and removed, an address the API server refuses put in
// and taken out), holds after each reconcile exactly the export's
// importable endpoints with their conditions: what the import checks and
// plans only where the export moved is what it would in full.
func TestLargeImportFollowsSharedChanges(t *testing.T) {
	h := newHarness(t, Options{})
	held := h.withHeldIndex()
	r := rand.New(rand.NewPCG(56, 1))
	addrs := make([]string, incrementalPlansFrom+500)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)
	}
	es := h.export("east", 1, addrs...)
	next := len(addrs)
	for step := range 60 {
		h.put(es)
		h.reconcile()
		want := map[string]bool{}
		for _, ep := range es.Endpoints[0].Endpoints {
			if Unimportable(discoveryv1.AddressTypeIPv4, &ep) == "" {
				want[ep.Addresses[0]] = ptr.Deref(ep.Conditions.Ready, false)
			}
		}
		got := map[string]bool{}
		for _, s := range held.slicesFrom("east") {
			for _, ep := range s.Endpoints {
				got[ep.Addresses[0]] = ptr.Deref(ep.Conditions.Ready, false)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("step %d: %d endpoints imported, want %d", step, len(got), len(want))
		}
		for a, ready := range want {
			if r, ok := got[a]; !ok || r != ready {
				t.Fatalf("step %d: %s imported %v (ready %v), want ready %v", step, a, ok, r, ready)
			}
		}

		// The next export: a new array sharing the unchanged endpoints.
		again := *es
		again.Endpoints = slices.Clone(es.Endpoints)
		eps := slices.Clone(es.Endpoints[0].Endpoints)
		switch i := r.IntN(len(eps)); step % 4 {
		case 0:
			eps[i].Conditions.Ready = ptr.To(!ptr.Deref(eps[i].Conditions.Ready, false))
		case 1:
			next++
			eps = slices.Insert(eps, i, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.2.%d.%d", next/250, next%250+1)}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
		case 2:
			eps = slices.Delete(eps, i, i+1)
		case 3:
			if j := slices.IndexFunc(eps, func(ep discoveryv1.Endpoint) bool { return ep.Addresses[0] == "127.0.0.1" }); j >= 0 {
				eps = slices.Delete(eps, j, j+1)
			} else {
				eps = slices.Insert(eps, i, discoveryv1.Endpoint{Addresses: []string{"127.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
			}
		}
		again.Endpoints[0].Endpoints = eps
		es = &again
	}
}

// slicesFrom returns source's held slices.
func (x *heldIndex) slicesFrom(source clusterset.ClusterID) []*discoveryv1.EndpointSlice {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []*discoveryv1.EndpointSlice
	for _, s := range x.byName {
		if sourceOf(s) == source {
			out = append(out, s)
		}
	}
	return out
}
