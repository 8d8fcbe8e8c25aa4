package reconciler

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// WithIncrementalPlans makes the reconciler remember, for each owner with
// at least minEndpoints desired endpoints, what its last plan read: each
// desired endpoint by identity, and each existing slice's endpoints'
// identities under its resourceVersion. The owner's next plan then reads
// only what moved since: the desired endpoints that are not the very ones
// of the last call, and the slices that are new, whose resourceVersion
// moved, or that hold an endpoint that moved. A plan is the same as
// without this option (the tests compare them over random changes); only
// the work differs. Default: off (0).
//
// It pays when each call's Desired shares the unchanged endpoints with
// the last call's: a new array, say, whose unchanged entries are copies
// of the old ones (an endpoint counts as unchanged when its addresses
// array and every pointer it holds are the same). An owner whose desired
// endpoints are all new each time, or whose groups, labels, address types
// or traffic distribution changed, or with duplicate endpoints, Input.Hints
// or Input.Topology, is planned in full, as without the option. The caller
// must not modify the endpoints it handed to a plan later: the next plan
// compares its Desired with them. Plans of one owner must not run
// concurrently (as Reconciler says of reconciles).
//
// The price is memory: per remembered owner, about 270 bytes
// per endpoint. Forget drops an owner's.
func WithIncrementalPlans(minEndpoints int) Option {
	return func(r *Reconciler) error {
		if minEndpoints < 0 {
			return fmt.Errorf("incremental plans: minimum endpoints must not be negative, got %d", minEndpoints)
		}
		r.incrementalMin = minEndpoints
		return nil
	}
}

// memos holds the memo of each owner planned incrementally.
type memos struct {
	mu      sync.Mutex
	byOwner map[types.UID]*memo
	// incremental counts the plans made from a memo (for tests).
	incremental atomic.Int64
}

// of returns the memo of in's owner, or nil when in's owner is not
// planned incrementally (and forgets any memo it had).
func (ms *memos) of(r *Reconciler, in Input) *memo {
	if r.incrementalMin == 0 {
		return nil
	}
	n := 0
	for _, g := range in.Desired {
		n += len(g.Endpoints)
	}
	uid := in.Owner.GetUID()
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if n < r.incrementalMin || in.Hints != nil || in.Topology != nil {
		delete(ms.byOwner, uid)
		return nil
	}
	if ms.byOwner == nil {
		ms.byOwner = map[types.UID]*memo{}
	}
	m := ms.byOwner[uid]
	if m == nil {
		m = &memo{}
		ms.byOwner[uid] = m
	}
	return m
}

func (ms *memos) forget(uid types.UID) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	delete(ms.byOwner, uid)
}

// memo is what the last plan of one owner read. It is valid only when
// the last plan was made or checked against it in full.
type memo struct {
	valid bool
	key   memoKey
	// desired is the last call's Desired (shared with the caller, never
	// modified).
	desired []EndpointGroup
	groups  map[string]*memoGroup
	slices  map[string]*memoSlice
	// generation marks the slices seen in this plan.
	generation int
}

// memoKey is what a plan depends on besides the desired endpoints and the
// existing slices: when it differs, the owner is planned in full.
type memoKey struct {
	gvk                 schema.GroupVersionKind
	addressTypes        string
	labels, annotations map[string]string
	trafficDistribution string
}

func keyOf(in Input, labels, annotations map[string]string) memoKey {
	types := make([]string, 0, len(in.AddressTypes))
	for _, t := range sortedAddressTypes(in.AddressTypes) {
		types = append(types, string(t))
	}
	return memoKey{gvk: in.OwnerGVK, addressTypes: strings.Join(types, ","),
		labels: labels, annotations: annotations, trafficDistribution: ptr.Deref(in.TrafficDistribution, "\x00")}
}

func (k memoKey) equal(o memoKey) bool {
	return k.gvk == o.gvk && k.addressTypes == o.addressTypes && k.trafficDistribution == o.trafficDistribution &&
		maps.Equal(k.labels, o.labels) && maps.Equal(k.annotations, o.annotations)
}

// memoGroup is one desired group: its endpoints by identity, desired or
// held by a slice (or both).
type memoGroup struct {
	addressType discoveryv1.AddressType
	portKey     string
	endpoints   map[string]*memoEndpoint
	// desired counts the identities desired; unheld are those no slice of
	// the group holds.
	desired int
	unheld  map[string]struct{}
}

