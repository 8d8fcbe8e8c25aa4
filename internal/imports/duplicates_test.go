package imports

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// exportOf is an export of cluster whose groups hold these addresses, one
// endpoint each.
func exportOf(cluster clusterset.ClusterID, groups ...[]string) *clusterset.ExportedService {
	es := &clusterset.ExportedService{Cluster: cluster}
	for _, addrs := range groups {
		var g reconciler.EndpointGroup
		for _, a := range addrs {
			g.Endpoints = append(g.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}})
		}
		es.Endpoints = append(es.Endpoints, g)
	}
	return es
}

// duplicatesFromScratch is the report computed from all exports at once,
// as reportDuplicates did before the index: what the index must equal.
func duplicatesFromScratch(exports []*clusterset.ExportedService) duplicateReport {
	sourcesOf := map[string][]clusterset.ClusterID{}
	for _, es := range exports {
		forEachAddress(es, func(addr string) {
			if !slices.Contains(sourcesOf[addr], es.Cluster) {
				sourcesOf[addr] = append(sourcesOf[addr], es.Cluster)
			}
		})
	}
	var r duplicateReport
	for addr, ids := range sourcesOf {
		if len(ids) < 2 {
			continue
		}
		r.Duplicated++
		if r.Shared == nil {
			r.Shared = map[clusterset.ClusterID]int{}
		}
		for _, id := range ids {
			r.Shared[id]++
		}
		if r.Example == "" || addr < r.Example {
			r.Example, r.ExampleSources = addr, ids
		}
	}
	return r
}

func TestAddressIndexNamesTheDuplicates(t *testing.T) {
	x := newAddressIndex()
	key := types.NamespacedName{Namespace: "demo", Name: "web"}
	east := exportOf("east", []string{"10.0.0.1", "10.0.0.2"}, []string{"10.0.0.2"}) // .2 in two groups: once
	west := exportOf("west", []string{"10.0.0.2", "10.0.0.3"})
	if r := x.update(key, []*clusterset.ExportedService{east}); r.Duplicated != 0 || r.Shared != nil {
		t.Fatalf("one source: %+v, want no duplicates", r)
	}
	r := x.update(key, []*clusterset.ExportedService{east, west})
	want := duplicateReport{Shared: map[clusterset.ClusterID]int{"east": 1, "west": 1}, Duplicated: 1,
		Example: "10.0.0.2", ExampleSources: []clusterset.ClusterID{"east", "west"}}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("east and west share 10.0.0.2: %+v, want %+v", r, want)
	}
	// west's export replaced: the overlap ends.
	if r := x.update(key, []*clusterset.ExportedService{east, exportOf("west", []string{"10.0.0.3"})}); r.Duplicated != 0 || r.Shared != nil {
		t.Fatalf("after west moved off 10.0.0.2: %+v, want no duplicates", r)
	}
	// Nobody exports: the import is dropped from the index.
	x.update(key, nil)
	if len(x.byImport) != 0 {
		t.Fatalf("an import without exports is still indexed: %v", x.byImport)
	}
}

// The index, updated source by source, equals the report from scratch
// after every step of random changes: exports replaced (some by exports
// of the same addresses), dropped and added, addresses repeated across
// groups and sources.
func TestAddressIndexMatchesAReportFromScratch(t *testing.T) {
	rng := rand.New(rand.NewPCG(20261126, 1))
	clusters := []clusterset.ClusterID{"a", "b", "c", "d", "e"}
	randomExport := func(id clusterset.ClusterID) *clusterset.ExportedService {
		groups := make([][]string, 1+rng.IntN(2))
		for i := range groups {
			for range rng.IntN(5) {
				groups[i] = append(groups[i], fmt.Sprintf("10.0.0.%d", rng.IntN(12)))
			}
		}
		return exportOf(id, groups...)
	}
	x := newAddressIndex()
	key := types.NamespacedName{Namespace: "ns", Name: "svc"}
	current := map[clusterset.ClusterID]*clusterset.ExportedService{}
	for step := range 3000 {
		id := clusters[rng.IntN(len(clusters))]
		switch old := current[id]; {
		case rng.IntN(4) == 0:
			delete(current, id)
		case old != nil && rng.IntN(3) == 0:
			same := *old // a new export of the same addresses (its conditions changed)
			current[id] = &same
		default:
			current[id] = randomExport(id)
		}
		var exports []*clusterset.ExportedService
		for _, c := range clusters { // the Store's order: stable
			if es := current[c]; es != nil {
				exports = append(exports, es)
			}
		}
		got, want := x.update(key, exports), duplicatesFromScratch(exports)
		if got.Duplicated != want.Duplicated || !reflect.DeepEqual(got.Shared, want.Shared) || got.Example != want.Example ||
			!sameMembers(got.ExampleSources, want.ExampleSources) {
			t.Fatalf("step %d: index %+v, from scratch %+v", step, got, want)
		}
	}
}

// sameMembers: the index lists an address's sources in the order they
// came, the scratch report in the exports' order.
func sameMembers(a, b []clusterset.ClusterID) bool {
	return reflect.DeepEqual(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// BenchmarkReportDuplicates is one change of one source of an import of
// 252 sources of 10 endpoints each: the hub load of make bench-scale.
func BenchmarkReportDuplicates(b *testing.B) {
	const sources, endpoints = 252, 10
	exports := make([]*clusterset.ExportedService, sources)
	for i := range exports {
		addrs := make([]string, endpoints)
		for j := range addrs {
			addrs[j] = fmt.Sprintf("10.%d.%d.%d", i/250, i%250, j)
		}
		exports[i] = exportOf(clusterset.ClusterID(fmt.Sprintf("m%03d", i)), addrs)
	}
	key := types.NamespacedName{Namespace: "scale", Name: "s-0000"}
	b.Run("index", func(b *testing.B) {
		x := newAddressIndex()
		x.update(key, exports)
		current := slices.Clone(exports)
		other := make([]*clusterset.ExportedService, sources) // each source's other version
		for i, es := range exports {
			other[i] = exportOf(es.Cluster, []string{fmt.Sprintf("10.99.%d.%d", i/250, i%250)})
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			s := i % sources // one source changes per update
			current[s], other[s] = other[s], current[s]
			x.update(key, current)
		}
	})
	b.Run("from-scratch", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			duplicatesFromScratch(exports)
		}
	})
}

func TestMembersAndOthersEachOnce(t *testing.T) {
	members := make([]clusterset.ClusterID, 2, 10) // room to append: never used
	copy(members, []clusterset.ClusterID{"east", "west"})
	got := membersAnd(members, []clusterset.ClusterID{"west", "gone", "east", "gone", "old"}, []clusterset.ClusterID{"new", "old", "east"})
	if want := []clusterset.ClusterID{"east", "west", "gone", "old", "new"}; !slices.Equal(got, want) {
		t.Errorf("membersAnd = %v, want %v", got, want)
	}
	if extended := members[:3]; extended[2] != "" {
		t.Errorf("membersAnd wrote %q into the members' array: Membership.IDs shares its own", extended[2])
	}
}
