package reconciler

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/reconcilertest"
)

// sliceWorld applies plans to slices held in memory, as an API server
// and an informer would: creates are named, every write moves the
// resourceVersion.
type sliceWorld struct {
	slices map[string]*discoveryv1.EndpointSlice
	writes int
}

func (w *sliceWorld) apply(p *Plan) {
	for _, s := range p.Delete {
		delete(w.slices, s.Name)
	}
	for _, s := range p.Create {
		w.writes++
		c := s.DeepCopy()
		c.Name = c.GenerateName + strconv.Itoa(w.writes)
		c.UID = types.UID("uid-" + c.Name)
		c.ResourceVersion = strconv.Itoa(w.writes)
		w.slices[c.Name] = c
	}
	for _, s := range p.Update {
		w.writes++
		c := s.DeepCopy()
		c.ResourceVersion = strconv.Itoa(w.writes)
		w.slices[c.Name] = c
	}
}

// existing lists the slices in no particular order.
func (w *sliceWorld) existing(r *rand.Rand) []*discoveryv1.EndpointSlice {
	out := slices.Collect(maps.Values(w.slices))
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// TestIncrementalPlansArePlans: over random sequences of changes (desired
// endpoints changed, added, removed and duplicated, given anew or sharing
// the unchanged ones; plans applied or lost; slices rewritten or deleted
// behind the reconciler's back, an endpoint written into two slices; port
// sets, labels, address types and traffic distribution changed), a
// reconciler WithIncrementalPlans makes exactly the plan of one without,
// and makes most of them from its memo.
func TestIncrementalPlansArePlans(t *testing.T) {
	portSets := [][]discoveryv1.EndpointPort{
		{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](80)}},
		{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
	}
	for _, hints := range []bool{false, true} {
		total, incremental := 0, 0
		for seed := uint64(0); seed < 200; seed++ {
			r := rand.New(rand.NewPCG(seed, 56))
			opts := []Option{WithMaxEndpointsPerSlice(4), WithTrafficDistribution(hints), WithOwnershipEnforced(true), WithPlaceholder(seed%3 == 0)}
			full, err := New(reconcilertest.NewClientset().DiscoveryV1(), "test", opts...)
			if err != nil {
				t.Fatal(err)
			}
			memoized, err := New(reconcilertest.NewClientset().DiscoveryV1(), "test", append(opts, WithIncrementalPlans(1))...)
			if err != nil {
				t.Fatal(err)
			}
			svc := service()
			world := &sliceWorld{slices: map[string]*discoveryv1.EndpointSlice{}}
			next := 0
			endpoint := func() discoveryv1.Endpoint {
				next++
				ep := discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.0.%d.%d", next/200, next%200)},
					Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(r.IntN(4) > 0), Serving: ptr.To(true), Terminating: ptr.To(false)},
					Zone:       ptr.To("zone-" + strconv.Itoa(r.IntN(2)))}
				return ep
			}
			desired := []EndpointGroup{{AddressType: discoveryv1.AddressTypeIPv4, Ports: portSets[0]}}
			for range r.IntN(30) {
				desired[0].Endpoints = append(desired[0].Endpoints, endpoint())
			}
			label := "a"
			td := (*string)(nil)
			types := []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4}
			dup := -1 // the group given a duplicate
			for step := range 30 {
				// The next desired: new arrays, sharing the unchanged entries.
				again := make([]EndpointGroup, len(desired))
				for i, g := range desired {
					again[i] = EndpointGroup{AddressType: g.AddressType, Ports: g.Ports, Endpoints: slices.Clone(g.Endpoints)}
				}
				desired = again
				changed := r.IntN(len(desired))
				eps := &desired[changed].Endpoints
				if dup >= 0 && dup < len(desired) { // a duplicate lasts one plan
					d := &desired[dup].Endpoints
					*d = (*d)[:len(*d)-1]
				}
				dup = -1
				switch op := r.IntN(24); {
				case op < 8 && len(*eps) > 0:
					i := r.IntN(len(*eps))
					(*eps)[i].Conditions.Ready = ptr.To(!ptr.Deref((*eps)[i].Conditions.Ready, false))
				case op < 12:
					i := r.IntN(len(*eps) + 1)
					*eps = slices.Insert(*eps, i, endpoint())
				case op < 15 && len(*eps) > 0:
					i := r.IntN(len(*eps))
					*eps = slices.Delete(*eps, i, i+1)
				case op == 15 && len(*eps) > 0:
					*eps = append(*eps, (*eps)[r.IntN(len(*eps))])
					dup = changed
				case op == 16:
					for i := range desired { // given anew: nothing shared
						for j := range desired[i].Endpoints {
							desired[i].Endpoints[j] = *desired[i].Endpoints[j].DeepCopy()
						}
					}
				case op == 17:
					if len(desired) == 1 {
						desired = append(desired, EndpointGroup{AddressType: discoveryv1.AddressTypeIPv4, Ports: portSets[1], Endpoints: []discoveryv1.Endpoint{endpoint()}})
					} else {
						desired = desired[:1]
					}
				case op == 18 && len(world.slices) > 0:
					// Behind the reconciler's back: a slice rewritten, or
					// deleted.
					s := world.existing(r)[0].DeepCopy()
					world.writes++
					s.ResourceVersion = strconv.Itoa(world.writes)
					if len(s.Endpoints) > 0 && r.IntN(2) == 0 {
						s.Endpoints = s.Endpoints[1:]
						world.slices[s.Name] = s
					} else {
						delete(world.slices, s.Name)
					}
				case op == 19 && len(world.slices) > 1:
					// An endpoint written into two slices.
					all := world.existing(r)
					if len(all[0].Endpoints) > 0 {
						s := all[1].DeepCopy()
						world.writes++
						s.ResourceVersion = strconv.Itoa(world.writes)
						s.Endpoints = append(s.Endpoints, all[0].Endpoints[0])
						world.slices[s.Name] = s
					}
				case op == 20:
					label = map[string]string{"a": "b", "b": "a"}[label]
				case op == 21:
					td = map[bool]*string{true: nil, false: ptr.To(corev1.ServiceTrafficDistributionPreferClose)}[td != nil]
				case op == 22:
					if len(types) == 1 {
						types = append(types, discoveryv1.AddressTypeIPv6)
					} else {
						types = types[:1]
					}
				}
				in := Input{Owner: svc, OwnerGVK: serviceGVK, Desired: desired, AddressTypes: types, Existing: world.existing(r),
					TrafficDistribution: td,
					Labeler: LabelerFunc(func() (map[string]string, map[string]string) {
						return map[string]string{"label": label}, nil
					})}
				want := samePlans(t, full, memoized, in, fmt.Sprintf("hints %v, seed %d, step %d", hints, seed, step))
				if r.IntN(6) > 0 { // else the plan is lost
					world.apply(want)
				}
				total++
			}
			incremental += int(memoized.memos.incremental.Load())
		}
		t.Logf("hints %v: %d of %d plans made from the memo", hints, incremental, total)
		if incremental < total/2 {
			t.Errorf("hints %v: only %d of %d plans made from the memo", hints, incremental, total)
		}
	}
}

