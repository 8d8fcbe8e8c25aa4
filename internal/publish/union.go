package publish

import (
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"

	v1alpha1 "github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// union is what an export was assembled into from its sources (the head's
// groups, then each part's): groups is the union, and at says where each
// source group's endpoints start in it, when no first address came twice
// (nil otherwise). The next assembly whose sources differ only in groups
// of the same address type, ports, length and first addresses (a part
// rewritten for a change of conditions) copies those groups' endpoints
// over a copy of the last union's, instead of merging every endpoint anew:
// a change of one part of 500 merged all 50,000 endpoints of the export
// (issue 56).
type union struct {
	sources [][]reconciler.EndpointGroup
	groups  []reconciler.EndpointGroup
	at      [][]place
}

// place is where a source group's endpoints start: a group of the union
// and an index in it.
type place struct{ group, index int }

// next returns the union of sources: u's, patched where sources moved, or
// made anew (u may be nil).
func (u *union) next(sources [][]reconciler.EndpointGroup) *union {
	if u != nil && u.at != nil {
		if groups, ok := u.patch(sources); ok {
			return &union{sources: sources, groups: groups, at: u.at}
		}
	}
	return unionOf(sources)
}

// patch is u's groups with the endpoints of sources where they moved;
// false when sources differ from u's otherwise.
func (u *union) patch(sources [][]reconciler.EndpointGroup) ([]reconciler.EndpointGroup, bool) {
	if len(sources) != len(u.sources) {
		return nil, false
	}
	var groups []reconciler.EndpointGroup
	copied := map[int]bool{}
	for i := range sources {
		if len(sources[i]) != len(u.sources[i]) {
			return nil, false
		}
		for gi := range sources[i] {
			old, now := &u.sources[i][gi], &sources[i][gi]
			sameKey := old.AddressType == now.AddressType && (samePorts(old.Ports, now.Ports) ||
				groupKey((*v1alpha1.EndpointGroup)(old)) == groupKey((*v1alpha1.EndpointGroup)(now)))
			switch {
			case !sameKey || !sameFirstAddresses(old.Endpoints, now.Endpoints):
				return nil, false
			case sameArray(old.Endpoints, now.Endpoints):
				continue
			}
			if groups == nil {
				groups = slices.Clone(u.groups)
			}
			p := u.at[i][gi]
			if !copied[p.group] {
				copied[p.group] = true
				groups[p.group].Endpoints = slices.Clone(groups[p.group].Endpoints)
			}
			copy(groups[p.group].Endpoints[p.index:], now.Endpoints)
		}
	}
	if groups == nil {
		return u.groups, true
	}
	return groups, true
}

// sameArray reports whether a and b are the same array.
func sameArray(a, b []discoveryv1.Endpoint) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// samePorts reports whether a and b are the same array of ports.
func samePorts(a, b []discoveryv1.EndpointPort) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// sameFirstAddresses reports whether a and b list endpoints of the same
// first addresses, in the same order.
func sameFirstAddresses(a, b []discoveryv1.Endpoint) bool {
	if sameArray(a, b) {
		return true
	}
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if firstAddress(&a[i]) != firstAddress(&b[i]) {
			return false
		}
	}
	return true
}

// unionOf merges endpoint groups of the same address type and ports, in
// the order first seen, keeping the first endpoint of each first address.
// Sized up front: growing the set and the groups cost more than filling
// them.
func unionOf(sources [][]reconciler.EndpointGroup) *union {
	var out []reconciler.EndpointGroup
	var sizes []int
	index := map[string]int{}
	total := 0
	for _, groups := range sources {
		for i := range groups {
			g := &groups[i]
			gk := groupKey((*v1alpha1.EndpointGroup)(g))
			at, ok := index[gk]
			if !ok {
				at = len(out)
				index[gk] = at
				out = append(out, reconciler.EndpointGroup{AddressType: g.AddressType, Ports: g.Ports})
				sizes = append(sizes, 0)
			}
			sizes[at] += len(g.Endpoints)
			total += len(g.Endpoints)
		}
	}
	for at, n := range sizes {
		out[at].Endpoints = make([]discoveryv1.Endpoint, 0, n)
	}
	places := make([][]place, len(sources))
	duplicates := false
	seen := make(map[slotKey]struct{}, total)
	for si, groups := range sources {
		places[si] = make([]place, len(groups))
		for i := range groups {
			g := &groups[i]
			at := index[groupKey((*v1alpha1.EndpointGroup)(g))]
			places[si][i] = place{at, len(out[at].Endpoints)}
			for j := range g.Endpoints {
				k := slotKey{at, firstAddress(&g.Endpoints[j])}
				if _, dup := seen[k]; dup {
					duplicates = true // a place no longer says where a group's endpoints are
					continue
				}
				seen[k] = struct{}{}
				out[at].Endpoints = append(out[at].Endpoints, g.Endpoints[j])
			}
		}
	}
	u := &union{sources: sources, groups: out}
	if !duplicates {
		u.at = places
	}
	return u
}
