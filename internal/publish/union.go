package publish

import (
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"

	v1alpha1 "github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// union is what an export was assembled into from its sources (the head's
// groups, then each part's). When no first address comes twice in a group
// (the rule: a publisher's parts share none), the union is in runs: the
// sources' groups themselves, those of one address type and ports
// together (groups in the order first named, each one's runs in the
// sources' order), every run of a group carrying the ports of the first
// that named it (reconciler.JoinRuns makes the group of them). No
// endpoint is copied: a part rewritten for a change of conditions
// replaces its run, and the reader holds each endpoint once, in its part
// (issue 56: one endpoint's change of 50,000 copied the 50,000 entries
// in each reader, which held each endpoint twice). When a first address
// comes twice (another member's input, or an endpoint moving between
// parts for a moment), each group is merged, keeping the first endpoint
// of each first address.
//
// A part added or removed (an import's first parts arriving one by one, a
// Service growing or shrinking) is taken in as well, when its groups are
// the union's and its first addresses new: the runs are laid out again,
// without a set of every endpoint built anew (an import of 50,000
// endpoints in 500 parts did that 500 times in each reader). That needs
// the union's first addresses (seen), kept for unions of at least
// incrementalPartsFrom endpoints only.
type union struct {
	sources [][]reconciler.EndpointGroup
	groups  []reconciler.EndpointGroup
	// at is, in runs, the entry of groups that each source's group is (-1:
	// an empty group, not listed); nil when merged.
	at [][]int
	// index numbers the groups by key (groupKey) in the order first
	// named; ports are each one's, as its runs carry them.
	index map[string]int
	ports [][]discoveryv1.EndpointPort
	// seen are the first addresses, when kept.
	seen map[slotKey]struct{}
}

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
		if next, ok := u.patch(sources); ok {
			return next
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
	if !ok || !u.take(changed, len(sources) > len(u.sources)) {
		return nil, false
	}
	groups, at, ok := runsOf(sources, u.index, u.ports)
	if !ok {
		return nil, false
	}
	return &union{sources: sources, groups: groups, at: at, index: u.index, ports: u.ports, seen: u.seen}, true
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
// them; false when changed names a group the union lacks, or adds a first
// address it holds. u.seen is taken over (u is let go); a refusal
// half-way lets both go.
func (u *union) take(changed []reconciler.EndpointGroup, adding bool) bool {
	for gi := range changed {
		g, ok := u.index[groupKey((*v1alpha1.EndpointGroup)(&changed[gi]))]
		if !ok {
			return false
		}
		for j := range changed[gi].Endpoints {
			k := slotKey{g, firstAddress(&changed[gi].Endpoints[j])}
			if _, held := u.seen[k]; adding && held {
				return false
			}
			if adding {
				u.seen[k] = struct{}{}
			} else {
				delete(u.seen, k)
			}
		}
	}
	return true
}

// runsOf lays the groups of sources out in runs, numbered by index, each
// run carrying its group's ports; false when a group is not in index, one
// of index is named by none, or the groups are first named in another
// order than index's (the union is then made anew).
func runsOf(sources [][]reconciler.EndpointGroup, index map[string]int, ports [][]discoveryv1.EndpointPort) ([]reconciler.EndpointGroup, [][]int, bool) {
	numbers := make([][]int, len(sources))
	runs := make([]int, len(ports)) // of each group: its sources' groups with endpoints
	named := 0
	for si, groups := range sources {
		numbers[si] = make([]int, len(groups))
		for gi := range groups {
			g, ok := index[groupKey((*v1alpha1.EndpointGroup)(&groups[gi]))]
			if !ok || g > named {
				return nil, nil, false
			}
			if g == named {
				named++
			}
			numbers[si][gi] = g
			if len(groups[gi].Endpoints) > 0 {
				runs[g]++
			}
		}
	}
	if named != len(ports) {
		return nil, nil, false
	}
	// A group's runs start after the runs of those before it; a group
	// with no endpoints at all is one empty run.
	next := make([]int, len(ports))
	total := 0
	for g, n := range runs {
		next[g] = total
		total += max(1, n)
	}
	out := make([]reconciler.EndpointGroup, total)
	listed := make([]bool, len(ports))
	at := make([][]int, len(sources))
	for si, groups := range sources {
		at[si] = make([]int, len(groups))
		for gi := range groups {
			g, endpoints := numbers[si][gi], groups[gi].Endpoints
			if len(endpoints) == 0 && (runs[g] > 0 || listed[g]) {
				at[si][gi] = -1
				continue
			}
			if endpoints == nil {
				endpoints = []discoveryv1.Endpoint{}
			}
			listed[g] = true
			at[si][gi] = next[g]
			out[next[g]] = reconciler.EndpointGroup{AddressType: groups[gi].AddressType, Ports: ports[g], Endpoints: endpoints}
			next[g]++
		}
	}
	return out, at, true
}

// patch is u with the endpoints of sources where they moved: each run
// whose source group changed replaced by it; false when sources differ
// from u's otherwise (another group, other first addresses).
func (u *union) patch(sources [][]reconciler.EndpointGroup) (*union, bool) {
	var groups []reconciler.EndpointGroup
	for i := range sources {
		if !u.patchSource(&groups, i, sources[i]) {
			return nil, false
		}
	}
	if groups == nil {
		groups = u.groups
	}
	return &union{sources: sources, groups: groups, at: u.at, index: u.index, ports: u.ports, seen: u.seen}, true
}

// patchOne is patch when only source i may have moved, to now: the other
// sources are not looked at, and u's own list of sources is updated in
// place (a reader's one part rewritten of 500: the list and its
// comparison were most of its work). False, and u unchanged, as patch.
func (u *union) patchOne(i int, now []reconciler.EndpointGroup) (*union, bool) {
	if u.at == nil || i >= len(u.sources) {
		return nil, false
	}
	var groups []reconciler.EndpointGroup
	if !u.patchSource(&groups, i, now) {
		return nil, false
	}
	if groups == nil {
		groups = u.groups
	}
	u.sources[i] = now
	return &union{sources: u.sources, groups: groups, at: u.at, index: u.index, ports: u.ports, seen: u.seen}, true
}

// patchSource replaces, in *groups (a copy of u's made at the first
// change), the runs of source i whose endpoints now moved; false when now
// has other groups or first addresses than u's source i.
func (u *union) patchSource(groups *[]reconciler.EndpointGroup, i int, now []reconciler.EndpointGroup) bool {
	if len(now) != len(u.sources[i]) {
		return false
	}
	for gi := range now {
		old, next := &u.sources[i][gi], &now[gi]
		sameKey := old.AddressType == next.AddressType && (samePorts(old.Ports, next.Ports) ||
			groupKey((*v1alpha1.EndpointGroup)(old)) == groupKey((*v1alpha1.EndpointGroup)(next)))
		switch {
		case !sameKey || !sameFirstAddresses(old.Endpoints, next.Endpoints):
			return false
		case sameArray(old.Endpoints, next.Endpoints) || u.at[i][gi] < 0:
			continue
		}
		if *groups == nil {
			*groups = slices.Clone(u.groups)
		}
		(*groups)[u.at[i][gi]].Endpoints = next.Endpoints
	}
	return true
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

// unionOf is the union of sources made anew: in runs when no first
// address comes twice in a group, merged otherwise; it keeps the first
// addresses when it holds seenFrom endpoints or more.
func unionOf(sources [][]reconciler.EndpointGroup, seenFrom int) *union {
	index, ports, sizes, total := groupsOf(sources)
	// Sized up front: growing the set cost more than filling it.
	seen := make(map[slotKey]struct{}, total)
	for _, groups := range sources {
		for i := range groups {
			g := &groups[i]
			at := index[groupKey((*v1alpha1.EndpointGroup)(g))]
			for j := range g.Endpoints {
				k := slotKey{at, firstAddress(&g.Endpoints[j])}
				if _, dup := seen[k]; dup {
					return &union{sources: sources, groups: merged(sources, index, ports, sizes)}
				}
				seen[k] = struct{}{}
			}
		}
	}
	groups, at, _ := runsOf(sources, index, ports)
	u := &union{sources: sources, groups: groups, at: at, index: index, ports: ports}
	if total >= seenFrom {
		u.seen = seen
	}
	return u
}

// groupsOf numbers the groups of sources by key (groupKey) in the order
// first named, with the ports of the first that names each and each
// one's endpoints, and counts them all.
func groupsOf(sources [][]reconciler.EndpointGroup) (index map[string]int, ports [][]discoveryv1.EndpointPort, sizes []int, total int) {
	index = map[string]int{}
	for _, groups := range sources {
		for i := range groups {
			g := &groups[i]
			gk := groupKey((*v1alpha1.EndpointGroup)(g))
			at, ok := index[gk]
			if !ok {
				at = len(ports)
				index[gk] = at
				ports = append(ports, g.Ports)
				sizes = append(sizes, 0)
			}
			sizes[at] += len(g.Endpoints)
			total += len(g.Endpoints)
		}
	}
	return index, ports, sizes, total
}

// merged merges the groups of sources of the same address type and
// ports, in the order first named (index, with their ports and sizes),
// keeping the first endpoint of each first address.
func merged(sources [][]reconciler.EndpointGroup, index map[string]int, ports [][]discoveryv1.EndpointPort, sizes []int) []reconciler.EndpointGroup {
	out := make([]reconciler.EndpointGroup, len(ports))
	for at := range out {
		out[at] = reconciler.EndpointGroup{AddressType: discoveryv1.AddressType(""), Ports: ports[at], Endpoints: make([]discoveryv1.Endpoint, 0, sizes[at])}
	}
	seen := map[slotKey]struct{}{}
	for _, groups := range sources {
		for i := range groups {
			g := &groups[i]
			at := index[groupKey((*v1alpha1.EndpointGroup)(g))]
			out[at].AddressType = g.AddressType
			for j := range g.Endpoints {
				k := slotKey{at, firstAddress(&g.Endpoints[j])}
				if _, dup := seen[k]; dup {
					continue
				}
				seen[k] = struct{}{}
				out[at].Endpoints = append(out[at].Endpoints, g.Endpoints[j])
			}
		}
	}
	return out
}
