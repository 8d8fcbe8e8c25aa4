package export

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/plumbing"
)

// ConfigureCache makes a member's cache hold only EndpointSlices without
// multicluster.kubernetes.io/service-name: imported slices are never read
// by the export side (loop prevention). And it keeps the endpoints of a
// slice, and the spec of a Service, only if the Service was exported when
// they arrived (thin.go): exported are the member's names, which its
// every cache adds to.
func ConfigureCache(o *cache.Options, exported *ExportedNames) {
	if o.ByObject == nil {
		o.ByObject = map[client.Object]cache.ByObject{}
	}
	o.ByObject[&mcsv1beta1.ServiceExport{}] = cache.ByObject{Transform: exported.noteExport}
	o.ByObject[&discoveryv1.EndpointSlice{}] = cache.ByObject{Label: labels.NewSelector().Add(notImported()), Transform: exported.thinSlice}
	o.ByObject[&corev1.Service{}] = cache.ByObject{Transform: exported.thinService}
}

// notImported selects the slices that are not imported ones.
func notImported() labels.Requirement {
	r, err := labels.NewRequirement(mcsv1beta1.LabelServiceName, selection.DoesNotExist, nil)
	if err != nil {
		panic(err) // a constant requirement; cannot fail
	}
	return *r
}

// sliceServiceIndex indexes the member's EndpointSlices by their
// kubernetes.io/service-name label.
const sliceServiceIndex = "mcs-syncer.endpointslice.service-name"

// Options configure a Watcher.
type Options struct {
	// Cluster is the member the watcher reads. Required.
	Cluster clusterset.ClusterID
	// Store receives the exports. Required.
	Store *clusterset.Store
	// Feedback tells what became of the exports in their readers (an
	// import blocked in a consumer, an export not published): the Ready
	// condition says so. Required with WriteStatus.
	Feedback *clusterset.Feedback
	// WriteStatus makes the watcher write ServiceExport status. Off when
	// another mcs-syncer (the member's own, in per-cluster mode) owns it.
	WriteStatus bool
	// Recorder, if set, records a Warning event on a ServiceExport when it
	// becomes invalid or conflicting (only with WriteStatus).
	Recorder events.EventRecorder
	// Membership tells who the members are, and whether each answers.
	// Required. The Conflict condition is written only once the Store holds
	// every member's exports, so that a restart never flips it on a partial
	// view. While a member that answers has not put all its exports into the
	// Store (its first pass takes seconds), a valid export's status is not
	// written at all, for up to firstPassWait: the Store announces every key
	// when the pass is done, and the status is then written once, Conflict
	// included, instead of twice. For a member that does not answer, or one
	// whose pass takes longer, Valid and Ready are written at once and
	// Conflict waits.
	Membership clusterset.Membership
	// Workers is the number of ServiceExports reconciled at once (default 1).
	Workers int
	// Namespaces say which namespaces may be exported: a ServiceExport
	// elsewhere is Valid=False (clusterset.ReasonRestrictedNamespace).
	Namespaces clusterset.NamespacePolicy
	// ExportedNames, if set, are the member's names that its cache was
	// configured with (ConfigureCache): New adds the ServiceExports the
	// API server holds before the cache lists anything.
	ExportedNames *ExportedNames
	// Metrics are the export side's metrics that the watcher keeps
	// (NewMetrics; nil: its own, registered nowhere).
	Metrics *Metrics
}

// Watcher is the export watcher of one member cluster.
type Watcher struct {
	cluster clusterset.ClusterID
	client  client.Client
	cache   cache.Cache
	// apiReader reads the slices the cache holds thinned; fetched keeps
	// what it read (thin.go).
	apiReader client.Reader
	fetched   *fetched
	// groupers build each export's endpoints from the slices that changed.
	groupers    *groupers
	store       *clusterset.Store
	feedback    *clusterset.Feedback
	writeStatus bool
	recorder    events.EventRecorder
	membership  clusterset.Membership
	namespaces  clusterset.NamespacePolicy
	triggers    *triggerLog
	// conditions counts the ServiceExports by their conditions
	// (Options.Metrics').
	conditions *conditionCounts
	// own are the status writes made, so that a read from a cache behind
	// one is read as the write (plumbing.Latest).
	own        *plumbing.OwnWrites
	controller controller.TypedController[reconcile.Request]
}

