package publish

import (
	"maps"
	"slices"
	"strings"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// incrementalPartsFrom is the number of endpoints of an export from which
// the publisher remembers what its last plan of the parts read, and plans
// a change from what moved (partMemo; issue 56). Below it a plan in full
// costs less than a millisecond, and the memo's few hundred bytes per
// endpoint are not worth it.
const incrementalPartsFrom = 1000

// partMemos holds a partMemo per export.
type partMemos struct {
	mu    sync.Mutex
	byKey map[types.NamespacedName]*partMemo
}

// of returns key's memo, or nil (and forgets any) when want is too small
// to plan incrementally.
func (ms *partMemos) of(key types.NamespacedName, want []reconciler.EndpointGroup) *partMemo {
	n := 0
	for _, g := range want {
		n += len(g.Endpoints)
	}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if n < incrementalPartsFrom {
		delete(ms.byKey, key)
		return nil
	}
	if ms.byKey == nil {
		ms.byKey = map[types.NamespacedName]*partMemo{}
	}
	m := ms.byKey[key]
	if m == nil {
		m = &partMemo{}
		ms.byKey[key] = m
	}
	return m
}

func (ms *partMemos) forget(key types.NamespacedName) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	delete(ms.byKey, key)
}

// partMemo is what the last plan of one export's parts read: each wanted
// endpoint by its slot (group and first address), each existing part's
// first addresses under its resourceVersion, and which parts the plan
// kept as they were. The next plan then reads only the endpoints of want
// that are not the very ones of the last call (reconciler.Unmoved) and
// the parts that are new, whose resourceVersion moved, or that hold an
// endpoint that moved; it is the plan planParts makes (the tests compare
// them). It is planned in full when the groups, the maximum or anything
// else that the memo cannot follow changed, or a first address is wanted
// or held twice. The caller never modifies want once planned (the Store's
// exports are never modified).
type partMemo struct {
	valid bool
	max   int
	want  []reconciler.EndpointGroup
	// keys and gis are the group key and group index of each entry of
	// want; group finds the index of a key.
	keys  []string
	gis   []int
	group map[string]int
	slots map[slotKey]*memoSlot
	// unheld are the wanted slots no part holds; moved those of this
	// plan's moved endpoints, in want's order.
	unheld map[slotKey]struct{}
	moved  []slotKey
	// parts are the existing parts by name; byArray finds one by the
	// array of groups of the object last read (partIdentity), so that a
	// change reads no name of the parts that did not change. order lists
	// them by name, as planParts plans them, and ids their IDs as a plan
	// lists them (comparePartIDs), and idSet the same as a set: both made
	// anew only when a part comes, goes or changes its ID.
	parts   map[string]*memoPart
	byArray map[*v1alpha1.EndpointGroup]*memoPart
	order   []*memoPart
	ids     []string
	idSet   map[string]bool
	seen    int
	// fromMemo counts the plans made from the memo (for tests).
	fromMemo int
}

// memoSlot is one wanted (or held) endpoint.
type memoSlot struct {
	// endpoint is the wanted one (a copy of want's entry, sharing what it
	// points to), when count > 0.
	endpoint discoveryv1.Endpoint
	count    int
	holder   *memoPart
}

// memoPart is one existing part as the last plan read it.
type memoPart struct {
	name            string
	obj             *v1alpha1.PublishedExport
	uid             types.UID
	resourceVersion string
	// gi is its group's index; -1 when it holds no one wanted group (it
	// is removed).
	gi        int
	addresses []string
	// clean says the last plan kept it as it is, as next (the planned
	// successor of a part planned anew: it says nothing unless clean).
	clean    bool
	next     *v1alpha1.PublishedExport
	affected bool
	seen     int
}

