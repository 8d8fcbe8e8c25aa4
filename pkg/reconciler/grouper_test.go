package reconciler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/reconcilertest"
)

// TestSliceGrouperIsGroupSlices: after every change of a random sequence
// (slices created, rewritten, emptied, moved to another port set or
// address type, deleted; endpoints listed twice, in one slice and in two,
// with different conditions), the grouper's result equals GroupSlices' of
// the same slices, and no result it returned before has changed. With
// MaxRun, the result's runs joined equal GroupSlices', and each run holds
// one to MaxRun endpoints.
func TestSliceGrouperIsGroupSlices(t *testing.T) {
	for _, maxRun := range []int{0, 1, 2, 8} {
		t.Run(fmt.Sprintf("MaxRun=%d", maxRun), func(t *testing.T) { testSliceGrouperIsGroupSlices(t, maxRun) })
	}
}

func testSliceGrouperIsGroupSlices(t *testing.T, maxRun int) {
	portSets := [][]discoveryv1.EndpointPort{
		{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](80)}},
		{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
		{{Name: ptr.To("a"), Port: ptr.To[int32](1)}, {Name: ptr.To("b"), Port: ptr.To[int32](2)}},
		{{Name: ptr.To("b"), Port: ptr.To[int32](2)}, {Name: ptr.To("a"), Port: ptr.To[int32](1)}}, // the same set
		nil,
	}
	seeds := uint64(300)
	if maxRun > 0 {
		seeds = 100
	}
	for seed := range seeds {
		r := rand.New(rand.NewPCG(seed, 56))
		g := SliceGrouper{MaxRun: maxRun}
		var items []discoveryv1.EndpointSlice
		type kept struct {
			got, copy []EndpointGroup
		}
		var before []kept
		uid, rv := 0, 0
		newSlice := func() discoveryv1.EndpointSlice {
			uid++
			return discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-" + strconv.Itoa(r.IntN(8)), UID: types.UID(strconv.Itoa(uid))}}
		}
		fill := func(s *discoveryv1.EndpointSlice) {
			rv++
			s.ResourceVersion = strconv.Itoa(rv)
			s.AddressType = discoveryv1.AddressTypeIPv4
			if r.IntN(8) == 0 {
				s.AddressType = discoveryv1.AddressTypeIPv6
			}
			s.Ports = portSets[r.IntN(len(portSets))]
			s.Endpoints = nil
			for range r.IntN(12) {
				ep := discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.0.0.%d", r.IntN(20))},
					Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(r.IntN(2) == 0), Serving: ptr.To(r.IntN(2) == 0), Terminating: ptr.To(r.IntN(3) == 0)}}
				if r.IntN(3) == 0 {
					ep.NodeName = ptr.To("node-" + strconv.Itoa(r.IntN(3)))
				}
				s.Endpoints = append(s.Endpoints, ep)
			}
		}
		for step := range 40 {
			switch op := r.IntN(10); {
			case op < 3 || len(items) == 0:
				s := newSlice()
				if slices.ContainsFunc(items, func(o discoveryv1.EndpointSlice) bool { return o.Name == s.Name }) {
					continue // names are unique in a namespace
				}
				fill(&s)
				items = append(items, s)
			case op < 8:
				// A new object for the slice, as an informer delivers it.
				i := r.IntN(len(items))
				s := *items[i].DeepCopy()
				fill(&s)
				items[i] = s
			default:
				i := r.IntN(len(items))
				items = slices.Delete(items, i, i+1)
			}
			r.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
			got, want := g.Group(items), GroupSlices(items)
			if joined := JoinRuns(got); !equality.Semantic.DeepEqual(joined, want) {
				t.Fatalf("seed %d, step %d: grouped\n%+v\nwant\n%+v", seed, step, joined, want)
			}
			if maxRun == 0 && len(got) != len(want) {
				t.Fatalf("seed %d, step %d: %d groups without MaxRun, want %d", seed, step, len(got), len(want))
			}
			for i := range got {
				if n := len(got[i].Endpoints); maxRun > 0 && n > maxRun || n == 0 && (i > 0 && sameGroupKey(&got[i-1], &got[i]) || i+1 < len(got) && sameGroupKey(&got[i], &got[i+1])) {
					t.Fatalf("seed %d, step %d: a run of %d endpoints (MaxRun %d)", seed, step, n, maxRun)
				}
			}
			for _, k := range before {
				if !equality.Semantic.DeepEqual(k.got, k.copy) {
					t.Fatalf("seed %d, step %d: a result returned before changed", seed, step)
				}
			}
			before = append(before, kept{got, copyGroups(got)})
		}
	}
}