// memoEndpoint is one identity of a group.
type memoEndpoint struct {
	// want is the desired endpoint (a copy of the caller's entry, sharing
	// what it points to), when count > 0.
	want discoveryv1.Endpoint
	// count is how many entries of Desired have this identity: more than
	// one is planned in full.
	count  int
	holder *memoSlice
}

// memoSlice is one existing slice as the last plan read it.
type memoSlice struct {
	uid             types.UID
	resourceVersion string
	// group is the desired group of its address type and ports; nil when
	// there is none (the slice is deleted).
	group *memoGroup
	// ids are the identities of its endpoints, in their order.
	ids []string
	// clean says that the last plan left the slice as it was: every
	// endpoint desired, held by it alone, up to date, with the right
	// hints and metadata.
	clean      bool
	affected   bool
	generation int
	// rank is the slice's place among the owner's slices in name order,
	// as the last plan read them (memo.inOrder).
	rank int
}

// update brings the memo up to in and owned, and reports whether the plan
// can be made from it. When not, the memo is invalid (and the owner is
// planned in full, which rebuilds it).
func (m *memo) update(in Input, owned []*discoveryv1.EndpointSlice, key memoKey) bool {
	ok := m.valid && m.key.equal(key) && m.sameGroups(in.Desired) && m.index(owned) && m.diff(in.Desired)
	m.valid = ok
	if ok {
		m.desired = in.Desired
	}
	return ok
}

// sameGroups reports whether desired names the groups of the last call,
// in the same order, a group's runs (SliceGrouper.MaxRun) taken as one:
// runs split or joined, a Service grows, and the memo still holds.
func (m *memo) sameGroups(desired []EndpointGroup) bool {
	i, j := 0, 0
	for i < len(desired) && j < len(m.desired) {
		if !sameGroupKey(&desired[i], &m.desired[j]) {
			return false
		}
		i, j = nextGroup(desired, i), nextGroup(m.desired, j)
	}
	return i == len(desired) && j == len(m.desired)
}

// nextGroup returns the index of the first group after groups[i] and its
// runs.
func nextGroup(groups []EndpointGroup, i int) int {
	for i++; i < len(groups) && sameGroupKey(&groups[i-1], &groups[i]); i++ {
	}
	return i
}

// inOrder puts owned in name order by the ranks of the last plan, when
// owned are the very slices it read (names and UIDs), and reports whether
// it did; owned is left as it was otherwise. Sorting 500 slices by name
// was a sixth of a plan for one endpoint's change of 50,000 (an
// informer lists them in another order each time).
func (m *memo) inOrder(owned []*discoveryv1.EndpointSlice) bool {
	if !m.valid || len(owned) != len(m.slices) {
		return false
	}
	placed := make([]*discoveryv1.EndpointSlice, len(owned))
	for _, s := range owned {
		ms := m.slices[s.Name]
		if ms == nil || ms.uid != s.UID || ms.rank >= len(placed) || placed[ms.rank] != nil {
			return false
		}
		placed[ms.rank] = s
	}
	copy(owned, placed)
	return true
}

// index reads the slices that are new or whose resourceVersion moved (or
// that have none: not read from an API server), and drops those gone
// first, so that an endpoint moved from a slice that went to a new one is
// not taken for a duplicate. A slice that shares an identity with another
// (or holds one twice) makes the memo unusable.
func (m *memo) index(owned []*discoveryv1.EndpointSlice) bool {
	m.generation++
	var fresh []*discoveryv1.EndpointSlice
	var ranks []int
	for i, s := range owned {
		ms := m.slices[s.Name]
		if ms != nil && ms.uid == s.UID && ms.resourceVersion == s.ResourceVersion && s.ResourceVersion != "" {
			ms.generation, ms.rank = m.generation, i
		} else {
			fresh, ranks = append(fresh, s), append(ranks, i)
		}
	}
	for name, ms := range m.slices {
		if ms.generation != m.generation {
			ms.unregister()
			delete(m.slices, name)
		}
	}
	for i, s := range fresh {
		ms := &memoSlice{uid: s.UID, resourceVersion: s.ResourceVersion, generation: m.generation, rank: ranks[i],
			group: m.groups[groupKey(s.AddressType, s.Ports)]}
		m.slices[s.Name] = ms
		if ms.group == nil {
			continue
		}
		ms.ids = make([]string, len(s.Endpoints))
		for i := range s.Endpoints {
			ms.ids[i] = endpointID(&s.Endpoints[i])
		}
		if !ms.register() {
			return false
		}
	}
	return true
}

