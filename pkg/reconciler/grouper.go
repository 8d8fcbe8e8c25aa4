package reconciler

import (
	"cmp"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// SliceGrouper is GroupSlices for a caller that groups the same Service's
// slices again after each change: it remembers what it read, and a call
// after one slice changed reads that slice only. Its result equals
// GroupSlices' for the same slices, except that endpoints are not
// deep-copied: they share the slices' fields (an informer's objects, which
// nobody writes), and a result is never written by the grouper once
// returned, so it may be kept while the next one is built.
//
// A slice is known by its name (the slices of a Service share a
// namespace), and taken as unchanged when its UID and resourceVersion are
// those of the last call (a slice without a resourceVersion is read
// again every time). One Service's slices per SliceGrouper; not safe for
// concurrent use.
type SliceGrouper struct {
	sources map[string]*groupedSource
	groups  map[string]*liveGroup
	last    []EndpointGroup
	called  bool
}

// groupedSource is what a slice contributed at the last call.
type groupedSource struct {
	name, resourceVersion string
	uid                   types.UID
	key                   string // its group's
	ports                 []discoveryv1.EndpointPort
	ids                   []string // of its endpoints, in its order
}

// candidate is one slice's endpoint for an identity; where two slices (or
// one slice twice) list the same identity, the most available wins, and on
// a tie the first in slice name order, then in the slice's order.
type candidate struct {
	slice string
	index int
	ep    *discoveryv1.Endpoint
}

func (c candidate) beats(o candidate) bool {
	if a, b := availability(c.ep), availability(o.ep); a != b {
		return a > b
	}
	return cmp.Or(cmp.Compare(c.slice, o.slice), cmp.Compare(c.index, o.index)) < 0
}

// liveGroup is one address type and port set: its identities in sorted
// order and, in the same order, the winning endpoint of each.
type liveGroup struct {
	addressType discoveryv1.AddressType
	key         string // groupKey's
	portKey     string
	ports       []discoveryv1.EndpointPort
	order       []string
	endpoints   []discoveryv1.Endpoint
	// one holds the candidate of an identity listed once, more those of
	// an identity listed more than once (and it is then not in one).
	one  map[string]candidate
	more map[string][]candidate
	// dirty are the identities whose candidates changed since the last
	// result; touched says a slice of the group came, changed or went.
	dirty   map[string]struct{}
	touched bool
	// slices is how many slices are of the group: it lasts while one is,
	// with no endpoints if need be, as in GroupSlices.
	slices int
}

// Group returns the groups of items, as GroupSlices(items) does.
func (g *SliceGrouper) Group(items []discoveryv1.EndpointSlice) []EndpointGroup {
	if g.sources == nil {
		g.sources, g.groups = map[string]*groupedSource{}, map[string]*liveGroup{}
	}
	seen := make(map[string]struct{}, len(items))
	changed := !g.called
	for i := range items {
		s := &items[i]
		seen[s.Name] = struct{}{}
		old := g.sources[s.Name]
		if old != nil && s.ResourceVersion != "" && old.resourceVersion == s.ResourceVersion && old.uid == s.UID {
			continue
		}
		changed = true
		if old != nil {
			g.remove(old)
		}
		g.add(s)
	}
	for name, old := range g.sources {
		if _, ok := seen[name]; !ok {
			changed = true
			g.remove(old)
			delete(g.sources, name)
		}
	}
	g.called = true
	if !changed {
		return g.last
	}
	live := make([]*liveGroup, 0, len(g.groups))
	for key, lg := range g.groups {
		if lg.slices == 0 {
			delete(g.groups, key)
			continue
		}
		if lg.touched {
			g.settle(lg)
		}
		live = append(live, lg)
	}
	slices.SortFunc(live, func(a, b *liveGroup) int {
		return cmp.Or(cmp.Compare(a.addressType, b.addressType), cmp.Compare(a.portKey, b.portKey))
	})
	out := make([]EndpointGroup, len(live))
	for i, lg := range live {
		out[i] = EndpointGroup{AddressType: lg.addressType, Ports: lg.ports, Endpoints: lg.endpoints}
	}
	g.last = out
	return out
}

// add takes s's endpoints as candidates of their group.
func (g *SliceGrouper) add(s *discoveryv1.EndpointSlice) {
	key := groupKey(s.AddressType, s.Ports)
	src := &groupedSource{name: s.Name, resourceVersion: s.ResourceVersion, uid: s.UID, key: key, ports: s.Ports, ids: make([]string, len(s.Endpoints))}
	g.sources[s.Name] = src
	lg := g.groups[key]
	if lg == nil {
		lg = &liveGroup{addressType: s.AddressType, key: key, portKey: key[len(s.AddressType)+1:],
			one: map[string]candidate{}, more: map[string][]candidate{}, dirty: map[string]struct{}{}}
		g.groups[key] = lg
	}
	lg.slices++
	lg.touched = true
	for i := range s.Endpoints {
		id := endpointID(&s.Endpoints[i])
		src.ids[i] = id
		c := candidate{slice: s.Name, index: i, ep: &s.Endpoints[i]}
		if cs, ok := lg.more[id]; ok {
			lg.more[id] = append(cs, c)
		} else if first, ok := lg.one[id]; ok {
			delete(lg.one, id)
			lg.more[id] = []candidate{first, c}
		} else {
			lg.one[id] = c
		}
		lg.dirty[id] = struct{}{}
	}
}

// remove takes back what src contributed.
func (g *SliceGrouper) remove(src *groupedSource) {
	lg := g.groups[src.key]
	lg.slices--
	lg.touched = true
	for i, id := range src.ids {
		lg.dirty[id] = struct{}{}
		if c, ok := lg.one[id]; ok && c.slice == src.name && c.index == i {
			delete(lg.one, id)
			continue
		}
		cs := slices.DeleteFunc(lg.more[id], func(c candidate) bool { return c.slice == src.name && c.index == i })
		switch len(cs) {
		case 0:
			delete(lg.more, id)
		case 1:
			delete(lg.more, id)
			lg.one[id] = cs[0]
		default:
			lg.more[id] = cs
		}
	}
}

// winner returns the endpoint of id, if any slice lists it.
func (lg *liveGroup) winner(id string) (*discoveryv1.Endpoint, bool) {
	if c, ok := lg.one[id]; ok {
		return c.ep, true
	}
	cs := lg.more[id]
	if len(cs) == 0 {
		return nil, false
	}
	best := cs[0]
	for _, c := range cs[1:] {
		if c.beats(best) {
			best = c
		}
	}
	return best.ep, true
}

// edit is one change of a group's sorted identities, at an index of the
// last result: an identity inserted before it, or the one there removed
// (ep nil) or given another endpoint, ep.
type edit struct {
	at     int
	insert bool
	id     string
	ep     *discoveryv1.Endpoint
}

// settle builds lg's result from the last one and its dirty identities,
// in new arrays: the last result may still be held.
func (g *SliceGrouper) settle(lg *liveGroup) {
	edits := make([]edit, 0, len(lg.dirty))
	// Identities only come or go when some are inserted or dropped; a
	// change of conditions alone keeps the order and every index.
	sameOrder := true
	for id := range lg.dirty {
		at, found := slices.BinarySearch(lg.order, id)
		ep, listed := lg.winner(id)
		if found || listed {
			edits = append(edits, edit{at: at, insert: !found, id: id, ep: ep})
		}
		sameOrder = sameOrder && found == listed
	}
	if sameOrder {
		endpoints := slices.Clone(lg.endpoints)
		for _, e := range edits {
			if !EndpointIdentical(&endpoints[e.at], e.ep) {
				endpoints[e.at] = *e.ep
			}
		}
		lg.endpoints = endpoints
	} else {
		lg.splice(edits)
	}
	clear(lg.dirty)
	lg.touched = false
	// The group's ports are those of its first slice in name order, as
	// GroupSlices takes them.
	var first *groupedSource
	for _, src := range g.sources {
		if src.key == lg.key && (first == nil || src.name < first.name) {
			first = src
		}
	}
	lg.ports = clonePorts(first.ports)
}

// splice builds lg's identities and endpoints anew from edits that
// insert or drop some, copying the runs between them.
func (lg *liveGroup) splice(edits []edit) {
	slices.SortFunc(edits, func(a, b edit) int {
		// Inserts at an index go before the identity there: they sort
		// before it.
		return cmp.Or(cmp.Compare(a.at, b.at), -cmpBool(a.insert, b.insert), cmp.Compare(a.id, b.id))
	})
	order := make([]string, 0, len(lg.order)+len(edits))
	endpoints := make([]discoveryv1.Endpoint, 0, len(lg.order)+len(edits))
	copied := 0
	for _, e := range edits {
		order, endpoints = append(order, lg.order[copied:e.at]...), append(endpoints, lg.endpoints[copied:e.at]...)
		copied = e.at
		if !e.insert {
			copied++ // the identity at e.at is replaced or dropped
		}
		switch {
		case e.ep != nil && !e.insert && EndpointIdentical(&lg.endpoints[e.at], e.ep):
			order, endpoints = append(order, e.id), append(endpoints, lg.endpoints[e.at])
		case e.ep != nil:
			order, endpoints = append(order, e.id), append(endpoints, *e.ep)
		}
	}
	lg.order = slices.Clip(append(order, lg.order[copied:]...))
	lg.endpoints = slices.Clip(append(endpoints, lg.endpoints[copied:]...))
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}