// plan is planParts, from what moved since the last plan when it can be.
func (m *partMemo) plan(cluster clusterset.ClusterID, key types.NamespacedName, namespace, trigger string, want []reconciler.EndpointGroup, existing []*v1alpha1.PublishedExport, max int) partPlan {
	if m.valid && m.update(want, existing, max) {
		if pp, replanned, ok := m.incremental(cluster, key, namespace, want, max); ok {
			m.fromMemo++
			pp.stamp(trigger)
			if len(pp.plan.create)+len(pp.plan.remove) == 0 {
				// Every part kept: the IDs of those that exist. A copy: a
				// client decodes the API server's answer into the head.
				if len(m.ids) > 0 {
					pp.plan.ids = slices.Clone(m.ids)
				}
			} else {
				pp.listIDs()
			}
			m.settleReplanned(pp, replanned)
			return pp.plan
		}
	}
	byName := func(a, b *v1alpha1.PublishedExport) int { return strings.Compare(a.Name, b.Name) }
	if !slices.IsSortedFunc(existing, byName) { // as a cache lists them, mostly
		existing = slices.Clone(existing)
		slices.SortFunc(existing, byName)
	}
	pp := newPartPlanner(cluster, key, namespace, want, max)
	pp.keepAll(existing)
	pp.finish(trigger)
	m.rebuild(pp, want, existing, max)
	return pp.plan
}

// update brings the memo up to want and existing; false (and the memo
// invalid) when the plan cannot be made from it.
func (m *partMemo) update(want []reconciler.EndpointGroup, existing []*v1alpha1.PublishedExport, max int) bool {
	m.valid = max == m.max && len(want) == len(m.want) && m.sameKeys(want) && m.index(existing) && m.diff(want)
	if m.valid {
		m.want = want
	}
	return m.valid
}

func (m *partMemo) sameKeys(want []reconciler.EndpointGroup) bool {
	for i := range want {
		a, b := &want[i], &m.want[i]
		if a.AddressType == b.AddressType && samePorts(a.Ports, b.Ports) {
			continue // the same ports (an export's runs share them): the same key
		}
		if groupKey((*v1alpha1.EndpointGroup)(&want[i])) != m.keys[i] {
			return false
		}
	}
	return true
}

// index reads the parts that are new or whose resourceVersion moved (or
// that have none: not read from an API server), and drops those gone
// first. A part rewritten with the same endpoints (by first address) keeps
// its slots: one endpoint's change re-reads one part, and moves nothing.
func (m *partMemo) index(existing []*v1alpha1.PublishedExport) bool {
	fresh, reorder := m.dropGone(existing)
	for _, p := range fresh {
		moved, ok := m.reread(p)
		if !ok {
			return false
		}
		reorder = reorder || moved
	}
	if reorder {
		m.reorder()
	}
	return true
}

// dropGone marks the parts of existing the memo holds as they are, drops
// those gone, and returns the others (fresh), and whether the parts are
// other ones than before (then the order is made anew).
func (m *partMemo) dropGone(existing []*v1alpha1.PublishedExport) (fresh []*v1alpha1.PublishedExport, reorder bool) {
	m.seen++
	kept := 0
	for _, p := range existing {
		if mp := m.held(p); mp != nil && p.ResourceVersion != "" {
			if partIdentity(p) != partIdentity(mp.obj) { // decoded anew (a relist): found by name
				delete(m.byArray, partIdentity(mp.obj))
				mp.obj = p
				m.track(mp)
			}
			mp.seen, mp.obj = m.seen, p // the list's newest copy, to plan and remove by
			kept++
		} else {
			fresh = append(fresh, p)
		}
	}
	for _, p := range fresh { // rewritten: the same name
		if old := m.parts[p.Name]; old != nil && old.seen != m.seen {
			old.seen = m.seen
			kept++
		}
	}
	if kept != len(m.order) {
		for _, mp := range m.order {
			if mp.seen != m.seen {
				m.unregister(mp)
				delete(m.parts, mp.name)
				delete(m.byArray, partIdentity(mp.obj))
			}
		}
	}
	return fresh, kept != len(m.order) || len(existing) != len(m.order)
}