// register makes ms the holder of its identities; false when another
// slice (or ms itself) already holds one.
func (ms *memoSlice) register() bool {
	g := ms.group
	for _, id := range ms.ids {
		e := g.endpoints[id]
		if e == nil {
			e = &memoEndpoint{}
			g.endpoints[id] = e
		}
		if e.holder != nil {
			return false
		}
		e.holder = ms
		delete(g.unheld, id)
	}
	return true
}

// unregister drops ms as the holder of its identities.
func (ms *memoSlice) unregister() {
	g := ms.group
	if g == nil {
		return
	}
	for _, id := range ms.ids {
		e := g.endpoints[id]
		if e == nil || e.holder != ms {
			continue
		}
		e.holder = nil
		if e.count > 0 {
			g.unheld[id] = struct{}{}
		} else {
			delete(g.endpoints, id)
		}
	}
}

// diff takes in the desired endpoints that are not the very ones of the
// last call (Moved); the slices holding them are marked affected.
func (m *memo) diff(desired []EndpointGroup) bool {
	changes, ok := movedRuns(m.desired, desired)
	if !ok {
		return false
	}
	d := memoDiff{was: map[*memoEndpoint]bool{}, touched: map[*memoGroup][]string{}}
	for _, c := range changes {
		g := m.groups[groupKey(c.group.AddressType, c.group.Ports)]
		if g == nil {
			return false
		}
		for j := range c.old {
			e := d.touch(g, &c.old[j])
			if e.count == 0 {
				return false // not what the memo says was desired
			}
			e.count--
		}
		for j := range c.new {
			e := d.touch(g, &c.new[j])
			e.count++
			e.want = c.new[j]
		}
	}
	return d.settle()
}

// runChange is what moved in one group between two calls: entries that
// left it (old) and that came (new).
type runChange struct {
	group    *EndpointGroup // its address type and ports
	old, new []discoveryv1.Endpoint
}

// movedRuns returns what moved between old and now, and false when more
// than MovedIn's quarter moved. Groups at the same index and of the same
// key are compared as Moved compares them; when runs split, joined, came
// or went (the counts or keys by index differ), a run of now that is the
// very array of a run of old did not move, and every other run moved
// whole (a few runs of a few hundred entries, not the Service).
func movedRuns(old, now []EndpointGroup) ([]runChange, bool) {
	var out []runChange
	if len(old) == len(now) && aligned(old, now) {
		moved, few := MovedGroups(old, now)
		for _, mg := range moved {
			out = append(out, runChange{group: &now[mg.Index], old: mg.Old, new: mg.New})
		}
		return out, few
	}
	return movedByArray(old, now)
}

// movedByArray is movedRuns for groups that are not aligned: each run of
// now is matched with the run of old that is its very array, if any.
func movedByArray(old, now []EndpointGroup) ([]runChange, bool) {
	var out []runChange
	byArray := make(map[*discoveryv1.Endpoint]int, len(old))
	for i := range old {
		if len(old[i].Endpoints) > 0 {
			byArray[&old[i].Endpoints[0]] = i
		}
	}
	matched := make([]bool, len(old))
	total, moved := 0, 0
	for i := range now {
		eps := now[i].Endpoints
		total += len(eps)
		if len(eps) == 0 {
			continue
		}
		if j, ok := byArray[&eps[0]]; ok && !matched[j] && len(old[j].Endpoints) == len(eps) && sameGroupKey(&old[j], &now[i]) {
			matched[j] = true
			continue
		}
		moved += len(eps)
		out = append(out, runChange{group: &now[i], new: eps})
	}
	for j := range old {
		if !matched[j] && len(old[j].Endpoints) > 0 {
			moved += len(old[j].Endpoints)
			out = append(out, runChange{group: &old[j], old: old[j].Endpoints})
		}
	}
	return out, fewMoved(moved, total)
}

// aligned reports whether old and now hold groups of the same keys at
// the same indexes (they are as many).
func aligned(old, now []EndpointGroup) bool {
	for i := range now {
		if !sameGroupKey(&old[i], &now[i]) {
			return false
		}
	}
	return true
}

// memoDiff is what one diff touched: each identity's group, and whether
// it was desired before.
type memoDiff struct {
	was     map[*memoEndpoint]bool
	touched map[*memoGroup][]string
}

