package plumbing

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// NewController returns the unmanaged controller name of one member (an
// export watcher or an import controller): it lives as long as the
// member's connection, and a member that returns gets a new one under the
// same name.
func NewController(name string, r reconcile.Reconciler, workers int, logger logr.Logger) (controller.TypedController[reconcile.Request], error) {
	return NewControllerWithBackoff(name, r, workers, logger, 1000*time.Second)
}

// NewControllerWithBackoff is NewController whose failure backoff stops
// growing at maxDelay.
func NewControllerWithBackoff(name string, r reconcile.Reconciler, workers int, logger logr.Logger, maxDelay time.Duration) (controller.TypedController[reconcile.Request], error) {
	return controller.NewTypedUnmanaged(name, controller.TypedOptions[reconcile.Request]{
		Reconciler: r, MaxConcurrentReconciles: max(1, workers),
		SkipNameValidation: ptr.To(true), // the same name again when the member returns
		Logger:             logger,
		// client-go's workqueue, not controller-runtime v0.24's priority
		// queue: that one can deadlock at shutdown (kubernetes-sigs/
		// controller-runtime#3538, fixed in v0.25, which needs client-go
		// v0.37): a worker's Done waits forever on a lock held by a send
		// to a waiter that already left, and the member never stops.
		// Same failure backoff as the priority queue's.
		UsePriorityQueue: ptr.To(false),
		RateLimiter:      workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, maxDelay),
	})
}

// Subscribable is the part of the Store a controller's source needs.
type Subscribable interface {
	Subscribe(ctx context.Context, sub clusterset.Subscriber)
}

// StoreSource returns a controller source that enqueues every key the
// Store holds when the controller starts and every key it announces from
// then on (only those wants accepts, if set: see clusterset.Subscriber.Wants). everything,
// if set, is called on AnnounceAll (see clusterset.Subscriber.Everything) on a
// goroutine of its own, so that it may read a cache that is still syncing.
func StoreSource(store Subscribable, wants func(types.NamespacedName, clusterset.ClusterID) bool, everything func(context.Context, workqueue.TypedRateLimitingInterface[reconcile.Request])) source.TypedSource[reconcile.Request] {
	return source.TypedFunc[reconcile.Request](func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		sub := clusterset.Subscriber{Changed: func(key types.NamespacedName) { q.Add(reconcile.Request{NamespacedName: key}) }, Wants: wants}
		if everything != nil {
			sub.Everything = func() { go everything(ctx, q) }
		}
		store.Subscribe(ctx, sub)
		return nil
	})
}

// EnqueueEvery returns the everything of StoreSource that enqueues every
// object that reader lists into list (with opts): a ServiceExport of the
// member, a ServiceImport of the consumer. A list that fails is logged
// (what names the objects, cluster the member) unless the controller is
// stopping.
func EnqueueEvery(reader client.Reader, list client.ObjectList, what string, cluster clusterset.ClusterID, opts ...client.ListOption) func(context.Context, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	return func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		list := list.DeepCopyObject().(client.ObjectList) // each call lists into a list of its own
		if err := reader.List(ctx, list, opts...); err != nil {
			if ctx.Err() == nil {
				log.FromContext(ctx).Error(err, "Could not list the "+what+" to look at them again", "cluster", cluster)
			}
			return
		}
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			if obj, ok := o.(client.Object); ok {
				q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
			}
			return nil
		})
	}
}
