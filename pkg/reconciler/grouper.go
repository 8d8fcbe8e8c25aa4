package reconciler

import (
	"cmp"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
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
	// MaxRun, when above zero, has each group returned as runs: several
	// EndpointGroups of the same address type and ports, one after the
	// other, each of at most MaxRun endpoints, that JoinRuns makes into the
	// group. A change then copies the run it falls in, and the other runs
	// are the very arrays of the last result: one endpoint's change of a
	// Service of 50,000 copies a run, not 50,000 entries, and a caller
	// that compares the result with the last (Unmoved, Moved) skips each
	// unchanged run at once. Runs are cut at MaxRun/2 when made, split when
	// they grow past MaxRun and joined to a neighbour when they shrink
	// below MaxRun/4. Zero: one EndpointGroup per group, as GroupSlices.
	MaxRun int

	sources map[string]*groupedSource
	groups  map[string]*liveGroup
	last    []EndpointGroup
	called  bool
	// pass counts the calls; a source seen in a call carries its pass.
	pass int
}

// JoinRuns returns groups with each sequence of groups of the same
// address type and ports joined into one (a SliceGrouper's result with
// MaxRun, as GroupSlices gives it). A group that is alone is returned as
// it is, sharing its arrays; when groups holds no runs, it is returned
// itself.
func JoinRuns(groups []EndpointGroup) []EndpointGroup {
	runs := false
	for i := 1; i < len(groups) && !runs; i++ {
		runs = sameGroupKey(&groups[i-1], &groups[i])
	}
	if !runs {
		return groups
	}
	out := make([]EndpointGroup, 0, len(groups))
	for i := 0; i < len(groups); {
		j := i + 1
		n := len(groups[i].Endpoints)
		for j < len(groups) && sameGroupKey(&groups[i], &groups[j]) {
			n += len(groups[j].Endpoints)
			j++
		}
		g := groups[i]
		if j > i+1 {
			g.Endpoints = make([]discoveryv1.Endpoint, 0, n)
			for _, r := range groups[i:j] {
				g.Endpoints = append(g.Endpoints, r.Endpoints...)
			}
		}
		out = append(out, g)
		i = j
	}
	return out
}

// sameGroupKey reports whether a and b are of the same address type and
// port set: runs of one group.
func sameGroupKey(a, b *EndpointGroup) bool {
	if a.AddressType != b.AddressType {
		return false
	}
	// The runs of a group share its ports (and a SliceGrouper's next
	// result, while they do not change): no key is made for each.
	if len(a.Ports) == len(b.Ports) && (len(a.Ports) == 0 || &a.Ports[0] == &b.Ports[0]) {
		return true
	}
	return portKey(a.Ports) == portKey(b.Ports)
}

