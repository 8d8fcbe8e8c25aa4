package clusterset

import (
	"cmp"
	"context"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Store holds the exports of every member cluster, keyed by namespace/name,
// one ExportedService per cluster. It is safe for concurrent use. Every
// change of a key is announced to the subscribers; a put that changes
// nothing announces nothing.
type Store struct {
	mu    sync.RWMutex
	byKey map[types.NamespacedName]map[ClusterID]*ExportedService
	// sorted holds byKey's exports of each key ordered by cluster ID, kept
	// in step with byKey (putLocked, removeLocked): an import of 1,000
	// sources sorted them on every read, per reconcile.
	sorted map[types.NamespacedName][]*ExportedService
	subs   []*subscription
	// synced holds the clusters whose exports are all in the Store (their
	// export watcher's first pass is done). Until then the Store's view of
	// a cluster is partial, and nothing may be withdrawn on its account.
	synced map[ClusterID]bool
	// known holds the clusters that have been synced at least once (and
	// not removed since): while such a cluster is read anew, the Store
	// holds its last complete view, which is not partial in the sense of
	// synced: an export it lacks is one the cluster did not export then.
	known map[ClusterID]bool
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{
		byKey:  map[types.NamespacedName]map[ClusterID]*ExportedService{},
		sorted: map[types.NamespacedName][]*ExportedService{},
		synced: map[ClusterID]bool{},
		known:  map[ClusterID]bool{},
	}
}

// Put stores an export, replacing the same cluster's export of the same
// key. It reports whether anything changed. es is the Store's from then
// on: never modified (a change is a new ExportedService), so that readers
// may know an export unchanged by its pointer (internal/imports's settled).
// The export keeps the earliest FirstSeen of those it replaces (a copy of
// es carries it then).
func (s *Store) Put(es *ExportedService) bool {
	s.mu.Lock()
	byCluster := s.byKey[es.Key]
	old, ok := byCluster[es.Cluster]
	if ok && earlier(old.FirstSeen, es.FirstSeen) {
		kept := *es
		kept.FirstSeen = old.FirstSeen
		es = &kept
	}
	if ok && old.Equal(es) {
		s.mu.Unlock()
		return false
	}
	s.putLocked(es)
	s.mu.Unlock()
	s.notify(es.Key, es.Cluster)
	return true
}

// SawFirst records that cluster's export of key was first seen published
// at t (its head's creationTimestamp, as the publication server set it):
// the export's FirstSeen becomes t unless it is earlier already. It
// reports whether anything changed; an export the Store does not hold is
// left alone. The publisher calls it for its own member's exports, so that
// the member orders its exports as its readers do.
func (s *Store) SawFirst(cluster ClusterID, key types.NamespacedName, t metav1.Time) bool {
	s.mu.Lock()
	old, ok := s.byKey[key][cluster]
	if !ok || !earlier(t, old.FirstSeen) {
		s.mu.Unlock()
		return false
	}
	seen := *old
	seen.FirstSeen = t
	s.putLocked(&seen)
	s.mu.Unlock()
	s.notify(key, cluster)
	return true
}

// earlier reports whether a is set and earlier than b (or b unset).
func earlier(a, b metav1.Time) bool {
	return !a.IsZero() && (b.IsZero() || a.Before(&b))
}

// Delete withdraws one cluster's export of key. It reports whether there
// was one.
func (s *Store) Delete(cluster ClusterID, key types.NamespacedName) bool {
	s.mu.Lock()
	_, ok := s.byKey[key][cluster]
	if ok {
		s.removeLocked(key, cluster)
	}
	s.mu.Unlock()
	if ok {
		s.notify(key, cluster)
	}
	return ok
}

// WithdrawCluster withdraws every export of one cluster (a member that
// left or is unreachable) and returns the keys concerned.
func (s *Store) WithdrawCluster(cluster ClusterID) []types.NamespacedName {
	s.mu.Lock()
	var keys []types.NamespacedName
	for key, byCluster := range s.byKey {
		if _, ok := byCluster[cluster]; ok {
			s.removeLocked(key, cluster)
			keys = append(keys, key)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(keys, compareKeys)
	for _, key := range keys {
		s.notify(key, cluster)
	}
	return keys
}

// Get returns the exports of key, ordered by cluster ID.
func (s *Store) Get(key types.NamespacedName) []*ExportedService {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.getLocked(key)
}

// ExportsOf returns the exports of key (as Get), those of ids whose
// exports are not all in the Store (as NotSynced), and of those the ones
// never synced at all (whose absence from key says nothing; the others'
// last complete view is in the Store), a subsequence of notSynced in the
// same order, in one read. Read apart, a
// member's first pass could end between the reads: its export missing
// from the first, the member synced in the second, and the export would
// look withdrawn (an importer's restart at 255 members deleted slices and
// created them again 0.1 s later).
func (s *Store) ExportsOf(key types.NamespacedName, ids []ClusterID) (exports []*ExportedService, notSynced, neverSynced []ClusterID) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	notSynced = s.notSyncedLocked(ids)
	for _, id := range notSynced {
		if !s.known[id] {
			neverSynced = append(neverSynced, id)
		}
	}
	return s.getLocked(key), notSynced, neverSynced
}

// getLocked returns the exports of key ordered by cluster ID, in a slice
// of the caller's (never nil); s.mu must be held.
func (s *Store) getLocked(key types.NamespacedName) []*ExportedService {
	return append(make([]*ExportedService, 0, len(s.sorted[key])), s.sorted[key]...)
}

// putLocked stores es in byKey and sorted; s.mu must be held for writing.
func (s *Store) putLocked(es *ExportedService) {
	byCluster := s.byKey[es.Key]
	if byCluster == nil {
		byCluster = map[ClusterID]*ExportedService{}
		s.byKey[es.Key] = byCluster
	}
	byCluster[es.Cluster] = es
	sorted := s.sorted[es.Key]
	if i, found := slices.BinarySearchFunc(sorted, es.Cluster, byClusterID); found {
		sorted[i] = es
	} else {
		s.sorted[es.Key] = slices.Insert(sorted, i, es)
	}
}

// removeLocked removes cluster's export of key from byKey and sorted;
// s.mu must be held for writing.
func (s *Store) removeLocked(key types.NamespacedName, cluster ClusterID) {
	delete(s.byKey[key], cluster)
	if len(s.byKey[key]) == 0 {
		delete(s.byKey, key)
		delete(s.sorted, key)
		return
	}
	if i, found := slices.BinarySearchFunc(s.sorted[key], cluster, byClusterID); found {
		s.sorted[key] = slices.Delete(s.sorted[key], i, i+1)
	}
}

func byClusterID(es *ExportedService, id ClusterID) int { return cmp.Compare(es.Cluster, id) }

// GetFrom returns cluster's export of key, or nil.
func (s *Store) GetFrom(key types.NamespacedName, cluster ClusterID) *ExportedService {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byKey[key][cluster]
}

// Keys returns every key with at least one export, sorted.
func (s *Store) Keys() []types.NamespacedName {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.keysLocked()
}

// keysLocked returns every key, sorted; s.mu must be held.
func (s *Store) keysLocked() []types.NamespacedName {
	keys := make([]types.NamespacedName, 0, len(s.byKey))
	for key := range s.byKey {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, compareKeys)
	return keys
}

// BeginResync marks a cluster's exports as partially known again: its
// connection was rebuilt and its export watcher starts a new first pass.
// The exports already stored stay until MarkSynced says which are gone.
func (s *Store) BeginResync(cluster ClusterID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.synced[cluster] = false
}

// MarkSynced records that every export of cluster is in the Store: those
// of the keys in current, the keys its first pass found. The cluster's
// other exports (withdrawn while it was out of reach) are withdrawn now.
// Every key is announced, so that decisions deferred until then are taken.
func (s *Store) MarkSynced(cluster ClusterID, current map[types.NamespacedName]bool) {
	var gone []types.NamespacedName
	s.mu.Lock()
	for key, byCluster := range s.byKey {
		if _, ok := byCluster[cluster]; ok && !current[key] {
			s.removeLocked(key, cluster)
			gone = append(gone, key)
		}
	}
	already := s.synced[cluster]
	s.synced[cluster], s.known[cluster] = true, true
	s.mu.Unlock()
	for _, key := range gone {
		s.notify(key, cluster)
	}
	if !already {
		s.AnnounceAll()
	}
}

// RemoveCluster forgets a cluster that left the clusterset: its exports
// are withdrawn (and announced) and it is no longer synced.
func (s *Store) RemoveCluster(cluster ClusterID) {
	s.WithdrawCluster(cluster)
	s.mu.Lock()
	delete(s.synced, cluster)
	delete(s.known, cluster)
	s.mu.Unlock()
}

// Synced reports whether every export of cluster is in the Store.
func (s *Store) Synced(cluster ClusterID) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.synced[cluster]
}

// NotSynced returns those of ids whose exports are not all in the Store,
// in their order: one lock for a clusterset's members, where Synced per
// member took a thousand (make bench-scale, 1,000 members).
func (s *Store) NotSynced(ids []ClusterID) []ClusterID {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.notSyncedLocked(ids)
}

func (s *Store) notSyncedLocked(ids []ClusterID) []ClusterID {
	var out []ClusterID
	for _, id := range ids {
		if !s.synced[id] {
			out = append(out, id)
		}
	}
	return out
}

// Count returns the number of keys a cluster exports.
func (s *Store) Count(cluster ClusterID) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, byCluster := range s.byKey {
		if _, ok := byCluster[cluster]; ok {
			n++
		}
	}
	return n
}

