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
//
// A part added or removed (an import's first parts arriving one by one, a
// Service growing or shrinking) is taken in as well, when its groups are
// the union's and its first addresses new: the union's groups it touches
// are made again by concatenation, without a set of every endpoint built
// anew (an import of 50,000 endpoints in 500 parts did that 500 times in
// each reader). That needs the union's first addresses (seen), kept for
// unions of at least incrementalPartsFrom endpoints only.
type union struct {
	sources [][]reconciler.EndpointGroup
	groups  []reconciler.EndpointGroup
	at      [][]place
	// index finds a group of the union by its key (groupKey); seen are
	// its first addresses, when kept.
	index map[string]int
	seen  map[slotKey]struct{}
}

// place is where a source group's endpoints start: a group of the union
// and an index in it.
type place struct{ group, index int }

// next returns the union of sources: u's, patched where sources moved, or
// made anew (u may be nil), keeping its first addresses from seenFrom
// endpoints (the reader's: incrementalPartsFrom).
func (u *union) next(sources [][]reconciler.EndpointGroup, seenFrom int) *union {
	if alone, ok := aloneOf(sources); ok {
		return alone
	}
	if u == nil || u.at == nil {
		return unionOf(sources, seenFrom)
	}
	if len(sources) == len(u.sources) {
		if groups, ok := u.patch(sources); ok {
			return &union{sources: sources, groups: groups, at: u.at, index: u.index, seen: u.seen}
		}
	}
	if u.seen != nil && (len(sources) == len(u.sources)+1 || len(sources) == len(u.sources)-1) {
		if next, ok := u.addOrRemove(sources); ok {
			return next
		}
	}
	return unionOf(sources, seenFrom)
}

// aloneOf is the union of sources when only one of them has groups, of
// distinct address types and ports, in none of which a first address
// comes twice: that source as it is, not a copy. Most exports are
// published in one part: their readers held each endpoint twice, in the
// part and in the union (180 bytes an endpoint, a 255-member hub load's
// profile). What it is not patched from (at is nil): an export of one
// part has 100 endpoints at most.
func aloneOf(sources [][]reconciler.EndpointGroup) (*union, bool) {
	var only []reconciler.EndpointGroup
	for _, groups := range sources {
		if len(groups) == 0 {
			continue
		}
		if only != nil {
			return nil, false
		}
		only = groups
	}
	if only == nil || len(only) > 1 && !distinctGroups(only) {
		return nil, false
	}
	for gi := range only {
		seen := make(map[string]struct{}, len(only[gi].Endpoints))
		for j := range only[gi].Endpoints {
			a := firstAddress(&only[gi].Endpoints[j])
			if _, dup := seen[a]; dup {
				return nil, false
			}
			seen[a] = struct{}{}
		}
	}
	return &union{sources: sources, groups: only}, true
}

// distinctGroups reports whether no two groups are of the same address
// type and ports.
func distinctGroups(groups []reconciler.EndpointGroup) bool {
	keys := make(map[string]struct{}, len(groups))
	for gi := range groups {
		k := groupKey((*v1alpha1.EndpointGroup)(&groups[gi]))
		if _, dup := keys[k]; dup {
			return false
		}
		keys[k] = struct{}{}
	}
	return true
}

// addOrRemove is u with the one source that sources add or lack; false
// when sources differ from u's otherwise, when the source added brings a
// group the union lacks or a first address it holds, or when the order in
// which the sources name the groups changes.
func (u *union) addOrRemove(sources [][]reconciler.EndpointGroup) (*union, bool) {
	changed, ok := u.oneChanged(sources)
	if !ok {
		return nil, false
	}
	sizes, touched, ok := u.take(changed, len(sources) > len(u.sources))
	if !ok {
		return nil, false
	}
	return u.concatenated(sources, sizes, touched)
}

// oneChanged returns the one source that sources add to u's, or lack.
func (u *union) oneChanged(sources [][]reconciler.EndpointGroup) ([]reconciler.EndpointGroup, bool) {
	longer, shorter := sources, u.sources
	if len(sources) < len(u.sources) {
		longer, shorter = u.sources, sources
	}
	at := 0
	for at < len(shorter) && sameSource(longer[at], shorter[at]) {
		at++
	}
	for i := at; i < len(shorter); i++ {
		if !sameSource(longer[i+1], shorter[i]) {
			return nil, false
		}
	}
	return longer[at], true
}

// take adds the first addresses of changed to u.seen (adding) or drops
// them, and returns the sizes of the union's groups after it, and which
// it touches. u.seen is taken over (u is let go); a refusal half-way lets
// both go.
func (u *union) take(changed []reconciler.EndpointGroup, adding bool) (sizes []int, touched map[int]bool, ok bool) {
	sizes = make([]int, len(u.groups))
	for g := range u.groups {
		sizes[g] = len(u.groups[g].Endpoints)
	}
	touched = map[int]bool{}
	for gi := range changed {
		g, ok := u.index[groupKey((*v1alpha1.EndpointGroup)(&changed[gi]))]
		if !ok {
			return nil, nil, false
		}
		touched[g] = true
		for j := range changed[gi].Endpoints {
			k := slotKey{g, firstAddress(&changed[gi].Endpoints[j])}
			if _, held := u.seen[k]; adding && held {
				return nil, nil, false
			}
			if adding {
				u.seen[k] = struct{}{}
				sizes[g]++
			} else {
				delete(u.seen, k)
				sizes[g]--
			}
		}
	}
	return sizes, touched, true
}

// concatenated is the union of sources when no first address comes
// twice: each of its groups is its sources' groups one after the other.
// The groups touched are made so again; the others are u's. false when
// the sources name the groups in another order than u's (the union's
// order), or no longer name one.
func (u *union) concatenated(sources [][]reconciler.EndpointGroup, sizes []int, touched map[int]bool) (*union, bool) {
	next := &union{sources: sources, groups: slices.Clone(u.groups), at: make([][]place, len(sources)), index: u.index, seen: u.seen}
	for g := range touched {
		next.groups[g].Endpoints = make([]discoveryv1.Endpoint, 0, sizes[g])
	}
	filled := make([]int, len(u.groups))
	named := 0
	for si, groups := range sources {
		next.at[si] = make([]place, len(groups))
		for gi := range groups {
			g := u.index[groupKey((*v1alpha1.EndpointGroup)(&groups[gi]))]
			if g > named {
				return nil, false
			}
			if g == named {
				named++
			}
			next.at[si][gi] = place{g, filled[g]}
			filled[g] += len(groups[gi].Endpoints)
			if touched[g] {
				next.groups[g].Endpoints = append(next.groups[g].Endpoints, groups[gi].Endpoints...)
			}
		}
	}
	return next, named == len(u.groups)
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

// sameSource reports whether two sources are the same groups: the same
// arrays of endpoints and ports.
func sameSource(a, b []reconciler.EndpointGroup) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].AddressType != b[i].AddressType || !samePorts(a[i].Ports, b[i].Ports) || !sameArray(a[i].Endpoints, b[i].Endpoints) {
			return false
		}
	}
	return true
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
// the order first seen, keeping the first endpoint of each first address;
// the union keeps the set of them when it holds seenFrom endpoints or
// more.
// Sized up front: growing the set and the groups cost more than filling
// them.
func unionOf(sources [][]reconciler.EndpointGroup, seenFrom int) *union {
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
	u := &union{sources: sources, groups: out, index: index}
	if !duplicates {
		u.at = places
		if total >= seenFrom {
			u.seen = seen
		}
	}
	return u
}