var _ reconcile.Reconciler = (*Watcher)(nil)

// New returns the watcher of member cl, as an unmanaged controller named
// "export-<cluster>" that Start runs: it lives as long as the member's
// connection, and a member that returns gets a new one. It registers the
// informers it needs in cl's cache, and marks the cluster's exports in the
// Store as being read anew (Store.BeginResync) until its first pass is
// done.
func New(cl cluster.Cluster, opts Options) (*Watcher, error) {
	if opts.Cluster == "" || opts.Store == nil || opts.Membership == nil {
		return nil, fmt.Errorf("export: cluster, store and membership are required")
	}
	if opts.WriteStatus && opts.Feedback == nil {
		return nil, fmt.Errorf("export: a watcher that writes status needs the feedback")
	}
	w := &Watcher{
		cluster: opts.Cluster, client: cl.GetClient(), cache: cl.GetCache(), apiReader: cl.GetAPIReader(), fetched: newFetched(), groupers: newGroupers(),
		store: opts.Store, feedback: opts.Feedback, writeStatus: opts.WriteStatus,
		recorder: opts.Recorder, membership: opts.Membership, namespaces: opts.Namespaces, triggers: newTriggerLog(), conditions: newConditionCounts(),
		own: plumbing.NewOwnWrites(),
	}
	if opts.Metrics != nil {
		w.conditions = opts.Metrics.conditions
	}
	if opts.ExportedNames != nil {
		opts.ExportedNames.learn(w.apiReader, w.cluster)
	}
	if err := w.registerInformers(); err != nil {
		return nil, err
	}
	c, err := plumbing.NewController("export-"+string(w.cluster), w, opts.Workers, log.Log.WithValues("cluster", w.cluster))
	if err != nil {
		return nil, err
	}
	for _, src := range []source.TypedSource[reconcile.Request]{
		// The ServiceExport is the root object.
		source.Kind(w.cache, &mcsv1beta1.ServiceExport{}, &handler.TypedEnqueueRequestForObject[*mcsv1beta1.ServiceExport]{}),
		// Its Service (same namespace/name) gives the spec and validity.
		source.Kind(w.cache, &corev1.Service{}, handler.TypedEnqueueRequestsFromMapFunc(ifExported(w, func(s *corev1.Service) types.NamespacedName {
			return client.ObjectKeyFromObject(s)
		}))),
		// The Service's slices give the endpoints; slices of Services that
		// are not exported are dropped here. Each change's trigger time is
		// logged as it goes by.
		source.Kind(w.cache, &discoveryv1.EndpointSlice{}, handler.TypedEnqueueRequestsFromMapFunc(w.sliceChanged())),
		// Another cluster's export of the same name changes the Conflict
		// condition, and so does a member's connection (AnnounceAll):
		// changes of keys the member does not export change nothing here.
		plumbing.StoreSource(w.store, func(key types.NamespacedName, cluster clusterset.ClusterID) bool {
			return cluster == w.cluster || w.store.GetFrom(key, w.cluster) != nil
		}, nil),
	} {
		if err := c.Watch(src); err != nil {
			return nil, err
		}
	}
	if w.writeStatus {
		// What the readers learn of this member's exports changes their
		// Ready condition; a note for every key (a heartbeat that cannot
		// be written) brings every ServiceExport of the member.
		if err := c.Watch(plumbing.StoreSource(w.feedback, func(key types.NamespacedName, _ clusterset.ClusterID) bool {
			return w.store.GetFrom(key, w.cluster) != nil
		}, plumbing.EnqueueEvery(w.cache, &mcsv1beta1.ServiceExportList{}, "ServiceExports", w.cluster))); err != nil {
			return nil, err
		}
	}
	w.controller = c
	w.store.BeginResync(w.cluster)
	return w, nil
}