// Counts returns the number of keys each cluster exports.
func (s *Store) Counts() map[ClusterID]int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	counts := map[ClusterID]int{}
	for _, byCluster := range s.byKey {
		for id := range byCluster {
			counts[id]++
		}
	}
	return counts
}

func compareKeys(a, b types.NamespacedName) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// Subscriber hears of the Store's changes. Its functions run on the
// goroutine that made the change, so they must not block: adding a key to
// a workqueue, which also merges repeated keys, is what they are for.
type Subscriber struct {
	// Changed is called with every key in the Store when the subscription
	// starts, and with every key that changes from then on. A subscriber
	// that starts late (a consumer whose cache synced after the other
	// members' first passes were announced, or a controller started anew
	// when its member returned) thus misses no key.
	Changed func(types.NamespacedName)
	// Everything, if set, is called when every key must be looked at
	// again (AnnounceAll: a member's first pass is done, a member's
	// connection or the membership changed), before Changed is called with
	// every key in the Store. It is for what the Store no longer holds: an
	// import whose every export is gone while its exporter was out of
	// reach is the subscriber's to find.
	Everything func()
	// Wants, if set, says which changes Changed hears of: those of
	// cluster's export of key (a Feedback asks with cluster "": its notes
	// are about the key). Every key still comes with the subscription
	// and with AnnounceAll. Through a hub of 1,000 members, a member's
	// publisher and export watcher heard of every change of every member
	// (a queue of 100 keys forever busy, 180,000 reconciles in 8 minutes).
	Wants func(key types.NamespacedName, cluster ClusterID) bool
}

