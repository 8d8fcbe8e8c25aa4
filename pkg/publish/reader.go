package publish

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mcs-syncer/mcs-syncer/pkg/clusterset"
)

// refused counts the publications a reader refused, by source cluster.
var refused = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "mcs_syncer_publications_refused_total",
	Help: "Publications of another member that were refused because a field is invalid; their export is withdrawn until a valid one replaces it (the log says what was wrong).",
}, []string{"source"})

// RegisterMetrics registers the package's metrics.
func RegisterMetrics(reg prometheus.Registerer) error { return reg.Register(refused) }

// Reader puts one member's publications into the Store, read from a
// publication server through a cache set up with ConfigureCache for that
// member.
type Reader struct {
	cluster clusterset.ClusterID
	store   *clusterset.Store
	cache   cache.Cache

	mu sync.Mutex
	// keys are the member's exports the reader put into the Store.
	keys map[types.NamespacedName]bool
	// listed says the informer's first list went through the handler;
	// marked that the Store was told the member is synced.
	markerSeen, listed, marked bool
}

// NewReader returns the Reader of member's publications in cl, registers
// its informer, and marks the member's exports in the Store as being read
// anew until the member's marker and the first list are in.
func NewReader(cl cluster.Cluster, member clusterset.ClusterID, store *clusterset.Store) (*Reader, error) {
	r := &Reader{cluster: member, store: store, cache: cl.GetCache(), keys: map[types.NamespacedName]bool{}}
	if _, err := r.cache.GetInformer(context.Background(), &PublishedExport{}, cache.BlockUntilSynced(false)); err != nil {
		return nil, fmt.Errorf("informer of publications: %w", err)
	}
	store.BeginResync(member)
	return r, nil
}

// Start feeds the Store until ctx ends.
func (r *Reader) Start(ctx context.Context) error {
	inf, err := r.cache.GetInformer(ctx, &PublishedExport{})
	if err != nil {
		return err
	}
	logger := log.FromContext(ctx).WithValues("cluster", r.cluster)
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { r.put(logger, o) },
		UpdateFunc: func(_, o any) { r.put(logger, o) },
		DeleteFunc: func(o any) { r.remove(o) },
	})
	if err != nil {
		return err
	}
	defer func() { _ = inf.RemoveEventHandler(reg) }()
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return nil
	}
	r.mu.Lock()
	r.listed = true
	r.markSyncedLocked()
	r.mu.Unlock()
	<-ctx.Done()
	return nil
}

func (r *Reader) put(logger logr.Logger, o any) {
	pub, ok := o.(*PublishedExport)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if IsMarker(pub) {
		if pub.Spec.Cluster == string(r.cluster) {
			r.markerSeen = true
			r.markSyncedLocked()
		}
		return
	}
	key := types.NamespacedName{Namespace: pub.Spec.Namespace, Name: pub.Spec.Name}
	es, err := Decode(pub)
	if err == nil && es.Cluster != r.cluster {
		err = fmt.Errorf("published as %s, read from the publications of %s", es.Cluster, r.cluster)
	}
	if err != nil {
		refused.WithLabelValues(string(r.cluster)).Inc()
		logger.Error(err, "Publication refused; the export is withdrawn until a valid one replaces it", "publication", pub.Namespace+"/"+pub.Name)
		if r.keys[key] {
			delete(r.keys, key)
			r.store.Delete(r.cluster, key)
		}
		return
	}
	r.keys[key] = true
	r.store.Put(es)
}

func (r *Reader) remove(o any) {
	if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	pub, ok := o.(*PublishedExport)
	if !ok || IsMarker(pub) {
		return // a marker removed changes nothing: what was read stays complete
	}
	key := types.NamespacedName{Namespace: pub.Spec.Namespace, Name: pub.Spec.Name}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keys[key] {
		delete(r.keys, key)
		r.store.Delete(r.cluster, key)
	}
}

// markSyncedLocked tells the Store that the member is synced once both its
// marker and the first list are in; r.mu must be held.
func (r *Reader) markSyncedLocked() {
	if r.marked || !r.markerSeen || !r.listed {
		return
	}
	r.marked = true
	r.store.MarkSynced(r.cluster, maps.Clone(r.keys))
}