// held returns the memo's part that is p as it was read, nil if none is.
func (m *partMemo) held(p *v1alpha1.PublishedExport) *memoPart {
	if id := partIdentity(p); id != nil {
		if mp := m.byArray[id]; mp != nil {
			return mp
		}
	}
	// No groups, or other arrays: by name, as it was read.
	if mp := m.parts[p.Name]; mp != nil && mp.uid == p.UID && mp.resourceVersion == p.ResourceVersion {
		return mp
	}
	return nil
}

// partIdentity is what finds part p again in the next plan: the array of
// its groups. A cache's list shares it with the object the cache holds
// (the list's objects are new structs, shallow copies), and an object
// rewritten is decoded into new arrays; so the same array is the same
// resourceVersion, found without reading a name. nil when p has no groups.
func partIdentity(p *v1alpha1.PublishedExport) *v1alpha1.EndpointGroup {
	if len(p.Spec.Endpoints) == 0 {
		return nil
	}
	return &p.Spec.Endpoints[0]
}

// reread reads part p anew; reorder says it is new or has another ID; false
// when it holds a slot another part holds.
func (m *partMemo) reread(p *v1alpha1.PublishedExport) (reorder, ok bool) {
	mp := m.read(p)
	old := m.parts[p.Name]
	if old != nil {
		reorder = old.obj.Spec.Part != p.Spec.Part
		delete(m.byArray, partIdentity(old.obj))
		if old.gi == mp.gi && slices.Equal(old.addresses, mp.addresses) {
			old.obj, old.uid, old.resourceVersion, old.clean, old.next = p, p.UID, p.ResourceVersion, false, nil
			m.track(old)
			return reorder, true
		}
		m.unregister(old)
		if i, found := slices.BinarySearchFunc(m.order, p.Name, byName); found {
			m.order[i] = mp
		}
	}
	m.parts[p.Name] = mp
	m.track(mp)
	return reorder || old == nil, m.register(mp)
}

// track makes mp found by its object's array of groups, if it has one.
func (m *partMemo) track(mp *memoPart) {
	if id := partIdentity(mp.obj); id != nil {
		m.byArray[id] = mp
	}
}

func byName(mp *memoPart, name string) int { return strings.Compare(mp.name, name) }

// reorder lists the parts by name, and their IDs.
func (m *partMemo) reorder() {
	m.order = slices.SortedFunc(maps.Values(m.parts), func(a, b *memoPart) int { return strings.Compare(a.name, b.name) })
	m.ids = make([]string, len(m.order))
	m.idSet = make(map[string]bool, len(m.order))
	for i, mp := range m.order {
		m.ids[i] = mp.obj.Spec.Part
		m.idSet[mp.obj.Spec.Part] = true
	}
	slices.SortFunc(m.ids, comparePartIDs)
}

// read returns what the memo keeps of part p.
func (m *partMemo) read(p *v1alpha1.PublishedExport) *memoPart {
	mp := &memoPart{name: p.Name, obj: p, uid: p.UID, resourceVersion: p.ResourceVersion, gi: -1, seen: m.seen}
	if len(p.Spec.Endpoints) != 1 {
		return mp
	}
	g := &p.Spec.Endpoints[0]
	gi, ok := m.group[groupKey(g)]
	if !ok {
		return mp
	}
	mp.gi = gi
	mp.addresses = make([]string, len(g.Endpoints))
	for i := range g.Endpoints {
		mp.addresses[i] = firstAddress(&g.Endpoints[i])
	}
	return mp
}

// register makes mp the holder of its slots; false when another part (or
// mp itself) holds one already.
func (m *partMemo) register(mp *memoPart) bool {
	if mp.gi < 0 {
		return true
	}
	for _, a := range mp.addresses {
		k := slotKey{mp.gi, a}
		s := m.slots[k]
		if s == nil {
			s = &memoSlot{}
			m.slots[k] = s
		}
		if s.holder != nil {
			return false
		}
		s.holder = mp
		delete(m.unheld, k)
	}
	return true
}

func (m *partMemo) unregister(mp *memoPart) {
	if mp.gi < 0 {
		return
	}
	for _, a := range mp.addresses {
		k := slotKey{mp.gi, a}
		s := m.slots[k]
		if s == nil || s.holder != mp {
			continue
		}
		s.holder = nil
		if s.count > 0 {
			m.unheld[k] = struct{}{}
		} else {
			delete(m.slots, k)
		}
	}
}