// Subscribe registers sub until ctx ends, and calls sub.Changed with every
// key in the Store now.
func (s *Store) Subscribe(ctx context.Context, sub Subscriber) {
	entry := &subscription{Subscriber: sub}
	s.mu.Lock()
	s.subs = append(s.subs, entry)
	// Taken with the registration under one lock: a key changed before is
	// in this list, one changed after is announced to the new subscriber
	// (some keys may be both; a workqueue merges them).
	keys := s.keysLocked()
	s.mu.Unlock()
	unsubscribeWhenDone(ctx, &s.mu, &s.subs, entry)
	for _, key := range keys {
		sub.Changed(key)
	}
}

// subscription is one subscriber (a pointer, so that it can be told apart
// from another with the same functions).
type subscription struct {
	Subscriber
}

// tell calls Changed with key if the subscriber wants cluster's change of
// it ("" for a Feedback's note).
func (s *subscription) tell(key types.NamespacedName, cluster ClusterID) {
	if s.Wants == nil || s.Wants(key, cluster) {
		s.Changed(key)
	}
}

// unsubscribeWhenDone removes entry from *subs, under mu, once ctx ends:
// the Store's and the Feedback's subscriptions end alike.
func unsubscribeWhenDone(ctx context.Context, mu *sync.RWMutex, subs *[]*subscription, entry *subscription) {
	context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		*subs = slices.DeleteFunc(*subs, func(x *subscription) bool { return x == entry })
	})
}

func (s *Store) subscribers() []*subscription {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.subs)
}

// notify announces a change of cluster's export of key.
func (s *Store) notify(key types.NamespacedName, cluster ClusterID) {
	for _, sub := range s.subscribers() {
		sub.tell(key, cluster)
	}
}

// AnnounceAll tells every subscriber to look at everything again (see
// Subscriber.Everything) and announces every key: what a member's first
// pass, connection or membership change calls.
func (s *Store) AnnounceAll() {
	subs := s.subscribers()
	for _, sub := range subs {
		if sub.Everything != nil {
			sub.Everything()
		}
	}
	for _, key := range s.Keys() {
		for _, sub := range subs {
			sub.Changed(key)
		}
	}
}
