package publish

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// TestUnionPatchedIsUnion: over random sequences of sources (parts
// rewritten with other conditions, with other addresses, added, removed,
// with an address another part holds, moved to another port set), the
// union patched from the last one equals the union made anew, no union
// returned before changes, and most are patched.
func TestUnionPatchedIsUnion(t *testing.T) {
	ports := [][]discoveryv1.EndpointPort{
		{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](80)}},
		{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
	}
	for _, seenFrom := range []int{0, 1 << 30} {
		patched, total := 0, 0
		for seed := uint64(0); seed < 200; seed++ {
			r := rand.New(rand.NewPCG(seed, 56))
			part := func(first, n int) []reconciler.EndpointGroup {
				g := reconciler.EndpointGroup{AddressType: discoveryv1.AddressTypeIPv4, Ports: ports[0]}
				for i := range n {
					g.Endpoints = append(g.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.0.0.%d", first+i)},
						Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(r.IntN(2) == 0)}})
				}
				return []reconciler.EndpointGroup{g}
			}
			sources := [][]reconciler.EndpointGroup{nil}
			for i := range 1 + r.IntN(4) {
				sources = append(sources, part(10*i, 1+r.IntN(5)))
			}
			var u *union
			type kept struct{ got, copy []reconciler.EndpointGroup }
			var before []kept
			for step := range 30 {
				sources = slices.Clone(sources)
				i := 1 + r.IntN(len(sources)-1)
				old := sources[i]
				op := r.IntN(10)
				switch {
				case op < 5: // conditions changed: same first addresses
					g := old[0]
					g.Endpoints = slices.Clone(g.Endpoints)
					j := r.IntN(len(g.Endpoints))
					g.Endpoints[j].Conditions.Ready = ptr.To(!ptr.Deref(g.Endpoints[j].Conditions.Ready, false))
					sources[i] = []reconciler.EndpointGroup{g}
				case op == 5:
					sources[i] = part(10*r.IntN(6), 1+r.IntN(5)) // other addresses, maybe another part's
				case op == 6:
					sources = slices.Insert(sources, 1+r.IntN(len(sources)), part(10*r.IntN(6), 1+r.IntN(5)))
				case op == 7 && len(sources) > 2:
					sources = slices.Delete(sources, i, i+1)
				case op == 8:
					g := old[0]
					g.Ports = ports[r.IntN(2)]
					sources[i] = []reconciler.EndpointGroup{g}
				}
				var lastIndex map[string]int
				if u != nil {
					lastIndex = u.index
				}
				u = u.next(sources, seenFrom)
				want := unionOf(sources, 0).groups
				if !reflect.DeepEqual(u.groups, want) {
					t.Fatalf("seed %d, step %d (op %d): union %s, want %s", seed, step, op, describe(u.groups), describe(want))
				}
				if got, want := reconciler.JoinRuns(u.groups), mergedOf(sources); !reflect.DeepEqual(got, want) {
					t.Fatalf("seed %d, step %d (op %d): union's runs joined %s, want %s", seed, step, op, describe(got), describe(want))
				}
				if _, alone := aloneOf(sources); !alone { // one part is its own union (TestUnionOfOnePartIsThePart)
					if lastIndex != nil && reflect.ValueOf(lastIndex).UnsafePointer() == reflect.ValueOf(u.index).UnsafePointer() { // not made anew
						patched++
					}
					total++
				}
				for _, k := range before {
					if !reflect.DeepEqual(k.got, k.copy) {
						t.Fatalf("seed %d, step %d: a union returned before changed", seed, step)
					}
				}
				copied := make([]reconciler.EndpointGroup, len(u.groups))
				for gi, g := range u.groups {
					copied[gi] = reconciler.EndpointGroup{AddressType: g.AddressType, Ports: g.Ports, Endpoints: make([]discoveryv1.Endpoint, len(g.Endpoints))}
					for j := range g.Endpoints {
						g.Endpoints[j].DeepCopyInto(&copied[gi].Endpoints[j])
					}
				}
				before = append(before, kept{u.groups, copied})
			}
		}
		t.Logf("first addresses kept from %d endpoints: %d of %d unions patched", seenFrom, patched, total)
		if patched < total/3 {
			t.Errorf("first addresses kept from %d endpoints: only %d of %d unions patched", seenFrom, patched, total)
		}
	}
}

// mergedOf is the union of sources with each group's endpoints merged,
// the first of each first address kept: what the runs of a union join
// into.
func mergedOf(sources [][]reconciler.EndpointGroup) []reconciler.EndpointGroup {
	index, ports, sizes, _ := groupsOf(sources)
	return merged(sources, index, ports, sizes)
}

// describe lists groups' ports and first addresses with readiness.
func describe(groups []reconciler.EndpointGroup) string {
	var out []string
	for _, g := range groups {
		var eps []string
		for _, ep := range g.Endpoints {
			eps = append(eps, fmt.Sprintf("%s/%v", ep.Addresses[0], ptr.Deref(ep.Conditions.Ready, false)))
		}
		out = append(out, fmt.Sprintf("%s%v", groupKey((*v1alpha1.EndpointGroup)(&g)), eps))
	}
	return strings.Join(out, " ")
}