// diff takes in the entries of want that are not the very ones of the
// last call (reconciler.MovedGroups); the parts holding them are marked
// affected.
func (m *partMemo) diff(want []reconciler.EndpointGroup) bool {
	// Only the runs that moved: most are the very arrays of the last call.
	moved, ok := reconciler.MovedGroups(m.want, want)
	if !ok {
		return false
	}
	m.moved = m.moved[:0]
	var touched []slotKey
	for _, sp := range moved {
		gi := m.gis[sp.Index]
		for j := range sp.Old {
			k := slotKey{gi, firstAddress(&sp.Old[j])}
			s := m.slots[k]
			if s == nil || s.count == 0 {
				return false
			}
			s.count--
			touched = append(touched, k)
		}
		for j := range sp.New {
			k := slotKey{gi, firstAddress(&sp.New[j])}
			s := m.slots[k]
			if s == nil {
				s = &memoSlot{}
				m.slots[k] = s
			}
			s.count++
			s.endpoint = sp.New[j]
			touched = append(touched, k)
			m.moved = append(m.moved, k)
		}
	}
	return m.settleSlots(touched)
}

// settleSlots updates the unheld slots after the touched ones, and marks
// their holders affected; false when one is wanted twice.
func (m *partMemo) settleSlots(touched []slotKey) bool {
	for _, k := range touched {
		s := m.slots[k]
		if s == nil {
			continue // dropped already
		}
		if s.count > 1 {
			return false
		}
		if s.holder != nil {
			s.holder.affected = true
		}
		switch {
		case s.count > 0 && s.holder == nil:
			m.unheld[k] = struct{}{}
		case s.count == 0:
			s.endpoint = discoveryv1.Endpoint{}
			delete(m.unheld, k)
			if s.holder == nil {
				delete(m.slots, k)
			}
		}
	}
	return true
}

// incremental plans from the memo: the parts kept clean and holding
// nothing that moved are kept as they were, unread; the others are
// planned as planParts plans them (replanned), over the slots they hold;
// the moved endpoints no part holds are placed as planParts places them.
// false when a wanted endpoint would be left to place that did not move
// (its place in want's order is not known: planned in full).
func (m *partMemo) incremental(cluster clusterset.ClusterID, key types.NamespacedName, namespace string, want []reconciler.EndpointGroup, max int) (pp *partPlanner, replanned []*memoPart, ok bool) {
	pp = newPartPlanner(cluster, key, namespace, nil, max)
	pp.taken = m.idSet
	for i := range want {
		if i > 0 && m.keys[i] == m.keys[i-1] {
			continue // a group's runs: its key looked up once, not 500 times
		}
		if _, ok := pp.group[m.keys[i]]; !ok {
			pp.group[m.keys[i]] = len(pp.groups)
			pp.groups = append(pp.groups, &want[i])
		}
	}
	held, ok := m.slotsToPlan(pp)
	if !ok {
		return nil, nil, false
	}
	m.sizeKept(pp)
	for _, mp := range m.order {
		if m.keptAsItWas(mp) {
			pp.addKept(mp.gi, mp.next)
			continue
		}
		mp.next = pp.keepIn(mp.obj, mp.gi)
		replanned = append(replanned, mp)
	}
	for i := range held {
		if !pp.slots[i].placed {
			return nil, nil, false
		}
	}
	pp.placeLeft()
	return pp, replanned, true
}

// sizeKept gives pp's kept parts of each group room for all the parts of
// the group, which most plans keep: not grown append by append.
func (m *partMemo) sizeKept(pp *partPlanner) {
	perGroup := make([]int, len(pp.groups))
	for _, mp := range m.order {
		if mp.gi >= 0 {
			perGroup[mp.gi]++
		}
	}
	pp.kept = make([][]*v1alpha1.PublishedExport, len(pp.groups))
	for gi, n := range perGroup {
		pp.kept[gi] = make([]*v1alpha1.PublishedExport, 0, n)
	}
}

