package publish

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
)

// ownParts are the member's parts of each export as the publication
// server's cache holds them: the cache's own objects, noted by the
// publisher's event handler (partEvents). Issue 56: listing them from the
// cache, even without deep copies, copied each part's struct into the
// list (500 parts at 50,000 endpoints: 290 KB and a third of a change's
// work), and the cache is namespaced, so its informer has no indexer to
// read instead.
type ownParts struct {
	cluster  string
	mu       sync.RWMutex
	byExport map[types.NamespacedName]map[string]*v1alpha1.PublishedExport
}

func newOwnParts(cluster string) *ownParts {
	return &ownParts{cluster: cluster, byExport: map[types.NamespacedName]map[string]*v1alpha1.PublishedExport{}}
}

// of returns the parts of key's export, in no order (as a List gives
// them). Nothing may write to them: they are the cache's.
func (o *ownParts) of(key types.NamespacedName) []*v1alpha1.PublishedExport {
	o.mu.RLock()
	defer o.mu.RUnlock()
	held := o.byExport[key]
	parts := make([]*v1alpha1.PublishedExport, 0, len(held))
	for _, part := range held {
		parts = append(parts, part)
	}
	return parts
}

// note replaces old by now (either may be nil: a part come or gone), in
// one step: a reader never sees a part updated missing for a moment.
// Publications other than the member's parts are left out.
func (o *ownParts) note(old, now *v1alpha1.PublishedExport) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if key, ok := o.keyOf(old); ok {
		delete(o.byExport[key], old.Name)
		if len(o.byExport[key]) == 0 {
			delete(o.byExport, key)
		}
	}
	if key, ok := o.keyOf(now); ok {
		if o.byExport[key] == nil {
			o.byExport[key] = map[string]*v1alpha1.PublishedExport{}
		}
		o.byExport[key][now.Name] = now
	}
}

// keyOf is the export that pub is a part of, if pub is one of the
// member's parts.
func (o *ownParts) keyOf(pub *v1alpha1.PublishedExport) (types.NamespacedName, bool) {
	if pub == nil || !IsPart(pub) || pub.Spec.Cluster != o.cluster {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: pub.Spec.Namespace, Name: pub.Spec.Name}, true
}

// partEvents is the publisher's handler of the publications it watches:
// it notes each part in parts before it enqueues what enqueue names, so a
// reconcile caused by an event never reads a view older than that event
// (a handler of its own beside the controller's could run after it). The
// controller's source (source.Kind) waits until this handler has had
// every object of the initial list: the publisher never plans over a
// view of half its parts.
type partEvents struct {
	parts   *ownParts
	enqueue func(*v1alpha1.PublishedExport) []reconcile.Request
}

type requestQueue = workqueue.TypedRateLimitingInterface[reconcile.Request]

func (h partEvents) Create(_ context.Context, e event.TypedCreateEvent[*v1alpha1.PublishedExport], q requestQueue) {
	h.parts.note(nil, e.Object)
	h.add(e.Object, q)
}

func (h partEvents) Update(_ context.Context, e event.TypedUpdateEvent[*v1alpha1.PublishedExport], q requestQueue) {
	// Old and new are told apart by what they say (a part edited by hand
	// into another export's, or another member's, leaves this one's).
	h.parts.note(e.ObjectOld, e.ObjectNew)
	h.add(e.ObjectOld, q)
	h.add(e.ObjectNew, q)
}

func (h partEvents) Delete(_ context.Context, e event.TypedDeleteEvent[*v1alpha1.PublishedExport], q requestQueue) {
	h.parts.note(e.Object, nil)
	h.add(e.Object, q)
}

func (h partEvents) Generic(_ context.Context, e event.TypedGenericEvent[*v1alpha1.PublishedExport], q requestQueue) {
	h.add(e.Object, q)
}

func (h partEvents) add(pub *v1alpha1.PublishedExport, q requestQueue) {
	for _, req := range h.enqueue(pub) {
		q.Add(req)
	}
}