// TestSliceGrouperReadsOnlyWhatChanged: a call with the same slices
// returns the last result; one with a slice whose resourceVersion did not
// move does not read it again (its endpoints, changed behind the
// grouper's back as no informer does, are not seen); one without
// resourceVersions reads everything.
func TestSliceGrouperReadsOnlyWhatChanged(t *testing.T) {
	s := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-1", UID: "1", ResourceVersion: "5"}, AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}}
	var g SliceGrouper
	first := g.Group([]discoveryv1.EndpointSlice{s})
	again := g.Group([]discoveryv1.EndpointSlice{s})
	if &first[0] != &again[0] {
		t.Errorf("the same slices grouped anew")
	}
	s.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.2"}}}
	if got := g.Group([]discoveryv1.EndpointSlice{s}); got[0].Endpoints[0].Addresses[0] != "10.0.0.1" {
		t.Errorf("a slice of the same resourceVersion was read again: %v", got)
	}
	s.ResourceVersion = ""
	if got := g.Group([]discoveryv1.EndpointSlice{s}); got[0].Endpoints[0].Addresses[0] != "10.0.0.2" {
		t.Errorf("a slice without a resourceVersion was not read again: %v", got)
	}
	if got := g.Group(nil); len(got) != 0 {
		t.Errorf("no slices: %v", got)
	}
}

// TestSliceGrouperSharesWhatStayed: a slice rewritten for one endpoint's
// change (every endpoint decoded anew, as an informer delivers it), or for
// one added or removed, leaves every other endpoint of the result the very
// entry of the last result, so that reconciler.Unmoved finds only the one
// that moved.
func TestSliceGrouperSharesWhatStayed(t *testing.T) {
	for _, maxRun := range []int{0, 100} {
		t.Run(fmt.Sprintf("MaxRun=%d", maxRun), func(t *testing.T) { testSliceGrouperSharesWhatStayed(t, maxRun) })
	}
}

// testSliceGrouperSharesWhatStayed is TestSliceGrouperSharesWhatStayed
// with MaxRun: with runs, every run but the one a change falls in is the
// very array of the last result (Moved finds nothing in it at once).
func testSliceGrouperSharesWhatStayed(t *testing.T, maxRun int) {
	items := reconcilertest.ServiceSlices("ns", "web", 1000, 100)
	g := SliceGrouper{MaxRun: maxRun}
	last := g.Group(items)
	for step, change := range []func(s *discoveryv1.EndpointSlice) int{
		func(s *discoveryv1.EndpointSlice) int { s.Endpoints[7].Conditions.Ready = ptr.To(false); return 1 },
		func(s *discoveryv1.EndpointSlice) int {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.9.9.9"}})
			return 1
		},
		func(s *discoveryv1.EndpointSlice) int { s.Endpoints = s.Endpoints[1:]; return 1 },
		func(s *discoveryv1.EndpointSlice) int { return 0 }, // rewritten as it was
	} {
		i := 3 + step
		s := items[i].DeepCopy() // every endpoint decoded anew
		want := change(s)
		s.ResourceVersion += "+"
		items[i] = *s
		next := g.Group(items)
		if len(next) != len(last) {
			t.Fatalf("step %d: %d runs, then %d", step, len(last), len(next))
		}
		moved, runsMoved := 0, 0
		for r := range next {
			head, tail := Unmoved(last[r].Endpoints, next[r].Endpoints)
			if n := len(next[r].Endpoints) - head - tail + len(last[r].Endpoints) - head - tail; n > 0 {
				moved += n
				runsMoved++
			}
			if n := len(next[r].Endpoints); n > 0 && n == len(last[r].Endpoints) && &next[r].Endpoints[0] != &last[r].Endpoints[0] && head+tail == n {
				runsMoved++ // an unchanged run copied
			}
		}
		if moved > 2*want || moved < want || runsMoved > want {
			t.Errorf("step %d: %d entries moved in %d runs of %d, want %d", step, moved, runsMoved, len(next), want)
		}
		if maxRun > 0 && len(next) < 1000/maxRun {
			t.Errorf("step %d: %d runs of at most %d for 1,000 endpoints", step, len(next), maxRun)
		}
		last = next
	}
}

