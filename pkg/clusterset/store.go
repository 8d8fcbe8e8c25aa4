package clusterset

import (
	"cmp"
	"context"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
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
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{byKey: map[types.NamespacedName]map[ClusterID]*ExportedService{}, synced: map[ClusterID]bool{}}
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

// MarkSynced records that every export of cluster is in the Store, and
// announces every key, so that decisions deferred until then are taken.
func (s *Store) MarkSynced(cluster ClusterID) {
	s.mu.Lock()
	already := s.synced[cluster]
	s.synced[cluster] = true
	s.mu.Unlock()
	if already {
		return
	}
	for _, key := range s.Keys() {
		s.notify(key)
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

func compareKeys(a, b types.NamespacedName) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// Subscribe returns a channel that receives a GenericEvent for every key
// that changes from now on, until ctx ends (then it is closed). The event's
// object carries only the key's namespace and name, so that
// source.Channel(ch, &handler.EnqueueRequestForObject{}) turns it into a
// reconcile request of that key. Keys that change again before they are
// received are delivered once; a slow subscriber never blocks the Store.
func (s *Store) Subscribe(ctx context.Context) <-chan event.GenericEvent {
	sub := &subscription{wake: make(chan struct{}, 1), pending: map[types.NamespacedName]bool{}}
	out := make(chan event.GenericEvent)
	s.mu.Lock()
	s.subs = append(s.subs, sub)
	s.mu.Unlock()
	go func() {
		defer close(out)
		defer s.unsubscribe(sub)
		for {
			key, ok := sub.next()
			if !ok {
				select {
				case <-ctx.Done():
					return
				case <-sub.wake:
					continue
				}
			}
			obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
			select {
			case out <- event.GenericEvent{Object: obj}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

func (s *Store) unsubscribe(sub *subscription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.subs = slices.DeleteFunc(s.subs, func(x *subscription) bool { return x == sub })
}

func (s *Store) notify(key types.NamespacedName) {
	s.mu.RLock()
	subs := slices.Clone(s.subs)
	s.mu.RUnlock()
	for _, sub := range subs {
		sub.add(key)
	}
}

// subscription is one subscriber's set of keys not yet delivered, in
// arrival order.
type subscription struct {
	mu      sync.Mutex
	pending map[types.NamespacedName]bool
	order   []types.NamespacedName
	wake    chan struct{}
}

func (s *subscription) add(key types.NamespacedName) {
	s.mu.Lock()
	if !s.pending[key] {
		s.pending[key] = true
		s.order = append(s.order, key)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscription) next() (types.NamespacedName, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.order) == 0 {
		return types.NamespacedName{}, false
	}
	key := s.order[0]
	s.order = s.order[1:]
	delete(s.pending, key)
	return key, true
}
