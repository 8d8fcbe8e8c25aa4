package publish

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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// partWorld applies part plans as the hub's API server and the
// publisher's cache would: every write moves the resourceVersion.
type partWorld struct {
	parts  map[string]*v1alpha1.PublishedExport
	writes int
}

func (w *partWorld) apply(p partPlan) {
	for _, o := range append(slices.Clip(p.create), p.update...) {
		w.writes++
		c := o.DeepCopy()
		if c.UID == "" {
			c.UID = types.UID("uid-" + strconv.Itoa(w.writes))
		}
		c.ResourceVersion = strconv.Itoa(w.writes)
		w.parts[c.Name] = c
	}
	for _, o := range p.remove {
		delete(w.parts, o.Name)
	}
}

// TestIncrementalPartPlansArePlans: over random sequences of changes of an
// export (endpoints changed, added, removed, given anew, a first address
// listed twice, a second group, other ports, another maximum; plans
// applied or lost; parts rewritten or deleted behind the publisher's
// back), the part memo's plan is planParts' plan, and most are made from
// the memo.
func TestIncrementalPartPlansArePlans(t *testing.T) {
	ports := [][]discoveryv1.EndpointPort{
		{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](80)}},
		{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
	}
	incremental, total := 0, 0
	for seed := uint64(0); seed < 200; seed++ {
		r := rand.New(rand.NewPCG(seed, 56))
		next := 0
		endpoint := func() discoveryv1.Endpoint {
			next++
			return discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.0.%d.%d", next/200, next%200)},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(r.IntN(4) > 0)}}
		}
		want := []reconciler.EndpointGroup{{AddressType: discoveryv1.AddressTypeIPv4, Ports: ports[0]}}
		for range r.IntN(30) {
			want[0].Endpoints = append(want[0].Endpoints, endpoint())
		}
		world := &partWorld{parts: map[string]*v1alpha1.PublishedExport{}}
		var m partMemo
		max := 4
		dup := -1
		for step := range 30 {
			again := make([]reconciler.EndpointGroup, len(want))
			for i, g := range want {
				again[i] = reconciler.EndpointGroup{AddressType: g.AddressType, Ports: g.Ports, Endpoints: slices.Clone(g.Endpoints)}
			}
			want = again
			if dup >= 0 && dup < len(want) { // a duplicate lasts one plan
				d := &want[dup].Endpoints
				*d = (*d)[:len(*d)-1]
			}
			dup = -1
			changed := r.IntN(len(want))
			eps := &want[changed].Endpoints
			switch op := r.IntN(24); {
			case op < 8 && len(*eps) > 0:
				i := r.IntN(len(*eps))
				(*eps)[i].Conditions.Ready = ptr.To(!ptr.Deref((*eps)[i].Conditions.Ready, false))
			case op < 12:
				*eps = slices.Insert(*eps, r.IntN(len(*eps)+1), endpoint())
			case op < 15 && len(*eps) > 0:
				i := r.IntN(len(*eps))
				*eps = slices.Delete(*eps, i, i+1)
			case op == 15 && len(*eps) > 0:
				*eps = append(*eps, (*eps)[r.IntN(len(*eps))])
				dup = changed
			case op == 16:
				for i := range want {
					for j := range want[i].Endpoints {
						want[i].Endpoints[j] = *want[i].Endpoints[j].DeepCopy()
					}
				}
			case op == 17:
				if len(want) == 1 {
					want = append(want, reconciler.EndpointGroup{AddressType: discoveryv1.AddressTypeIPv4, Ports: ports[1], Endpoints: []discoveryv1.Endpoint{endpoint()}})
				} else {
					want = want[:1]
				}
			case op == 18 && len(world.parts) > 0:
				p := world.parts[slices.Sorted(maps.Keys(world.parts))[r.IntN(len(world.parts))]].DeepCopy()
				world.writes++
				p.ResourceVersion = strconv.Itoa(world.writes)
				if g := &p.Spec.Endpoints[0]; len(g.Endpoints) > 1 && r.IntN(2) == 0 {
					g.Endpoints = g.Endpoints[1:]
					world.parts[p.Name] = p
				} else {
					delete(world.parts, p.Name)
				}
			case op == 19:
				max = 3 + r.IntN(3)
			}
			existing := slices.Collect(maps.Values(world.parts))
			r.Shuffle(len(existing), func(i, j int) { existing[i], existing[j] = existing[j], existing[i] })
			if r.IntN(2) == 0 { // as a cache's List gives them: new structs, the same arrays
				existing = listed(existing)
			}
			trigger := strconv.Itoa(step)
			wantPlan := planParts("east", webKey, "mcs-system", trigger, want, existing, max)
			got := m.plan("east", webKey, "mcs-system", trigger, want, existing, max)
			if !reflect.DeepEqual(got, wantPlan) {
				t.Fatalf("seed %d, step %d: memo's plan\n%+v\nplanParts'\n%+v", seed, step, got, wantPlan)
			}
			total++
			if r.IntN(6) > 0 {
				world.apply(wantPlan)
			}
		}
		incremental += m.fromMemo
	}
	t.Logf("%d of %d plans made from the memo", incremental, total)
	if incremental < total/2 {
		t.Errorf("only %d of %d plans made from the memo", incremental, total)
	}
}

// TestPartMemoFollowsARelist: parts decoded anew with the same
// resourceVersions (a cache's relist: other arrays, the same objects) are
// found by name, and the memo tracks them by their new arrays only: it
// plans from what it holds, as planParts would, and keeps no entry of an
// array it no longer sees.
func TestPartMemoFollowsARelist(t *testing.T) {
	es := withEndpoints(2000)
	world := &partWorld{parts: map[string]*v1alpha1.PublishedExport{}}
	var m partMemo
	const max = 100
	for round := range 4 {
		existing := slices.Collect(maps.Values(world.parts))
		for i, p := range existing { // decoded anew: new arrays, the same resourceVersion
			existing[i] = p.DeepCopy()
		}
		trigger := strconv.Itoa(round)
		want := planParts("east", webKey, "mcs-system", trigger, es.Endpoints, existing, max)
		got := m.plan("east", webKey, "mcs-system", trigger, es.Endpoints, existing, max)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: memo's plan %+v, planParts' %+v", round, got, want)
		}
		world.apply(want)
		seen := map[*v1alpha1.EndpointGroup]bool{}
		for _, p := range existing {
			seen[partIdentity(p)] = true
		}
		for id := range m.byArray {
			if !seen[id] {
				t.Fatalf("round %d: the memo tracks an array no part of this round has", round)
			}
		}
	}
	if m.fromMemo < 2 {
		t.Errorf("%d of 4 plans made from the memo, want the last ones", m.fromMemo)
	}
}

// listed returns parts as a List of the cache would give them (client.
// UnsafeDisableDeepCopy): a list of new structs that share what the
// cached objects point to. The memo finds its parts by their arrays, not
// by the structs that hold them.
func listed(parts []*v1alpha1.PublishedExport) []*v1alpha1.PublishedExport {
	items := make([]v1alpha1.PublishedExport, len(parts))
	out := make([]*v1alpha1.PublishedExport, len(parts))
	for i, p := range parts {
		items[i] = *p
		out[i] = &items[i]
	}
	return out
}
