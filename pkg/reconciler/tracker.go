package reconciler

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ErrStaleCache is returned (wrapped) by Plan and Reconcile when the
// existing slices given are older than what this reconciler last wrote: the
// caller's informer cache has not caught up, so planning now would undo or
// repeat writes. Nothing is written; requeue the owner.
var ErrStaleCache = errors.New("endpointslice cache is stale")

// deletionExpected marks a slice this reconciler deleted.
const deletionExpected = -1

// Tracker remembers, per owner, the generation of every slice the reconciler
// wrote and the slices it deleted, to detect a stale informer cache. It is
// safe for concurrent use.
type Tracker struct {
	mu sync.Mutex
	// generations[owner UID][slice name] is the generation last written,
	// or deletionExpected.
	generations map[types.UID]map[string]int64
	// deletedFirst[owner UID] holds the slices (name and UID) whose
	// delete event came before the record of this reconciler's own write
	// of them: the write's response raced the watch. The record is then
	// dropped (it would wait for a slice that is gone, a stale cache
	// forever). Cleared at the end of the owner's next Apply, when no
	// write of them can still be under way.
	deletedFirst map[types.UID]map[string]bool
	// refused holds the owners whose last plan was refused as stale: the
	// next event of any of their slices asks for a sync, the echo of this
	// reconciler's own write included (it is what the plan waits for;
	// without this, the owner waited for the caller's fallback requeue).
	refused map[types.UID]bool
}

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker {
	return &Tracker{generations: map[types.UID]map[string]int64{}, deletedFirst: map[types.UID]map[string]bool{}, refused: map[types.UID]bool{}}
}

// ownerOf returns the UID of the slice's controller owner, or "".
func ownerOf(slice *discoveryv1.EndpointSlice) types.UID {
	if ref := metav1.GetControllerOfNoCopy(slice); ref != nil {
		return ref.UID
	}
	return ""
}

func (t *Tracker) set(owner types.UID, name string, generation int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.setLocked(owner, name, generation)
}

func (t *Tracker) setLocked(owner types.UID, name string, generation int64) {
	bySlice, ok := t.generations[owner]
	if !ok {
		bySlice = map[string]int64{}
		t.generations[owner] = bySlice
	}
	bySlice[name] = generation
}

// written records a slice returned by a create or update, unless its
// deletion has been observed already.
func (t *Tracker) written(owner types.UID, slice *discoveryv1.EndpointSlice) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if key := sliceKey(slice); t.deletedFirst[owner][key] {
		delete(t.deletedFirst[owner], key)
		return
	}
	t.setLocked(owner, slice.Name, slice.Generation)
}

// applied ends an Apply of the owner's: no write of a slice whose
// deletion came first can still be under way.
func (t *Tracker) applied(owner types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.deletedFirst, owner)
}

func sliceKey(slice *discoveryv1.EndpointSlice) string {
	return slice.Name + "/" + string(slice.UID)
}

// deleted records a slice this reconciler deleted.
func (t *Tracker) deleted(owner types.UID, slice *discoveryv1.EndpointSlice) {
	t.set(owner, slice.Name, deletionExpected)
}

// Stale returns an error wrapping ErrStaleCache if existing (the owner's
// slices as the caller's cache has them) is older than what was written: a
// slice with a lower generation than recorded, a slice whose deletion is
// expected, or a recorded slice that is missing. It changes nothing.
func (t *Tracker) Stale(owner types.UID, existing []*discoveryv1.EndpointSlice) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	err := t.staleLocked(owner, existing)
	if err != nil {
		t.refused[owner] = true
	} else {
		delete(t.refused, owner)
	}
	return err
}

// staleLocked is Stale; t.mu must be held.
func (t *Tracker) staleLocked(owner types.UID, existing []*discoveryv1.EndpointSlice) error {
	bySlice := t.generations[owner]
	if len(bySlice) == 0 {
		return nil
	}
	// Each name is listed once (names are unique in a namespace): when
	// as many of the written slices are listed as were written, all are.
	// No set of the listed names is built (500 of them for each change
	// of a Service of 50,000 endpoints).
	listedWritten := 0
	for _, s := range existing {
		g, ok := bySlice[s.Name]
		if !ok {
			continue
		}
		if g == deletionExpected {
			return fmt.Errorf("%w: EndpointSlice %s is still listed after its deletion", ErrStaleCache, s.Name)
		}
		if s.Generation < g {
			return fmt.Errorf("%w: EndpointSlice %s has generation %d, %d was written", ErrStaleCache, s.Name, s.Generation, g)
		}
		listedWritten++
	}
	written := 0
	for _, g := range bySlice {
		if g != deletionExpected {
			written++
		}
	}
	if listedWritten == written {
		return nil
	}
	for name, g := range bySlice {
		if g != deletionExpected && !slices.ContainsFunc(existing, func(s *discoveryv1.EndpointSlice) bool { return s.Name == name }) {
			return fmt.Errorf("%w: written EndpointSlice %s is not listed yet", ErrStaleCache, name)
		}
	}
	return nil
}

// completedDeletions returns the slices whose deletion is expected and that
// existing (a cache that is not stale) no longer lists: their records can
// go, usually through Observed; this catches the deletions whose watch
// event came before the record.
func (t *Tracker) completedDeletions(owner types.UID, existing []*discoveryv1.EndpointSlice) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var done []string
	for name, g := range t.generations[owner] {
		if g == deletionExpected && !slices.ContainsFunc(existing, func(s *discoveryv1.EndpointSlice) bool { return s.Name == name }) {
			done = append(done, name)
		}
	}
	return done
}

// forgetDeletions drops the records of completed deletions, unless a
// later write of the same name replaced them.
func (t *Tracker) forgetDeletions(owner types.UID, names []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, name := range names {
		if t.generations[owner][name] == deletionExpected {
			delete(t.generations[owner], name)
		}
	}
	if len(t.generations[owner]) == 0 {
		delete(t.generations, owner)
	}
}

// ShouldSync tells, for a slice seen in a watch event, whether the owner
// needs a reconcile: not if the event only echoes a write of this
// reconciler (generation not newer than recorded), unless the owner's last
// plan was refused as stale: the echo may be what it waited for.
func (t *Tracker) ShouldSync(slice *discoveryv1.EndpointSlice) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	owner := ownerOf(slice)
	if t.refused[owner] {
		return true
	}
	g, ok := t.generations[owner][slice.Name]
	return !ok || g == deletionExpected || slice.Generation > g
}

// Observed tells the tracker that the cache no longer holds a slice (a
// delete event): an expected deletion is then complete, and an unexpected
// one is forgotten so that the next reconcile recreates what is missing.
func (t *Tracker) Observed(deleted *discoveryv1.EndpointSlice) {
	t.mu.Lock()
	defer t.mu.Unlock()
	owner := ownerOf(deleted)
	if _, recorded := t.generations[owner][deleted.Name]; !recorded {
		if t.deletedFirst[owner] == nil {
			t.deletedFirst[owner] = map[string]bool{}
		}
		t.deletedFirst[owner][sliceKey(deleted)] = true
	}
	delete(t.generations[owner], deleted.Name)
	if len(t.generations[owner]) == 0 {
		delete(t.generations, owner)
	}
}

// ForgetOwner drops everything recorded for an owner.
func (t *Tracker) ForgetOwner(owner types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.generations, owner)
	delete(t.deletedFirst, owner)
	delete(t.refused, owner)
}