// TestIncrementalPlansOfRunsArePlans: desired endpoints grouped in runs
// by a SliceGrouper (MaxRun 8) from source slices that come, change (an
// endpoint's conditions, endpoints added and removed, a slice emptied)
// and go, so that runs split, join, come and go: a reconciler
// WithIncrementalPlans makes exactly the plan of one without, and makes
// most of them from its memo, runs split or not.
func TestIncrementalPlansOfRunsArePlans(t *testing.T) {
	ports := []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](80)}}
	total, incremental := 0, 0
	for seed := uint64(0); seed < 100; seed++ {
		r := rand.New(rand.NewPCG(seed, 57))
		opts := []Option{WithMaxEndpointsPerSlice(5)}
		full, _ := New(reconcilertest.NewClientset().DiscoveryV1(), "test", opts...)
		memoized, _ := New(reconcilertest.NewClientset().DiscoveryV1(), "test", append(opts, WithIncrementalPlans(1))...)
		svc := service()
		world := &sliceWorld{slices: map[string]*discoveryv1.EndpointSlice{}}
		grouper := SliceGrouper{MaxRun: 8}
		sources := map[int][]discoveryv1.Endpoint{} // by source slice
		versions := map[int]string{}                // their resourceVersions
		rv := 0
		for step := range 40 {
			k := r.IntN(12)
			eps := slices.Clone(sources[k])
			switch op := r.IntN(10); {
			case op < 4 && len(eps) > 0:
				i := r.IntN(len(eps))
				eps[i].Conditions.Ready = ptr.To(!ptr.Deref(eps[i].Conditions.Ready, false))
			case op < 7:
				for range 1 + r.IntN(6) {
					eps = append(eps, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.0.%d", k, r.IntN(250))},
						Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
				}
				eps = slices.CompactFunc(eps, func(a, b discoveryv1.Endpoint) bool { return a.Addresses[0] == b.Addresses[0] })
			case op < 9 && len(eps) > 0:
				i := r.IntN(len(eps))
				eps = slices.Delete(eps, i, i+1)
			default:
				eps = nil
			}
			sources[k] = eps
			rv++
			versions[k] = fmt.Sprint(rv)
			if r.IntN(8) == 0 {
				delete(sources, k) // the slice deleted
			}
			var items []discoveryv1.EndpointSlice
			for _, k := range slices.Sorted(maps.Keys(sources)) {
				items = append(items, discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("src-%02d", k), UID: types.UID(fmt.Sprint(k)), ResourceVersion: versions[k]},
					AddressType: discoveryv1.AddressTypeIPv4, Ports: ports, Endpoints: sources[k]})
			}
			in := Input{Owner: svc, OwnerGVK: serviceGVK, Desired: grouper.Group(items), AddressTypes: []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4},
				Existing: world.existing(r), Labeler: ServiceLabels{svc}}
			want := samePlans(t, full, memoized, in, fmt.Sprintf("seed %d, step %d", seed, step))
			world.apply(want)
			total++
		}
		incremental += int(memoized.memos.incremental.Load())
	}
	t.Logf("%d of %d plans made from the memo", incremental, total)
	if incremental < total/2 {
		t.Errorf("only %d of %d plans made from the memo", incremental, total)
	}
}

