package imports

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/plumbing"
)

// watches returns what triggers a reconcile of an import.
func (c *Controller) watches(memberCache, sliceCache cache.Cache, scheme *runtime.Scheme, mapper meta.RESTMapper) []source.TypedSource[reconcile.Request] {
	return []source.TypedSource[reconcile.Request]{
		// The ServiceImport itself: an edit or a deletion by a person is
		// repaired. Echoes of our own writes are not: a new import takes
		// three writes of its ServiceImport and one of its derived Service,
		// and none of them comes back as a reconcile.
		source.Kind(memberCache, &mcsv1beta1.ServiceImport{}, &handler.TypedEnqueueRequestForObject[*mcsv1beta1.ServiceImport]{}, notEcho[*mcsv1beta1.ServiceImport](c.own)),
		// Derived Services, by their controlling ServiceImport.
		source.Kind(memberCache, &corev1.Service{},
			handler.TypedEnqueueRequestForOwner[*corev1.Service](scheme, mapper, &mcsv1beta1.ServiceImport{}, handler.OnlyControllerOwner()),
			notEcho[*corev1.Service](c.own)),
		// Imported slices: changes by others are repaired; echoes of our own
		// writes are ignored; deletions complete the tracker's records.
		source.Kind(sliceCache, &discoveryv1.EndpointSlice{}, c.sliceHandler()),
		// A namespace that appears may now receive imports.
		source.Kind(memberCache, &corev1.Namespace{}, handler.TypedFuncs[*corev1.Namespace, reconcile.Request]{
			CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*corev1.Namespace], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				for _, key := range c.opts.Store.Keys() {
					if key.Namespace == e.Object.Name {
						q.Add(reconcile.Request{NamespacedName: key})
					}
				}
			},
		}),
		// The Store's keys when the controller starts and its changes; a
		// member's connection or membership change (announced through the
		// Store) changes what every import holds, those whose exports are
		// all gone included.
		c.storeSource(),
		// Nodes of a new zone, or the last of one gone: local-first
		// imports hint their local endpoints for other zones now.
		c.zonesSource(),
	}
}

// zonesSource enqueues every import when the zones of the consumer's nodes
// change (zones.go); those that do not put the local cluster first write
// nothing.
func (c *Controller) zonesSource() source.TypedSource[reconcile.Request] {
	return source.TypedFunc[reconcile.Request](func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-c.zonesChanged:
					for _, key := range c.opts.Store.Keys() {
						q.Add(reconcile.Request{NamespacedName: key})
					}
				}
			}
		}()
		return nil
	})
}

// storeSource enqueues the Store's keys (every one it holds when the
// controller starts, then those whose exports change) and, when the Store
// asks to look at everything again, every ServiceImport the controller
// manages: one whose exports are all gone is no longer a key of the Store.
//
// The controller does not hear the Feedback it writes: an import that
// failed says so there (SetImportBlocked), and when that notice came
// through the Store it requeued the key at once, past the controller's
// backoff (a refused slice write was tried 30-50 times a second).
func (c *Controller) storeSource() source.TypedSource[reconcile.Request] {
	return plumbing.StoreSource(c.opts.Store, nil, plumbing.EnqueueEvery(c.client, &mcsv1beta1.ServiceImportList{}, "ServiceImports", c.opts.Consumer,
		client.MatchingLabels{ManagedByLabel: c.opts.ManagedBy}))
}

// notEcho lets through every event but the create and update events that
// echo mcs-syncer's own last write of the object.
func notEcho[T client.Object](own *plumbing.OwnWrites) predicate.TypedPredicate[T] {
	return predicate.TypedFuncs[T]{
		CreateFunc: func(e event.TypedCreateEvent[T]) bool { return !own.IsEcho(e.Object) },
		UpdateFunc: func(e event.TypedUpdateEvent[T]) bool { return !own.IsEcho(e.ObjectNew) },
	}
}

func (c *Controller) sliceHandler() handler.TypedEventHandler[*discoveryv1.EndpointSlice, reconcile.Request] {
	enqueue := func(s *discoveryv1.EndpointSlice, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if name := s.Labels[mcsv1beta1.LabelServiceName]; name != "" {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: name}})
		}
	}
	return handler.TypedFuncs[*discoveryv1.EndpointSlice, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*discoveryv1.EndpointSlice], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if c.reconcilerFor(sourceOf(e.Object)).Tracker().ShouldSync(e.Object) {
				enqueue(e.Object, q)
			}
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*discoveryv1.EndpointSlice], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if c.reconcilerFor(sourceOf(e.ObjectNew)).Tracker().ShouldSync(e.ObjectNew) {
				enqueue(e.ObjectNew, q)
			}
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[*discoveryv1.EndpointSlice], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			c.reconcilerFor(sourceOf(e.Object)).Tracker().Observed(e.Object)
			enqueue(e.Object, q)
		},
	}
}
