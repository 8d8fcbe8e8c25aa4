package clusterset

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Store holds the exports of every member cluster, keyed by namespace/name,
// one ExportedService per cluster. It is safe for concurrent use. Every
// change of a key is announced to the subscribers; a put that changes
// nothing announces nothing.
type Store struct {
	mu    sync.RWMutex
	byKey map[types.NamespacedName]map[ClusterID]*ExportedService
	subs  []*subscription
	// synced holds the clusters whose exports are all in the Store (their
	// export watcher's first pass is done). Until then the Store's view of
	// a cluster is partial, and nothing may be withdrawn on its account.
	synced map[ClusterID]bool
	// blocked[key][consumer] says why the import of key cannot be written
	// into consumer (an object there that mcs-syncer does not own), so that
	// the export side can tell the exporters where they look.
	blocked map[types.NamespacedName]map[ClusterID]string
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{
		byKey:   map[types.NamespacedName]map[ClusterID]*ExportedService{},
		synced:  map[ClusterID]bool{},
		blocked: map[types.NamespacedName]map[ClusterID]string{},
	}
}

// SetImportBlocked records why the import of key cannot be written into
// consumer; an empty why clears it. A change is announced like a change of
// the exports.
func (s *Store) SetImportBlocked(key types.NamespacedName, consumer ClusterID, why string) {
	s.mu.Lock()
	if s.blocked[key][consumer] == why {
		s.mu.Unlock()
		return
	}
	if why == "" {
		delete(s.blocked[key], consumer)
		if len(s.blocked[key]) == 0 {
			delete(s.blocked, key)
		}
	} else {
		if s.blocked[key] == nil {
			s.blocked[key] = map[ClusterID]string{}
		}
		s.blocked[key][consumer] = why
	}
	s.mu.Unlock()
	s.notify(key)
}

// ImportBlocked returns, by consumer, why the import of key cannot be
// written there (nil when nothing blocks it).
func (s *Store) ImportBlocked(key types.NamespacedName) map[ClusterID]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return maps.Clone(s.blocked[key])
}

// Put stores an export, replacing the same cluster's export of the same
// key. It reports whether anything changed.
func (s *Store) Put(es *ExportedService) bool {
	s.mu.Lock()
	byCluster := s.byKey[es.Key]
	if old, ok := byCluster[es.Cluster]; ok && old.Equal(es) {
		s.mu.Unlock()
		return false
	}
	if byCluster == nil {
		byCluster = map[ClusterID]*ExportedService{}
		s.byKey[es.Key] = byCluster
	}
	byCluster[es.Cluster] = es
	s.mu.Unlock()
	s.notify(es.Key)
	return true
}

// Delete withdraws one cluster's export of key. It reports whether there
// was one.
func (s *Store) Delete(cluster ClusterID, key types.NamespacedName) bool {
	s.mu.Lock()
	_, ok := s.byKey[key][cluster]
	if ok {
		delete(s.byKey[key], cluster)
		if len(s.byKey[key]) == 0 {
			delete(s.byKey, key)
		}
	}
	s.mu.Unlock()
	if ok {
		s.notify(key)
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
			delete(byCluster, cluster)
			if len(byCluster) == 0 {
				delete(s.byKey, key)
			}
			keys = append(keys, key)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(keys, compareKeys)
	for _, key := range keys {
		s.notify(key)
	}
	return keys
}

// Get returns the exports of key, ordered by cluster ID.
func (s *Store) Get(key types.NamespacedName) []*ExportedService {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*ExportedService, 0, len(s.byKey[key]))
	for _, es := range s.byKey[key] {
		out = append(out, es)
	}
	slices.SortFunc(out, func(a, b *ExportedService) int { return cmp.Compare(a.Cluster, b.Cluster) })
	return out
}

// Keys returns every key with at least one export, sorted.
func (s *Store) Keys() []types.NamespacedName {
	s.mu.RLock()
	keys := make([]types.NamespacedName, 0, len(s.byKey))
	for key := range s.byKey {
		keys = append(keys, key)
	}
	s.mu.RUnlock()
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
			delete(byCluster, cluster)
			if len(byCluster) == 0 {
				delete(s.byKey, key)
			}
			gone = append(gone, key)
		}
	}
	already := s.synced[cluster]
	s.synced[cluster] = true
	s.mu.Unlock()
	for _, key := range gone {
		s.notify(key)
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
	var unblocked []types.NamespacedName
	for key, byConsumer := range s.blocked {
		if _, ok := byConsumer[cluster]; ok {
			unblocked = append(unblocked, key)
		}
	}
	s.mu.Unlock()
	for _, key := range unblocked {
		s.SetImportBlocked(key, cluster, "")
	}
}

// Synced reports whether every export of cluster is in the Store.
func (s *Store) Synced(cluster ClusterID) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.synced[cluster]
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

// Subscribe calls notify with every key that changes from now on, until
// ctx ends. notify runs on the goroutine that made the change, so it must
// not block: adding the key to a workqueue, which also merges repeated
// keys, is what it is for.
func (s *Store) Subscribe(ctx context.Context, notify func(types.NamespacedName)) {
	sub := &subscription{notify: notify}
	s.mu.Lock()
	s.subs = append(s.subs, sub)
	s.mu.Unlock()
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.subs = slices.DeleteFunc(s.subs, func(x *subscription) bool { return x == sub })
	})
}

// subscription is one subscriber (a pointer, so that it can be told apart
// from another with the same function).
type subscription struct {
	notify func(types.NamespacedName)
}

func (s *Store) notify(key types.NamespacedName) {
	s.mu.RLock()
	subs := slices.Clone(s.subs)
	s.mu.RUnlock()
	for _, sub := range subs {
		sub.notify(key)
	}
}

// AnnounceAll announces every key, so that every subscriber looks at every
// export again: what a member's connection or membership change calls.
func (s *Store) AnnounceAll() {
	for _, key := range s.Keys() {
		s.notify(key)
	}
}
