package imports

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// addressIndex keeps, per import, which sources export each address, and
// updates it with the sources whose export changed only. Building a map of
// every address of every source on each reconcile was 31 % of an
// importer's CPU at 252 sources under a hub load of 50 changes a second
// (make bench-scale); now a change costs the addresses of the source that
// changed, and the other sources a pointer comparison each (the Store
// replaces an export on every change and never modifies one).
type addressIndex struct {
	mu       sync.Mutex
	byImport map[types.NamespacedName]*importAddresses
}

// importAddresses is what one import's sources export.
type importAddresses struct {
	// exports are the sources' exports the index holds.
	exports map[clusterset.ClusterID]*clusterset.ExportedService
	// only[addr] is the source of an address exported once; many[addr]
	// the sources, in the order they came, of one exported by several
	// (two maps: most addresses have one source, and a map of strings
	// holds one in 24 bytes where a slice would cost 56). only's values
	// are ids' (one per source): a pointer where a ClusterID takes 16
	// bytes (19 MB of an importer's heap at 255 members, issue 56).
	only map[string]*clusterset.ClusterID
	many map[string][]clusterset.ClusterID
	ids  map[clusterset.ClusterID]*clusterset.ClusterID
	// shared[source] counts the addresses of source that another source
	// exports too.
	shared map[clusterset.ClusterID]int
}

// duplicateReport is what an import's duplicates are after an update.
type duplicateReport struct {
	// Shared[source] counts the addresses of source another one exports too.
	Shared map[clusterset.ClusterID]int
	// Duplicated counts the addresses exported by more than one source.
	Duplicated int
	// Example is the lowest of those addresses, and ExampleSources its
	// sources (empty when Duplicated is 0).
	Example        string
	ExampleSources []clusterset.ClusterID
}

func newAddressIndex() *addressIndex {
	return &addressIndex{byImport: map[types.NamespacedName]*importAddresses{}}
}

// update brings import key's index to exports (one per source) and
// returns its duplicates.
func (x *addressIndex) update(key types.NamespacedName, exports []*clusterset.ExportedService) duplicateReport {
	x.mu.Lock()
	defer x.mu.Unlock()
	ia := x.byImport[key]
	if ia == nil {
		ia = &importAddresses{
			exports: map[clusterset.ClusterID]*clusterset.ExportedService{},
			only:    map[string]*clusterset.ClusterID{},
			many:    map[string][]clusterset.ClusterID{},
			ids:     map[clusterset.ClusterID]*clusterset.ClusterID{},
			shared:  map[clusterset.ClusterID]int{},
		}
		x.byImport[key] = ia
	}
	for _, es := range exports {
		switch old := ia.exports[es.Cluster]; {
		case old == es:
		case old != nil && sameAddresses(old, es):
			// A change of conditions, nodes or ports: the index holds
			// the same addresses (50,000 map writes saved per change of
			// one endpoint's readiness at 50,000).
			ia.exports[es.Cluster] = es
		default:
			ia.remove(old)
			ia.add(es)
		}
	}
	if len(ia.exports) > len(exports) { // some source stopped exporting
		current := make(map[clusterset.ClusterID]bool, len(exports))
		for _, es := range exports {
			current[es.Cluster] = true
		}
		for id, old := range ia.exports {
			if !current[id] {
				ia.remove(old)
			}
		}
	}
	r := ia.report()
	if len(ia.exports) == 0 {
		delete(x.byImport, key)
	}
	return r
}

// forget drops import key.
func (x *addressIndex) forget(key types.NamespacedName) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.byImport, key)
}

// add indexes the addresses of es (nil: nothing).
func (ia *importAddresses) add(es *clusterset.ExportedService) {
	if es == nil {
		return
	}
	ia.exports[es.Cluster] = es
	id := ia.idOf(es.Cluster)
	forEachAddress(es, func(addr string) {
		if first, ok := ia.only[addr]; ok {
			if *first == es.Cluster {
				return // in another group of the same export
			}
			delete(ia.only, addr)
			ia.many[addr] = []clusterset.ClusterID{*first, es.Cluster}
			ia.shared[*first]++
			ia.shared[es.Cluster]++
			return
		}
		ids, ok := ia.many[addr]
		switch {
		case !ok:
			ia.only[addr] = id
		case !slices.Contains(ids, es.Cluster):
			ia.many[addr] = append(ids, es.Cluster)
			ia.shared[es.Cluster]++
		}
	})
}

// remove drops the addresses of es (nil: nothing) from the index.
func (ia *importAddresses) remove(es *clusterset.ExportedService) {
	if es == nil {
		return
	}
	delete(ia.exports, es.Cluster)
	defer delete(ia.ids, es.Cluster) // none of only's values is its any more
	forEachAddress(es, func(addr string) {
		if first, ok := ia.only[addr]; ok {
			if *first == es.Cluster {
				delete(ia.only, addr)
			}
			return
		}
		ids := ia.many[addr]
		i := slices.Index(ids, es.Cluster)
		if i < 0 {
			return // removed already: in another group of the same export
		}
		ia.decShared(es.Cluster)
		if len(ids) == 2 {
			rest := ids[1-i]
			ia.decShared(rest)
			delete(ia.many, addr)
			ia.only[addr] = ia.idOf(rest)
			return
		}
		ia.many[addr] = slices.Delete(ids, i, i+1)
	})
}

// idOf is the one *ClusterID of source id that only's values point to.
func (ia *importAddresses) idOf(id clusterset.ClusterID) *clusterset.ClusterID {
	p := ia.ids[id]
	if p == nil {
		p = &id
		ia.ids[id] = p
	}
	return p
}

func (ia *importAddresses) decShared(id clusterset.ClusterID) {
	if ia.shared[id]--; ia.shared[id] <= 0 {
		delete(ia.shared, id)
	}
}

// report returns the duplicates; it costs the duplicated addresses.
func (ia *importAddresses) report() duplicateReport {
	r := duplicateReport{Duplicated: len(ia.many)}
	if r.Duplicated == 0 {
		return r
	}
	r.Shared = make(map[clusterset.ClusterID]int, len(ia.shared))
	for id, n := range ia.shared {
		r.Shared[id] = n
	}
	for addr, ids := range ia.many {
		if r.Example == "" || addr < r.Example {
			r.Example, r.ExampleSources = addr, ids
		}
	}
	r.ExampleSources = slices.Clone(r.ExampleSources) // the index changes its own
	return r
}

// sameAddresses reports whether a and b hold the same addresses in the
// same order (forEachAddress's), so that the index of one is the other's.
func sameAddresses(a, b *clusterset.ExportedService) bool {
	if len(a.Endpoints) != len(b.Endpoints) {
		return false
	}
	for i := range a.Endpoints {
		ea, eb := a.Endpoints[i].Endpoints, b.Endpoints[i].Endpoints
		if len(ea) != len(eb) {
			return false
		}
		if len(ea) > 0 && &ea[0] == &eb[0] {
			continue // the very array: a run of the export that did not change
		}
		for j := range ea {
			if !slices.Equal(ea[j].Addresses, eb[j].Addresses) {
				return false
			}
		}
	}
	return true
}

// forEachAddress calls f with every address of every endpoint of es.
func forEachAddress(es *clusterset.ExportedService, f func(addr string)) {
	for _, g := range es.Endpoints {
		for _, ep := range g.Endpoints {
			for _, addr := range ep.Addresses {
				f(addr)
			}
		}
	}
}