// registerInformers registers the informers the watcher reads in its
// cache, so that the member counts as synced only once they are.
func (w *Watcher) registerInformers() error {
	// Slices are looked up by their Service: an index, so that a change
	// costs the same however many slices the namespace holds.
	if err := w.cache.IndexField(context.Background(), &discoveryv1.EndpointSlice{}, sliceServiceIndex, func(o client.Object) []string {
		return []string{o.GetLabels()[discoveryv1.LabelServiceName]}
	}); err != nil {
		return fmt.Errorf("index EndpointSlices by Service: %w", err)
	}
	for _, obj := range []client.Object{&mcsv1beta1.ServiceExport{}, &corev1.Service{}} {
		if _, err := w.cache.GetInformer(context.Background(), obj, cache.BlockUntilSynced(false)); err != nil {
			return fmt.Errorf("informer of %T: %w", obj, err)
		}
	}
	return nil
}

// Start runs the first pass and the controller until ctx ends.
func (w *Watcher) Start(ctx context.Context) error {
	defer w.conditions.stopped(w)
	go w.initialSync(ctx, w.cache)
	return w.controller.Start(ctx)
}

// initialSync puts every ServiceExport in the cache into the Store once
// the cache has synced, then marks the cluster synced in the Store. A
// member that is unreachable at start stays unsynced until its cache
// syncs. It writes no status: the controller's queue holds every
// ServiceExport anyway, and reconciles no key twice at once, whereas a
// status write from here would race with the workers' and conflict.
func (w *Watcher) initialSync(ctx context.Context, c cache.Cache) {
	if !c.WaitForCacheSync(ctx) {
		return // stopping
	}
	logger := log.FromContext(ctx).WithValues("cluster", w.cluster)
	for {
		var list mcsv1beta1.ServiceExportList
		err := c.List(ctx, &list)
		current := make(map[types.NamespacedName]bool, len(list.Items))
		for i := 0; err == nil && i < len(list.Items); i++ {
			key := client.ObjectKeyFromObject(&list.Items[i])
			current[key] = true
			_, err = w.sync(ctx, key, false)
		}
		if err == nil {
			w.store.MarkSynced(w.cluster, current)
			logger.V(2).Info("Exports synced", "serviceExports", len(list.Items))
			return
		}
		logger.Error(err, "First pass over the ServiceExports failed; retrying")
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// ifExported maps an object to the key of its ServiceExport, or to nothing
// if the cache holds no such ServiceExport: objects of Services that are
// not exported cost a cache lookup, no reconcile.
func ifExported[T client.Object](w *Watcher, key func(T) types.NamespacedName) handler.TypedMapFunc[T, reconcile.Request] {
	return func(ctx context.Context, obj T) []reconcile.Request {
		k := key(obj)
		if k.Name == "" {
			return nil
		}
		// The typed object, so the lookup uses the ServiceExport informer
		// the watcher has anyway (metadata would start another one).
		if err := w.client.Get(ctx, k, &mcsv1beta1.ServiceExport{}); err != nil {
			return nil
		}
		return []reconcile.Request{{NamespacedName: k}}
	}
}

// sliceChanged maps a slice to its exported Service, if any, and logs the
// slice's trigger time for it.
func (w *Watcher) sliceChanged() handler.TypedMapFunc[*discoveryv1.EndpointSlice, reconcile.Request] {
	exported := ifExported(w, func(s *discoveryv1.EndpointSlice) types.NamespacedName {
		return types.NamespacedName{Namespace: s.Namespace, Name: s.Labels[discoveryv1.LabelServiceName]}
	})
	return func(ctx context.Context, s *discoveryv1.EndpointSlice) []reconcile.Request {
		reqs := exported(ctx, s)
		if t, ok := triggerTime(s); ok && len(reqs) == 1 {
			w.triggers.record(reqs[0].NamespacedName, t)
		}
		return reqs
	}
}

// Reconcile brings one export up to date from the current state of its
// ServiceExport, Service and EndpointSlices.
func (w *Watcher) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	recheck, err := w.sync(ctx, req.NamespacedName, true)
	if retryAfter, routine := plumbing.Routine(ctx, err); routine {
		// A status write that lost a race, or a shutdown: retried (or
		// over), not a fault.
		log.FromContext(ctx).V(1).Info("Export will be retried", "reason", err.Error())
		return reconcile.Result{RequeueAfter: retryAfter}, nil
	}
	if err != nil {
		plumbing.ReportFailure(ctx, err)
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: recheck}, nil
}