func copyGroups(gs []EndpointGroup) []EndpointGroup {
	out := make([]EndpointGroup, len(gs))
	for i, g := range gs {
		out[i] = EndpointGroup{AddressType: g.AddressType, Ports: clonePorts(g.Ports), Endpoints: make([]discoveryv1.Endpoint, len(g.Endpoints))}
		for j := range g.Endpoints {
			g.Endpoints[j].DeepCopyInto(&out[i].Endpoints[j])
		}
	}
	return out
}

// BenchmarkGroupOneEndpointChange: one endpoint's change of a Service of
// n endpoints in slices of 100, grouped again by GroupSlices (every slice
// read and every endpoint copied) and by a SliceGrouper (the changed slice
// read, the rest of the result copied as it was).
func BenchmarkGroupOneEndpointChange(b *testing.B) {
	for _, n := range []int{100, 10000, 50000} {
		items := reconcilertest.ServiceSlices("ns", "web", n, 100)
		for _, how := range []string{"GroupSlices", "SliceGrouper", "SliceGrouperRuns"} {
			b.Run(fmt.Sprintf("endpoints=%d/%s", n, how), func(b *testing.B) {
				var g SliceGrouper
				if how == "SliceGrouperRuns" {
					g.MaxRun = 200
				}
				g.Group(items)
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					// A new object for the changed slice, as an informer
					// delivers it.
					s := *items[0].DeepCopy()
					s.ResourceVersion = strconv.Itoa(i + 2)
					s.Endpoints[0].Conditions.Ready = ptr.To(i%2 == 0)
					items[0] = s
					var got []EndpointGroup
					if how == "GroupSlices" {
						got = GroupSlices(items)
					} else {
						got = g.Group(items)
					}
					if joined := JoinRuns(got[:1]); len(joined) != 1 || len(got[0].Endpoints) > n {
						b.Fatalf("%d groups", len(got))
					}
				}
			})
		}
	}
}

// TestPortsEqual: ports compare field by field (the values the pointers
// point to, not the pointers), the very same array at once, nil as empty;
// equality.Semantic says the same.
func TestPortsEqual(t *testing.T) {
	http := func(port int32) discoveryv1.EndpointPort {
		return discoveryv1.EndpointPort{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(port), AppProtocol: ptr.To("h2c")}
	}
	a := []discoveryv1.EndpointPort{http(80), http(81)}
	cases := []struct {
		name string
		b    []discoveryv1.EndpointPort
	}{
		{"the very array", a},
		{"a copy", []discoveryv1.EndpointPort{http(80), http(81)}},
		{"another port", []discoveryv1.EndpointPort{http(80), http(82)}},
		{"another order", []discoveryv1.EndpointPort{http(81), http(80)}},
		{"one less", a[:1]},
		{"no app protocol", []discoveryv1.EndpointPort{http(80), {Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](81)}}},
		{"nil", nil},
	}
	for _, c := range cases {
		if got, want := PortsEqual(a, c.b), equality.Semantic.DeepEqual(a, c.b); got != want {
			t.Errorf("%s: PortsEqual %v, equality.Semantic %v", c.name, got, want)
		}
	}
	if !PortsEqual(nil, []discoveryv1.EndpointPort{}) {
		t.Error("nil and empty differ")
	}
}