// touch returns the memo's entry of ep in g (a new one if none),
// recording what it was.
func (d *memoDiff) touch(g *memoGroup, ep *discoveryv1.Endpoint) *memoEndpoint {
	id := endpointID(ep)
	e := g.endpoints[id]
	if e == nil {
		e = &memoEndpoint{}
		g.endpoints[id] = e
	}
	if _, seen := d.was[e]; !seen {
		d.was[e] = e.count > 0
		d.touched[g] = append(d.touched[g], id)
	}
	return e
}

// settle updates the groups' counts and unheld identities after the
// touched ones, and marks their holders affected; false when one is
// desired twice.
func (d *memoDiff) settle() bool {
	for g, ids := range d.touched {
		for _, id := range ids {
			e := g.endpoints[id]
			if e.count > 1 {
				return false
			}
			now := e.count > 0
			switch {
			case now && !d.was[e]:
				g.desired++
			case !now && d.was[e]:
				g.desired--
				e.want = discoveryv1.Endpoint{}
			}
			if e.holder != nil {
				e.holder.affected = true
			}
			switch {
			case now && e.holder == nil:
				g.unheld[id] = struct{}{}
			case !now:
				delete(g.unheld, id)
				if e.holder == nil {
					delete(g.endpoints, id)
				}
			}
		}
	}
	return true
}

// MovedSpan is what moved between two versions of an array of endpoints:
// its first Head and last Tail entries are the very entries of the old
// version (Unmoved); Old and New are what lies between, in the old and the
// new version.
type MovedSpan struct {
	Head, Tail int
	Old, New   []discoveryv1.Endpoint
}

// MovedIn returns what moved between old and now, and false when more
// than a quarter of now's endpoints moved (plus 8, for small arrays): then
// work in proportion to what moved costs more than work on the whole.
func MovedIn(old, now []discoveryv1.Endpoint) (MovedSpan, bool) {
	span := movedIn(old, now)
	return span, fewMoved(len(span.Old)+len(span.New), len(now))
}

// Moved is MovedIn for each group of old and the group of now at the same
// index (they must be as many), counting what moved in all of them
// against all of now's endpoints. For callers that, like the reconciler,
// remember what they made of the last groups and redo only what moved.
func Moved(old, now []EndpointGroup) ([]MovedSpan, bool) {
	total, moved := 0, 0
	spans := make([]MovedSpan, len(now))
	for i := range now {
		spans[i] = movedIn(old[i].Endpoints, now[i].Endpoints)
		total += len(now[i].Endpoints)
		moved += len(spans[i].Old) + len(spans[i].New)
	}
	return spans, fewMoved(moved, total)
}

// MovedGroup is the MovedSpan of the group at Index.
type MovedGroup struct {
	Index int
	MovedSpan
}

// MovedGroups is Moved for groups most of which are the very arrays of
// the last call (the runs of a SliceGrouper with MaxRun): only the groups
// in which something moved, with their index, and no span for the others.
func MovedGroups(old, now []EndpointGroup) ([]MovedGroup, bool) {
	var out []MovedGroup
	total, moved := 0, 0
	for i := range now {
		total += len(now[i].Endpoints)
		if sp := movedIn(old[i].Endpoints, now[i].Endpoints); len(sp.Old)+len(sp.New) > 0 {
			moved += len(sp.Old) + len(sp.New)
			out = append(out, MovedGroup{Index: i, MovedSpan: sp})
		}
	}
	return out, fewMoved(moved, total)
}

func movedIn(old, now []discoveryv1.Endpoint) MovedSpan {
	head, tail := Unmoved(old, now)
	return MovedSpan{Head: head, Tail: tail, Old: old[head : len(old)-tail], New: now[head : len(now)-tail]}
}

// fewMoved is the rule of MovedIn and Moved: moved entries (old and new)
// of total are few enough to redo alone.
func fewMoved(moved, total int) bool { return moved <= total/4+8 }

// Unmoved returns how many entries at the head and at the tail of now are
// the very entries of old (copies of them, pointing to the same things:
// see WithIncrementalPlans). What lies between, now[head:len(now)-tail]
// against old[head:len(old)-tail], is what moved. For callers that,
// like the reconciler, check only what moved of an array handed again.
func Unmoved(old, now []discoveryv1.Endpoint) (head, tail int) {
	if len(old) == len(now) && (len(old) == 0 || &old[0] == &now[0]) {
		return len(now), 0 // the very array (an unchanged run of a SliceGrouper's)
	}
	for head < len(old) && head < len(now) && sameEndpoint(&old[head], &now[head]) {
		head++
	}
	for tail < len(old)-head && tail < len(now)-head && sameEndpoint(&old[len(old)-1-tail], &now[len(now)-1-tail]) {
		tail++
	}
	return head, tail
}