// TestUnionOfOnePartIsThePart: an export published in one part (the head
// without endpoints) is assembled into that part's groups themselves, not
// a copy; a part that names a group twice, or a first address twice in a
// group (another member's input), is merged as any union is.
func TestUnionOfOnePartIsThePart(t *testing.T) {
	ports := []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](80)}}
	group := func(addresses ...string) reconciler.EndpointGroup {
		g := reconciler.EndpointGroup{AddressType: discoveryv1.AddressTypeIPv4, Ports: ports}
		for _, a := range addresses {
			g.Endpoints = append(g.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}})
		}
		return g
	}
	part := []reconciler.EndpointGroup{group("10.0.0.1", "10.0.0.2")}
	u := (*union)(nil).next([][]reconciler.EndpointGroup{nil, part}, 0)
	if !reflect.DeepEqual(u.groups, part) || &u.groups[0] != &part[0] {
		t.Errorf("one part: union %s is not the part itself", describe(u.groups))
	}
	for name, sources := range map[string][][]reconciler.EndpointGroup{
		"a group named twice":        {nil, {group("10.0.0.1"), group("10.0.0.2")}},
		"a first address twice":      {nil, {group("10.0.0.1", "10.0.0.1")}},
		"a group in head and part":   {{group()}, part},
		"endpoints in head and part": {{group("10.0.0.2", "10.0.0.3")}, part},
	} {
		got, want := reconciler.JoinRuns((*union)(nil).next(sources, 0).groups), mergedOf(sources)
		if !reflect.DeepEqual(got, want) || len(got) != 1 {
			t.Errorf("%s: union %s, want %s", name, describe(got), describe(want))
		}
	}
}

// TestReaderHoldsWhatItsPartsHold: over random sequences of parts
// written, rewritten (other conditions on the same addresses, other
// addresses, an address another part holds), removed, and removed and
// written again at once (leaving), the export a reader puts into the
// Store holds each address once, as the first part in name order that
// holds it has it: the reader's parts kept in name order (Reader.sorted)
// follow every part that comes, changes or goes, and a part rewritten on
// the same addresses is patched in alone (assembleAfter) often.
func TestReaderHoldsWhatItsPartsHold(t *testing.T) {
	patchedAlone, rewrites := 0, 0
	for seed := uint64(0); seed < 100; seed++ {
		r := rand.New(rand.NewPCG(seed, 56))
		store := clusterset.NewStore()
		reader, later := syncedReader(store, nil)
		es := withEndpoints(1)
		reader.put(EncodeHead(es, "mcs-system"))
		held := map[string][]discoveryv1.Endpoint{} // by part name
		write := func(id string, eps []discoveryv1.Endpoint) {
			g := v1alpha1.EndpointGroup(es.Endpoints[0])
			g.Endpoints = eps
			reader.put(encodePart("east", webKey, "mcs-system", id, []v1alpha1.EndpointGroup{g}))
			held[PartName("east", webKey, id)] = eps
		}
		for step := range 40 {
			n := r.IntN(8)
			id := fmt.Sprint(n)
			name := PartName("east", webKey, id)
			old, ok := held[name]
			switch op := r.IntN(8); {
			case ok && op == 0:
				reader.remove(encodePart("east", webKey, "mcs-system", id, nil))
				later.fire()
				delete(held, name)
			case ok && op == 1: // deleted and written again before the deletion took effect
				reader.remove(encodePart("east", webKey, "mcs-system", id, nil))
				write(id, old)
				later.fire()
			case ok && op < 5: // other conditions, the same addresses
				eps := slices.Clone(old)
				for j := range eps {
					eps[j].Conditions.Ready = ptr.To(r.IntN(2) == 0)
				}
				var before *[]reconciler.EndpointGroup
				if u := reader.unions[webKey]; u != nil && u.at != nil && len(u.sources) > 0 {
					before = &u.sources[0]
				}
				write(id, eps)
				if before != nil {
					rewrites++
					if u := reader.unions[webKey]; len(u.sources) > 0 && &u.sources[0] == before {
						patchedAlone++
					}
				}
			default: // most of its own addresses, now and then another part's
				var eps []discoveryv1.Endpoint
				for _, k := range r.Perm(10)[:1+r.IntN(6)] {
					if r.IntN(8) == 0 {
						k = 10*r.IntN(8) + k
					} else {
						k += 10 * n
					}
					eps = append(eps, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.0.0.%d", k)},
						Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(r.IntN(2) == 0)}})
				}
				write(id, eps)
			}
			want := map[string]bool{}
			for _, name := range slices.Sorted(maps.Keys(held)) {
				for _, ep := range held[name] {
					if _, first := want[ep.Addresses[0]]; !first {
						want[ep.Addresses[0]] = *ep.Conditions.Ready
					}
				}
			}
			got := map[string]bool{}
			for a, ep := range endpointSet(t, store.GetFrom(webKey, "east")) {
				got[a] = ptr.Deref(ep.Conditions.Ready, false)
			}
			if !maps.Equal(got, want) {
				t.Fatalf("seed %d, step %d: the Store holds %v, the parts %v", seed, step, got, want)
			}
			// What the next change is patched against: the parts as held.
			if u, sorted := reader.unions[webKey], reader.sorted[webKey]; u != nil && sorted != nil && len(u.sources) == len(sorted.parts)+1 {
				for i, part := range sorted.parts {
					if !sameSource(u.sources[i+1], part.Endpoints) {
						t.Fatalf("seed %d, step %d: the union's source %d is not its part as held", seed, step, i+1)
					}
				}
			}
		}
	}
	t.Logf("%d of %d rewrites on the same addresses of a union in runs patched alone", patchedAlone, rewrites)
	if patchedAlone < rewrites/2 {
		t.Errorf("only %d of %d rewrites on the same addresses of a union in runs patched alone", patchedAlone, rewrites)
	}
}