// groupedSource is what a slice contributed at the last call.
type groupedSource struct {
	name, resourceVersion string
	uid                   types.UID
	key                   string // its group's
	ports                 []discoveryv1.EndpointPort
	ids                   []string // of its endpoints, in its order
	pass                  int      // the last call that listed it
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

// liveGroup is one address type and port set: its runs.
type liveGroup struct {
	addressType discoveryv1.AddressType
	key         string // groupKey's
	portKey     string
	ports       []discoveryv1.EndpointPort
	// runs hold the group's identities in sorted order, none of them
	// empty (one run unless MaxRun is set).
	runs []run
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
	// first is the group's first slice in name order (whose ports the
	// group takes), unless firstGone says it went: then it is looked for.
	first     *groupedSource
	firstGone bool
}

// run is a stretch of a group's identities, in sorted order, and the
// winning endpoint of each, in the same order. Its arrays are never
// written once made: a result shares them.
type run struct {
	order     []string
	endpoints []discoveryv1.Endpoint
}

// Group returns the groups of items, as GroupSlices(items) does (in runs
// when MaxRun is set).
func (g *SliceGrouper) Group(items []discoveryv1.EndpointSlice) []EndpointGroup {
	if g.sources == nil {
		g.sources, g.groups = map[string]*groupedSource{}, map[string]*liveGroup{}
	}
	changed := g.read(items) || !g.called
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
	g.last = resultOf(live)
	return g.last
}

// read takes in the slices of items that are new or changed and drops
// those gone; it reports whether any was.
func (g *SliceGrouper) read(items []discoveryv1.EndpointSlice) (changed bool) {
	g.pass++
	listed := 0 // sources listed, each once
	for i := range items {
		s := &items[i]
		old := g.sources[s.Name]
		if old == nil || old.pass != g.pass {
			listed++
		}
		if old != nil && s.ResourceVersion != "" && old.resourceVersion == s.ResourceVersion && old.uid == s.UID {
			old.pass = g.pass
			continue
		}
		changed = true
		if old != nil {
			g.remove(old)
		}
		g.add(s)
	}
	if listed == len(g.sources) {
		return changed // every source listed: none went
	}
	for name, old := range g.sources {
		if old.pass != g.pass {
			changed = true
			g.remove(old)
			delete(g.sources, name)
		}
	}
	return changed
}

// resultOf returns the groups' runs (a group with slices but no
// endpoints as one group without any).
func resultOf(live []*liveGroup) []EndpointGroup {
	n := 0
	for _, lg := range live {
		n += max(1, len(lg.runs))
	}
	out := make([]EndpointGroup, 0, n)
	for _, lg := range live {
		if len(lg.runs) == 0 {
			out = append(out, EndpointGroup{AddressType: lg.addressType, Ports: lg.ports, Endpoints: []discoveryv1.Endpoint{}})
		}
		for _, r := range lg.runs {
			out = append(out, EndpointGroup{AddressType: lg.addressType, Ports: lg.ports, Endpoints: r.endpoints})
		}
	}
	return out
}

// add takes s's endpoints as candidates of their group.
func (g *SliceGrouper) add(s *discoveryv1.EndpointSlice) {
	key := groupKey(s.AddressType, s.Ports)
	src := &groupedSource{name: s.Name, resourceVersion: s.ResourceVersion, uid: s.UID, key: key, ports: s.Ports,
		ids: make([]string, len(s.Endpoints)), pass: g.pass}
	g.sources[s.Name] = src
	lg := g.groups[key]
	if lg == nil {
		lg = &liveGroup{addressType: s.AddressType, key: key, portKey: key[len(s.AddressType)+1:],
			one: map[string]candidate{}, more: map[string][]candidate{}, dirty: map[string]struct{}{}}
		g.groups[key] = lg
	}
	lg.slices++
	lg.touched = true
	if !lg.firstGone && (lg.first == nil || src.name <= lg.first.name) {
		lg.first = src
	}
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
	if lg.first == src {
		lg.firstGone = true
	}
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

// edit is one change of a run's sorted identities, at an index of the
// run in the last result: an identity inserted before it, or the one there
// removed (ep nil) or given another endpoint, ep.
type edit struct {
	run    int
	at     int
	insert bool
	id     string
	ep     *discoveryv1.Endpoint
}

// settle builds lg's runs from the last ones and its dirty identities:
// the runs an edit falls in anew, the others as they were (the last
// result may still be held).
func (g *SliceGrouper) settle(lg *liveGroup) {
	if len(lg.runs) == 0 {
		lg.runs = []run{{}} // where the first identities go
	}
	runs, made := lg.edited(lg.edits(), g.MaxRun)
	lg.runs = joinShort(runs, made, g.MaxRun)
	if len(lg.dirty) > 1024 {
		lg.dirty = map[string]struct{}{} // clear() would cost what the map held at its largest, each time
	} else {
		clear(lg.dirty)
	}
	lg.touched = false
	// The group's ports are those of its first slice in name order, as
	// GroupSlices takes them.
	if lg.firstGone {
		lg.first, lg.firstGone = nil, false
		for _, src := range g.sources {
			if src.key == lg.key && (lg.first == nil || src.name < lg.first.name) {
				lg.first = src
			}
		}
	}
	first := lg.first
	if lg.ports == nil || !PortsEqual(lg.ports, first.ports) {
		lg.ports = clonePorts(first.ports) // else kept: the next result shares it
	}
}

// PortsEqual reports whether two groups' or slices' ports are equal,
// field by field, at once when they are the very same array (an export's
// runs share their group's). For callers that compare groups without
// reflection.
func PortsEqual(a, b []discoveryv1.EndpointPort) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	return slices.EqualFunc(a, b, func(x, y discoveryv1.EndpointPort) bool {
		return ptr.Equal(x.Name, y.Name) && ptr.Equal(x.Protocol, y.Protocol) && ptr.Equal(x.Port, y.Port) && ptr.Equal(x.AppProtocol, y.AppProtocol)
	})
}

// edits returns the edits of lg's dirty identities, by run and index.
func (lg *liveGroup) edits() []edit {
	edits := make([]edit, 0, len(lg.dirty))
	for id := range lg.dirty {
		r, at, found := lg.find(id)
		ep, listed := lg.winner(id)
		if found && listed && EndpointIdentical(&lg.runs[r].endpoints[at], ep) {
			continue // a slice rewritten as it was: its run stays as it is
		}
		if found || listed {
			edits = append(edits, edit{run: r, at: at, insert: !found, id: id, ep: ep})
		}
	}
	slices.SortFunc(edits, func(a, b edit) int {
		// Inserts at an index go before the identity there: they sort
		// before it.
		return cmp.Or(cmp.Compare(a.run, b.run), cmp.Compare(a.at, b.at), -cmpBool(a.insert, b.insert), cmp.Compare(a.id, b.id))
	})
	return edits
}

// edited returns lg's runs with edits made: the runs they fall in made
// anew (and split if too long), the others as they were, and the indexes
// of the runs made anew.
func (lg *liveGroup) edited(edits []edit, maxRun int) (runs []run, made []int) {
	runs = make([]run, 0, len(lg.runs)+1)
	for r, next := 0, 0; r < len(lg.runs); r++ {
		end := next
		for end < len(edits) && edits[end].run == r {
			end++
		}
		if end == next {
			if len(lg.runs[r].order) > 0 { // not the place held for the first
				runs = append(runs, lg.runs[r])
			}
			continue
		}
		for _, piece := range lg.runs[r].edited(edits[next:end]).split(maxRun) {
			made = append(made, len(runs))
			runs = append(runs, piece)
		}
		next = end
	}
	return runs, made
}

// find returns the run where id is or would be inserted, its index
// there, and whether it is there.
func (lg *liveGroup) find(id string) (r, at int, found bool) {
	// The first run whose last identity is not before id; past the last,
	// the last.
	r, _ = slices.BinarySearchFunc(lg.runs, id, func(x run, id string) int {
		if len(x.order) == 0 {
			return 1
		}
		return cmp.Compare(x.order[len(x.order)-1], id)
	})
	r = min(r, len(lg.runs)-1)
	at, found = slices.BinarySearch(lg.runs[r].order, id)
	return r, at, found
}

// edited returns the run with edits made, in new arrays.
func (x run) edited(edits []edit) run {
	// Identities only come or go when some are inserted or dropped; a
	// change of conditions alone keeps the order and every index.
	sameOrder := !slices.ContainsFunc(edits, func(e edit) bool { return e.insert || e.ep == nil })
	if sameOrder {
		endpoints := slices.Clone(x.endpoints)
		for _, e := range edits {
			endpoints[e.at] = *e.ep
		}
		return run{order: x.order, endpoints: endpoints}
	}
	return x.spliced(edits)
}

// spliced returns the run with edits that insert or drop identities
// made, copying the stretches between them.
func (x run) spliced(edits []edit) run {
	order := make([]string, 0, len(x.order)+len(edits))
	endpoints := make([]discoveryv1.Endpoint, 0, len(x.order)+len(edits))
	copied := 0
	for _, e := range edits {
		order, endpoints = append(order, x.order[copied:e.at]...), append(endpoints, x.endpoints[copied:e.at]...)
		copied = e.at
		if !e.insert {
			copied++ // the identity at e.at is replaced or dropped
		}
		switch {
		case e.ep != nil && !e.insert && EndpointIdentical(&x.endpoints[e.at], e.ep):
			order, endpoints = append(order, e.id), append(endpoints, x.endpoints[e.at])
		case e.ep != nil:
			order, endpoints = append(order, e.id), append(endpoints, *e.ep)
		}
	}
	return run{order: slices.Clip(append(order, x.order[copied:]...)), endpoints: slices.Clip(append(endpoints, x.endpoints[copied:]...))}
}

// split returns the run as it is when it holds no more than maxRun
// identities (or maxRun is zero), none when it is empty, and otherwise
// cut in pieces of about maxRun/2, sharing its arrays.
func (x run) split(maxRun int) []run {
	n := len(x.order)
	switch {
	case n == 0:
		return nil
	case maxRun <= 0 || n <= maxRun:
		return []run{x}
	}
	pieces := (n + max(1, maxRun/2) - 1) / max(1, maxRun/2)
	out := make([]run, 0, pieces)
	for p := range pieces {
		lo, hi := p*n/pieces, (p+1)*n/pieces
		out = append(out, run{order: x.order[lo:hi:hi], endpoints: x.endpoints[lo:hi:hi]})
	}
	return out
}

// joinShort joins each run of made (indexes into runs, ascending) that
// holds fewer than maxRun/4 identities to a neighbour, in new arrays, so
// that a group that shrank is not left in many small runs.
func joinShort(runs []run, made []int, maxRun int) []run {
	if maxRun/4 == 0 || len(runs) < 2 {
		return runs
	}
	for k := len(made) - 1; k >= 0; k-- { // from the end: the indexes before stay valid
		i := made[k]
		if i >= len(runs) || len(runs[i].order) >= maxRun/4 || len(runs) < 2 {
			continue
		}
		lo := i
		if i == len(runs)-1 {
			lo = i - 1
		}
		a, b := runs[lo], runs[lo+1]
		joined := run{order: slices.Concat(a.order, b.order), endpoints: slices.Concat(a.endpoints, b.endpoints)}
		runs = slices.Replace(runs, lo, lo+2, joined.split(maxRun)...)
	}
	return runs
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