// sameEndpoint reports whether two desired entries are the very same
// endpoint: a copy of one another, pointing to the same things. (Two
// equal endpoints decoded apart are not: they are planned as moved,
// which costs work, not correctness.)
func sameEndpoint(a, b *discoveryv1.Endpoint) bool {
	return len(a.Addresses) == len(b.Addresses) && (len(a.Addresses) == 0 || &a.Addresses[0] == &b.Addresses[0]) &&
		a.Conditions.Ready == b.Conditions.Ready && a.Conditions.Serving == b.Conditions.Serving &&
		a.Conditions.Terminating == b.Conditions.Terminating &&
		a.Hostname == b.Hostname && a.TargetRef == b.TargetRef && a.NodeName == b.NodeName &&
		a.Zone == b.Zone && a.Hints == b.Hints && len(a.DeprecatedTopology) == 0 && len(b.DeprecatedTopology) == 0
}

// groupsFor returns the groups to plan from the memo, ordered as
// groupDesired orders them.
func (m *memo) groupsFor(desired []EndpointGroup) []*group {
	var out []*group
	seen := map[string]bool{}
	for i := range desired {
		if i > 0 && sameGroupKey(&desired[i-1], &desired[i]) {
			continue // a run of the last group
		}
		key := groupKey(desired[i].AddressType, desired[i].Ports)
		if seen[key] {
			continue
		}
		seen[key] = true
		mg := m.groups[key]
		out = append(out, &group{addressType: mg.addressType, portKey: mg.portKey, ports: desired[i].Ports, memo: mg})
	}
	slices.SortFunc(out, byTypeAndPorts)
	return out
}

// carriedOver reports whether the last plan's verdict on the slice holds:
// it was left clean and nothing it holds moved.
func (m *memo) carriedOver(s *discoveryv1.EndpointSlice) (ids []string, carried bool) {
	ms := m.slices[s.Name]
	return ms.ids, ms.clean && !ms.affected
}

// toPlace returns the desired endpoints of g that no slice holds, in
// identity order.
func (mg *memoGroup) toPlace() []*discoveryv1.Endpoint {
	ids := slices.Sorted(maps.Keys(mg.unheld))
	out := make([]*discoveryv1.Endpoint, len(ids))
	for i, id := range ids {
		out[i] = &mg.endpoints[id].want
	}
	return out
}

// settle records what the plan left clean: the slices it leaves unchanged
// (hints included). The others are written, or deleted; their next
// resourceVersion (or their absence) makes them read again.
func (m *memo) settle(unchanged []*pending) {
	for _, ms := range m.slices {
		ms.clean, ms.affected = false, false
	}
	for _, p := range unchanged {
		if p.slice == p.orig {
			m.slices[p.orig.Name].clean = true
		}
	}
}

// rebuild makes the memo anew from a plan made in full: groups are the
// planned groups, unchanged the slices the plan leaves as they were, read
// their identities into ids.
func (m *memo) rebuild(in Input, owned []*discoveryv1.EndpointSlice, key memoKey, groups []*group, read map[*discoveryv1.EndpointSlice][]string, unchanged []*pending) {
	*m = memo{key: key, desired: in.Desired, groups: make(map[string]*memoGroup, len(groups)),
		slices: make(map[string]*memoSlice, len(owned))}
	for _, g := range groups {
		if g.duplicates {
			return
		}
		mg := &memoGroup{addressType: g.addressType, portKey: g.portKey, desired: len(g.order),
			endpoints: make(map[string]*memoEndpoint, len(g.order)), unheld: map[string]struct{}{}}
		for _, id := range g.order {
			mg.endpoints[id] = &memoEndpoint{want: *g.byID[id], count: 1}
			mg.unheld[id] = struct{}{}
		}
		m.groups[groupKey(g.addressType, g.ports)] = mg
	}
	for i, s := range owned {
		ms := &memoSlice{uid: s.UID, resourceVersion: s.ResourceVersion, rank: i, group: m.groups[groupKey(s.AddressType, s.Ports)]}
		m.slices[s.Name] = ms
		if ms.group == nil {
			continue
		}
		ids, ok := read[s]
		if !ok {
			ids = make([]string, len(s.Endpoints))
			for i := range s.Endpoints {
				ids[i] = endpointID(&s.Endpoints[i])
			}
		}
		ms.ids = ids
		if !ms.register() {
			return
		}
	}
	m.settle(unchanged)
	m.valid = true
}