// samePlans returns full's plan of in, failing the test (at where) when
// memoized's plan differs from it.
func samePlans(t *testing.T, full, memoized *Reconciler, in Input, where string) *Plan {
	t.Helper()
	want, err := full.Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := memoized.Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: incremental plan %s differs from %s:\n%v\n%v", where, got, want, got, want)
	}
	return want
}

// TestMovedFindsWhatMoved: what MovedIn and Moved report is exactly the
// span between the entries shared with the old array, and "few" follows
// the quarter rule over everything that moved (old and new entries).
func TestMovedFindsWhatMoved(t *testing.T) {
	old := freshEndpoints(100)
	changed := func(i int) []discoveryv1.Endpoint {
		now := slices.Clone(old)
		now[i].Conditions.Ready = ptr.To(false)
		return now
	}
	for _, c := range []struct {
		name             string
		now              []discoveryv1.Endpoint
		head, tail       int
		oldSpan, newSpan int
		few              bool
	}{
		{"the same array", old, 100, 0, 0, 0, true},
		{"a copy sharing every entry", slices.Clone(old), 100, 0, 0, 0, true},
		{"one changed", changed(40), 40, 59, 1, 1, true},
		{"one inserted", slices.Insert(slices.Clone(old), 10, discoveryv1.Endpoint{Addresses: []string{"10.9.9.9"}}), 10, 90, 0, 1, true},
		{"one removed", slices.Delete(slices.Clone(old), 99, 100), 99, 0, 1, 0, true},
		{"the first and the last changed", func() []discoveryv1.Endpoint { n := changed(0); n[99].Zone = ptr.To("z"); return n }(), 0, 0, 100, 100, false},
		{"all decoded anew", freshEndpoints(100), 0, 0, 100, 100, false},
		{"a third removed", slices.Clone(old[:66]), 66, 0, 34, 0, false},
		{"a fifth removed", slices.Clone(old[:80]), 80, 0, 20, 0, true},
	} {
		span, few := MovedIn(old, c.now)
		if span.Head != c.head || span.Tail != c.tail || len(span.Old) != c.oldSpan || len(span.New) != c.newSpan || few != c.few {
			t.Errorf("%s: head %d, tail %d, %d old and %d new moved, few %v; want %d, %d, %d, %d, %v",
				c.name, span.Head, span.Tail, len(span.Old), len(span.New), few, c.head, c.tail, c.oldSpan, c.newSpan, c.few)
		}
		if len(span.New) > 0 && &span.New[0] != &c.now[span.Head] {
			t.Errorf("%s: New is not the moved part of now", c.name)
		}
	}
	// Moved counts all groups together: one group moved whole among
	// unchanged ones is few; the same alone is not.
	groups := func(eps ...[]discoveryv1.Endpoint) []EndpointGroup {
		out := make([]EndpointGroup, len(eps))
		for i, e := range eps {
			out[i] = EndpointGroup{AddressType: discoveryv1.AddressTypeIPv4, Endpoints: e}
		}
		return out
	}
	big := freshEndpoints(1000)
	fresh := freshEndpoints(100)
	if spans, few := Moved(groups(old, big), groups(fresh, big)); !few || len(spans[0].New) != 100 || len(spans[1].New) != 0 {
		t.Errorf("one small group of two moved whole: few %v, spans %d and %d new", few, len(spans[0].New), len(spans[1].New))
	}
	if _, few := Moved(groups(old), groups(fresh)); few {
		t.Errorf("the only group moved whole: few")
	}
	// MovedGroups is Moved without the groups where nothing moved.
	for _, pair := range [][2][]EndpointGroup{
		{groups(old, big), groups(fresh, big)},
		{groups(old), groups(fresh)},
		{groups(old, big, old), groups(changed(3), big, old)},
		{groups(old, big), groups(old, big)},
	} {
		spans, few := Moved(pair[0], pair[1])
		moved, fewToo := MovedGroups(pair[0], pair[1])
		var want []MovedGroup
		for i, sp := range spans {
			if len(sp.Old)+len(sp.New) > 0 {
				want = append(want, MovedGroup{Index: i, MovedSpan: sp})
			}
		}
		if fewToo != few || !reflect.DeepEqual(moved, want) {
			t.Errorf("MovedGroups: %d groups, few %v; Moved's moved ones: %d, few %v", len(moved), fewToo, len(want), few)
		}
	}
}

// freshEndpoints returns n endpoints that share nothing with any others.
func freshEndpoints(n int) []discoveryv1.Endpoint {
	return reconcilertest.ServiceSlices("ns", "web", n, n)[0].Endpoints
}