// keptAsItWas reports whether the last plan kept mp as it is and nothing
// it holds moved since.
func (m *partMemo) keptAsItWas(mp *memoPart) bool {
	return mp.clean && !mp.affected && mp.next != nil
}

// slotsToPlan gives pp the slots it plans: first those that the parts to
// read again hold (held of them), then the moved ones no part holds, in
// want's order; false when some slot no part holds did not move.
func (m *partMemo) slotsToPlan(pp *partPlanner) (held int, ok bool) {
	add := func(k slotKey) {
		if _, ok := pp.slot[k]; ok {
			return
		}
		if s := m.slots[k]; s != nil && s.count > 0 {
			pp.slot[k] = len(pp.slots)
			pp.slots = append(pp.slots, slot{endpoint: &s.endpoint, group: k.group})
		}
	}
	n := len(m.moved)
	for _, mp := range m.order {
		if !m.keptAsItWas(mp) {
			n += len(mp.addresses)
		}
	}
	pp.slot, pp.slots = make(map[slotKey]int, n), make([]slot, 0, n)
	for _, mp := range m.order {
		if !m.keptAsItWas(mp) {
			for _, a := range mp.addresses {
				add(slotKey{mp.gi, a})
			}
		}
	}
	held = len(pp.slots)
	for _, k := range m.moved {
		if _, ok := m.unheld[k]; ok {
			add(k)
		}
	}
	return held, len(pp.slots)-held == len(m.unheld)
}

// settle records which parts a plan made in full keeps as they are.
func (m *partMemo) settle(pp *partPlanner) {
	for _, mp := range m.parts {
		mp.clean, mp.affected, mp.next = false, false, nil
	}
	for _, parts := range pp.kept {
		for _, next := range parts {
			if !pp.updating[next] {
				mp := m.parts[next.Name]
				mp.clean, mp.next = true, next
			}
		}
	}
}

// settleReplanned is settle after an incremental plan: only the parts it
// planned anew, and those kept as they were that it updates (endpoints
// placed into them), may have changed.
func (m *partMemo) settleReplanned(pp *partPlanner, replanned []*memoPart) {
	for _, mp := range replanned {
		mp.clean, mp.affected = mp.next != nil && !pp.updating[mp.next], false
	}
	for _, part := range pp.plan.update {
		if mp := m.parts[part.Name]; mp != nil {
			mp.clean = false
		}
	}
}

// rebuild makes the memo anew from a plan made in full by pp.
func (m *partMemo) rebuild(pp *partPlanner, want []reconciler.EndpointGroup, existing []*v1alpha1.PublishedExport, max int) {
	*m = partMemo{max: max, want: want, keys: make([]string, len(want)), gis: make([]int, len(want)),
		group: pp.group, slots: make(map[slotKey]*memoSlot, len(pp.slots)), unheld: map[slotKey]struct{}{},
		parts: make(map[string]*memoPart, len(existing)), byArray: make(map[*v1alpha1.EndpointGroup]*memoPart, len(existing)),
		fromMemo: m.fromMemo}
	if pp.duplicates {
		return
	}
	for i := range want {
		if i > 0 && want[i].AddressType == want[i-1].AddressType && samePorts(want[i].Ports, want[i-1].Ports) {
			m.keys[i] = m.keys[i-1] // a group's runs share its ports: one key, one string
		} else {
			m.keys[i] = groupKey((*v1alpha1.EndpointGroup)(&want[i]))
		}
		m.gis[i] = pp.group[m.keys[i]]
	}
	for k, i := range pp.slot {
		m.slots[k] = &memoSlot{endpoint: *pp.slots[i].endpoint, count: 1}
		m.unheld[k] = struct{}{}
	}
	for _, p := range existing {
		mp := m.read(p)
		m.parts[p.Name] = mp
		m.track(mp)
		if !m.register(mp) {
			return
		}
	}
	m.reorder()
	m.settle(pp)
	m.valid = true
}
