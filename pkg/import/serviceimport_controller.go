package imports

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/pkg/clusterset"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// ManagedByLabel marks the ServiceImports and derived Services mcs-syncer
// owns (value: the managed-by value); others are never modified.
const ManagedByLabel = "app.kubernetes.io/managed-by"

// importedSliceIndex indexes the imported slices by their
// multicluster.kubernetes.io/service-name label.
const importedSliceIndex = "mcs-syncer.endpointslice.imported-service-name"

var serviceImportGVK = mcsv1beta1.SchemeGroupVersion.WithKind(mcsv1beta1.ServiceImportKindName)

// Options configure a Controller.
type Options struct {
	// Consumer is the cluster the controller writes into. Required.
	Consumer clusterset.ClusterID
	// Store holds the exports; Membership tells who the members are and
	// whether each answers. Both required.
	Store      *clusterset.Store
	Membership clusterset.Membership
	// ManagedBy labels the slices (endpointslice.kubernetes.io/managed-by)
	// and the ServiceImports and derived Services (ManagedByLabel). Default
	// "mcs".
	ManagedBy string
	// MaxEndpointsPerSlice, default reconciler.DefaultMaxEndpointsPerSlice.
	MaxEndpointsPerSlice int
	// UnreachableGrace is how long a disconnected member keeps its
	// endpoints in the imports; 0 keeps them forever.
	UnreachableGrace time.Duration
	// Metrics receives the import metrics and the reconciler's; nil means
	// none.
	Metrics *Metrics
	// Workers is the number of ServiceImports reconciled at once (default 1).
	Workers int
}

// Controller is the import controller of one consumer cluster.
type Controller struct {
	opts          Options
	client        client.Client
	sliceCache    cache.Cache
	controller    controller.TypedController[reconcile.Request]
	newReconciler func() (*reconciler.Reconciler, error)

	own *ownWrites

	mu sync.Mutex
	// reconcilers, one per source cluster: each tracks the slices of its
	// source, so that reconciling one source never sees the others' slices
	// as missing.
	reconcilers   map[clusterset.ClusterID]*reconciler.Reconciler
	missingLogged map[types.NamespacedName]bool
}

var _ reconcile.Reconciler = (*Controller)(nil)

// New returns the import controller of consumer cl, as an unmanaged
// controller named "import-<consumer>" that Start runs: it lives as long as
// the consumer's connection. It registers the informers it needs in cl's
// cache.
func New(cl cluster.Cluster, opts Options) (*Controller, error) {
	if opts.Consumer == "" || opts.Store == nil || opts.Membership == nil {
		return nil, errors.New("import: consumer, store and membership are required")
	}
	if opts.ManagedBy == "" {
		opts.ManagedBy = "mcs"
	}
	if opts.MaxEndpointsPerSlice == 0 {
		opts.MaxEndpointsPerSlice = reconciler.DefaultMaxEndpointsPerSlice
	}
	// The member's cache leaves imported slices out (the export side must
	// never read them), so the slices this controller writes get a cache of
	// their own, holding nothing else.
	managed, err := labels.NewRequirement(discoveryv1.LabelManagedBy, selection.Equals, []string{opts.ManagedBy})
	if err != nil {
		return nil, fmt.Errorf("import: managed-by %q: %w", opts.ManagedBy, err)
	}
	imported, _ := labels.NewRequirement(mcsv1beta1.LabelServiceName, selection.Exists, nil)
	sliceCache, err := cache.New(cl.GetConfig(), cache.Options{
		Scheme: cl.GetScheme(), Mapper: cl.GetRESTMapper(), DefaultTransform: clusterset.StripUnread,
		ByObject: map[client.Object]cache.ByObject{&discoveryv1.EndpointSlice{}: {Label: labels.NewSelector().Add(*managed, *imported)}},
	})
	if err != nil {
		return nil, fmt.Errorf("import %s: slice cache: %w", opts.Consumer, err)
	}
	// Slices are looked up by their ServiceImport: an index, so that a
	// change costs the same however many imports the namespace holds.
	if err := sliceCache.IndexField(context.Background(), &discoveryv1.EndpointSlice{}, importedSliceIndex, func(o client.Object) []string {
		return []string{o.GetLabels()[mcsv1beta1.LabelServiceName]}
	}); err != nil {
		return nil, fmt.Errorf("import %s: index slices: %w", opts.Consumer, err)
	}
	memberCache := cl.GetCache()
	for _, obj := range []client.Object{&mcsv1beta1.ServiceImport{}, &corev1.Service{}, &corev1.Namespace{}} {
		// Registered now, so that the member counts as synced only once
		// they are.
		if _, err := memberCache.GetInformer(context.Background(), obj, cache.BlockUntilSynced(false)); err != nil {
			return nil, fmt.Errorf("import %s: informer of %T: %w", opts.Consumer, obj, err)
		}
	}
	clientset, err := kubernetes.NewForConfig(cl.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", opts.Consumer, err)
	}
	recorder := cl.GetEventRecorder("mcs-syncer")
	c := &Controller{
		opts: opts, client: cl.GetClient(), sliceCache: sliceCache,
		reconcilers:   map[clusterset.ClusterID]*reconciler.Reconciler{},
		missingLogged: map[types.NamespacedName]bool{},
		own:           newOwnWrites(),
		newReconciler: func() (*reconciler.Reconciler, error) {
			ro := []reconciler.Option{
				reconciler.WithMaxEndpointsPerSlice(opts.MaxEndpointsPerSlice),
				reconciler.WithOwnershipEnforced(true),
				reconciler.WithEventRecorder(recorder),
			}
			if opts.Metrics != nil && opts.Metrics.reconcilerRegisterer != nil {
				ro = append(ro, reconciler.WithMetrics(opts.Metrics.reconcilerRegisterer))
			}
			return reconciler.New(clientset.DiscoveryV1(), opts.ManagedBy, ro...)
		},
	}
	if _, err := c.newReconciler(); err != nil { // options are checked once, here
		return nil, fmt.Errorf("import %s: %w", opts.Consumer, err)
	}
	ctrl, err := controller.NewTypedUnmanaged("import-"+string(opts.Consumer), controller.TypedOptions[reconcile.Request]{
		Reconciler: c, MaxConcurrentReconciles: max(1, opts.Workers),
		SkipNameValidation: ptr.To(true), // the same name again when the member returns
		Logger:             log.Log.WithValues("cluster", opts.Consumer),
	})
	if err != nil {
		return nil, err
	}
	for _, src := range c.sources(memberCache) {
		if err := ctrl.Watch(src); err != nil {
			return nil, err
		}
	}
	c.controller = ctrl
	return c, nil
}

// Start runs the slice cache and the controller until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	failed := make(chan error, 1)
	go func() { failed <- c.sliceCache.Start(ctx) }()
	if !c.sliceCache.WaitForCacheSync(ctx) {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("import %s: slice cache: %w", c.opts.Consumer, <-failed)
	}
	return c.controller.Start(ctx)
}

// reconcilerFor returns the reconciler of the slices from source.
func (c *Controller) reconcilerFor(source clusterset.ClusterID) *reconciler.Reconciler {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.reconcilers[source]
	if r == nil {
		r, _ = c.newReconciler() // cannot fail: New tried the same options
		c.reconcilers[source] = r
	}
	return r
}

func (c *Controller) sources(memberCache cache.Cache) []source.TypedSource[reconcile.Request] {
	return []source.TypedSource[reconcile.Request]{
		// The ServiceImport itself: an edit or a deletion by a person is
		// repaired. Echoes of our own writes are not.
		source.Kind(memberCache, &mcsv1beta1.ServiceImport{}, &handler.TypedEnqueueRequestForObject[*mcsv1beta1.ServiceImport]{}, notEcho[*mcsv1beta1.ServiceImport](c.own)),
		// Derived Services, by their owning ServiceImport.
		source.Kind(memberCache, &corev1.Service{}, handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, s *corev1.Service) []reconcile.Request {
			if ref := metav1.GetControllerOfNoCopy(s); ref != nil && ref.Kind == serviceImportGVK.Kind && ref.APIVersion == serviceImportGVK.GroupVersion().String() {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: ref.Name}}}
			}
			return nil
		}), notEcho[*corev1.Service](c.own)),
		// Imported slices: changes by others are repaired; echoes of our own
		// writes are ignored; deletions complete the tracker's records.
		source.Kind(c.sliceCache, &discoveryv1.EndpointSlice{}, c.sliceHandler()),
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
		// The Store's changes, and a member's connection or membership
		// changing (announced through the Store), change what an import
		// holds.
		source.TypedFunc[reconcile.Request](func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			c.opts.Store.Subscribe(ctx, func(key types.NamespacedName) { q.Add(reconcile.Request{NamespacedName: key}) })
			return nil
		}),
	}
}

// notEcho lets through every event but the create and update events that
// echo mcs-syncer's own last write of the object.
func notEcho[T client.Object](own *ownWrites) predicate.TypedPredicate[T] {
	return predicate.TypedFuncs[T]{
		CreateFunc: func(e event.TypedCreateEvent[T]) bool { return !own.isEcho(e.Object) },
		UpdateFunc: func(e event.TypedUpdateEvent[T]) bool { return !own.isEcho(e.ObjectNew) },
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

// sourceOf returns the source cluster of an imported slice.
func sourceOf(s *discoveryv1.EndpointSlice) clusterset.ClusterID {
	return clusterset.ClusterID(s.Labels[mcsv1beta1.LabelSourceCluster])
}

// Reconcile brings one import in the consumer cluster in line with the
// Store. A write that lost a race with another (a resourceVersion
// conflict) is retried without being reported as an error.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := c.reconcile(ctx, req.NamespacedName)
	if apierrors.IsConflict(err) {
		return reconcile.Result{RequeueAfter: 200 * time.Millisecond}, nil
	}
	return res, err
}

func (c *Controller) reconcile(ctx context.Context, key types.NamespacedName) (reconcile.Result, error) {
	logger := log.FromContext(ctx).WithValues("cluster", c.opts.Consumer)
	exports, recheck := c.reachableExports(key)
	unsettled, settleRecheck := c.unsettledSources()
	recheck = minPositive(recheck, settleRecheck)

	ns := &corev1.Namespace{}
	if err := c.client.Get(ctx, types.NamespacedName{Name: key.Namespace}, ns); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("get namespace %s: %w", key.Namespace, err)
		}
		if len(exports) > 0 && c.firstMissing(key) {
			logger.Info("Namespace does not exist here; the import is skipped until it does", "serviceImport", key)
			c.opts.Metrics.namespaceMissing(c.opts.Consumer)
		}
		return reconcile.Result{}, nil
	}
	if ns.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}

	si := &mcsv1beta1.ServiceImport{}
	err := c.client.Get(ctx, key, si)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, fmt.Errorf("get ServiceImport %s: %w", key, err)
	}
	if exists && si.Labels[ManagedByLabel] != c.opts.ManagedBy {
		logger.Info("ServiceImport is not managed by mcs-syncer; leaving it alone", "serviceImport", key)
		return reconcile.Result{}, nil
	}
	if len(exports) == 0 {
		if len(unsettled) > 0 {
			// Some member's exports are not known yet (mcs-syncer just
			// started, or the member is unreachable within its grace):
			// absence proves nothing; look again later.
			return reconcile.Result{RequeueAfter: recheck}, nil
		}
		if exists {
			// Its derived Service and slices go with it (owner references).
			if err := c.client.Delete(ctx, si, client.Preconditions{UID: &si.UID}); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, fmt.Errorf("delete ServiceImport %s: %w", key, err)
			}
			logger.V(2).Info("ServiceImport deleted: nobody exports it any more", "serviceImport", key)
		}
		c.forget(si)
		return reconcile.Result{RequeueAfter: recheck}, nil
	}

	merged := clusterset.Merge(exports)
	if exists && len(unsettled) > 0 {
		// A partial view (right after a start, or a member within its
		// grace): the ServiceImport stays as it is, so that a restart writes
		// nothing; the slices of the settled sources follow their exports.
		merged.Spec.Type, merged.Spec.IPFamilies = si.Spec.Type, si.Spec.IPFamilies
		return sliceResult(c.applySlices(ctx, si, merged, exports, unsettled), recheck)
	}
	if si, err = c.applyServiceImport(ctx, key, si, exists, merged); err != nil {
		return reconcile.Result{}, err
	}
	ips, err := c.applyDerivedService(ctx, si, merged)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !slices.Equal(si.Spec.IPs, ips) {
		si.Spec.IPs = ips
		if err := c.client.Update(ctx, si); err != nil {
			return reconcile.Result{}, fmt.Errorf("update ips of ServiceImport %s: %w", key, err)
		}
		c.own.wrote(si)
	}
	sliceErr := c.applySlices(ctx, si, merged, exports, unsettled)
	if err := c.applyStatus(ctx, si, merged); err != nil {
		return reconcile.Result{}, errors.Join(sliceErr, err)
	}
	return sliceResult(sliceErr, recheck)
}

// sliceResult is the outcome of a reconcile whose other writes succeeded.
func sliceResult(sliceErr error, recheck time.Duration) (reconcile.Result, error) {
	if errors.Is(sliceErr, reconciler.ErrStaleCache) {
		// The slice cache has not seen our last writes yet; its events
		// requeue us, this is the fallback.
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	if sliceErr != nil {
		return reconcile.Result{}, sliceErr // controller-runtime ignores a delay given with an error
	}
	return reconcile.Result{RequeueAfter: recheck}, nil
}

// reachableExports returns the exports of key whose cluster is connected,
// or disconnected for less than the grace period, and when to look again
// for a member whose grace runs out.
func (c *Controller) reachableExports(key types.NamespacedName) ([]*clusterset.ExportedService, time.Duration) {
	var out []*clusterset.ExportedService
	var recheck time.Duration
	now := time.Now()
	for _, es := range c.opts.Store.Get(key) {
		connected, since := c.opts.Membership.Connected(es.Cluster)
		if connected || c.opts.UnreachableGrace == 0 {
			out = append(out, es)
			continue
		}
		left := c.opts.UnreachableGrace - now.Sub(since)
		if left <= 0 {
			continue
		}
		out = append(out, es)
		recheck = minPositive(recheck, left)
	}
	return out, recheck
}

// unsettledSources returns the members whose exports the Store does not
// fully know yet, and when to look again: a member not yet synced (at
// start) is looked at again in a second; one that is unreachable is
// settled, with nothing exported, once its grace has run out.
func (c *Controller) unsettledSources() (map[clusterset.ClusterID]bool, time.Duration) {
	unsettled := map[clusterset.ClusterID]bool{}
	var recheck time.Duration
	now := time.Now()
	for _, id := range c.opts.Membership.IDs() {
		if c.opts.Store.Synced(id) {
			continue
		}
		connected, since := c.opts.Membership.Connected(id)
		if connected {
			unsettled[id] = true // its first pass is under way
			recheck = minPositive(recheck, time.Second)
			continue
		}
		if c.opts.UnreachableGrace == 0 {
			unsettled[id] = true // kept until it is back; its reconnection requeues
			continue
		}
		if left := c.opts.UnreachableGrace - now.Sub(since); left > 0 {
			unsettled[id] = true
			recheck = minPositive(recheck, left)
		}
	}
	return unsettled, recheck
}

// minPositive returns the smaller of two durations, ignoring zeros.
func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

func (c *Controller) firstMissing(key types.NamespacedName) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := !c.missingLogged[key]
	c.missingLogged[key] = true
	return first
}

func (c *Controller) forget(si *mcsv1beta1.ServiceImport) {
	key := client.ObjectKeyFromObject(si)
	c.own.forget(si)
	c.own.forget(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: DerivedServiceName(key)}})
	c.mu.Lock()
	delete(c.missingLogged, key)
	c.mu.Unlock()
	c.opts.Metrics.forget(c.opts.Consumer, c.opts.Membership.IDs(), key)
	if si.UID != "" {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, r := range c.reconcilers {
			r.Forget(si.UID)
		}
	}
}

// applyServiceImport creates the ServiceImport or updates its spec, labels
// and annotations, keeping spec.ips (set from the derived Service later).
func (c *Controller) applyServiceImport(ctx context.Context, key types.NamespacedName, si *mcsv1beta1.ServiceImport, exists bool, merged clusterset.Merged) (*mcsv1beta1.ServiceImport, error) {
	want := si.DeepCopy()
	want.Name, want.Namespace = key.Name, key.Namespace
	want.Labels = maps.Clone(merged.Spec.Labels)
	if want.Labels == nil {
		want.Labels = map[string]string{}
	}
	want.Labels[ManagedByLabel] = c.opts.ManagedBy
	want.Annotations = maps.Clone(merged.Spec.Annotations)
	if merged.Spec.Type == mcsv1beta1.ClusterSetIP {
		if want.Annotations == nil {
			want.Annotations = map[string]string{}
		}
		want.Annotations[DerivedServiceAnnotation] = DerivedServiceName(key)
	}
	s := merged.Spec
	want.Spec = mcsv1beta1.ServiceImportSpec{
		Type: s.Type, Ports: s.Ports, SessionAffinity: s.SessionAffinity, SessionAffinityConfig: s.SessionAffinityConfig,
		IPFamilies: s.IPFamilies, InternalTrafficPolicy: s.InternalTrafficPolicy, TrafficDistribution: s.TrafficDistribution,
		IPs: si.Spec.IPs,
	}
	if want.Spec.Ports == nil {
		want.Spec.Ports = []mcsv1beta1.ServicePort{}
	}
	if s.Type == mcsv1beta1.Headless {
		want.Spec.IPs = nil
	}
	if !exists {
		if err := c.client.Create(ctx, want); err != nil {
			return nil, fmt.Errorf("create ServiceImport %s: %w", key, err)
		}
		c.own.wrote(want)
		return want, nil
	}
	if equality.Semantic.DeepEqual(want.Spec, si.Spec) && maps.Equal(want.Labels, si.Labels) && maps.Equal(want.Annotations, si.Annotations) {
		return si, nil
	}
	if err := c.client.Update(ctx, want); err != nil {
		return nil, fmt.Errorf("update ServiceImport %s: %w", key, err)
	}
	c.own.wrote(want)
	return want, nil
}

// applyDerivedService keeps the derived Service of a ClusterSetIP import
// (and removes it from a Headless one) and returns the clusterset IPs.
func (c *Controller) applyDerivedService(ctx context.Context, si *mcsv1beta1.ServiceImport, merged clusterset.Merged) ([]string, error) {
	name := types.NamespacedName{Namespace: si.Namespace, Name: DerivedServiceName(client.ObjectKeyFromObject(si))}
	svc := &corev1.Service{}
	err := c.client.Get(ctx, name, svc)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("get derived Service %s: %w", name, err)
	}
	if exists && !metav1.IsControlledBy(svc, si) {
		if !c.leftByEarlierImport(svc, si) {
			return nil, fmt.Errorf("derived Service %s exists but is not owned by ServiceImport %s; delete it or rename", name, si.Name)
		}
		// Ours, from a deleted ServiceImport of the same name: the garbage
		// collector would remove it; do it now rather than wait.
		if err := c.client.Delete(ctx, svc, client.Preconditions{UID: &svc.UID}); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("delete derived Service %s of a deleted ServiceImport: %w", name, err)
		}
		svc, exists = &corev1.Service{}, false
	}
	if merged.Spec.Type != mcsv1beta1.ClusterSetIP {
		if exists {
			if err := c.client.Delete(ctx, svc, client.Preconditions{UID: &svc.UID}); client.IgnoreNotFound(err) != nil {
				return nil, fmt.Errorf("delete derived Service %s: %w", name, err)
			}
		}
		return nil, nil
	}
	want := svc.DeepCopy()
	want.Name, want.Namespace = name.Name, name.Namespace
	want.Labels = map[string]string{ManagedByLabel: c.opts.ManagedBy, mcsv1beta1.LabelServiceName: si.Name}
	want.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(si, serviceImportGVK)}
	want.Spec.Type = corev1.ServiceTypeClusterIP
	want.Spec.Selector = nil
	want.Spec.Ports = nil
	for _, p := range merged.Spec.Ports {
		// Every field the API server would default is set, so that an
		// unchanged import compares equal and is not rewritten.
		want.Spec.Ports = append(want.Spec.Ports, corev1.ServicePort{
			Name: p.Name, Protocol: cmp.Or(p.Protocol, corev1.ProtocolTCP), AppProtocol: p.AppProtocol,
			Port: p.Port, TargetPort: intstr.FromInt32(p.Port),
		})
	}
	want.Spec.SessionAffinity = cmp.Or(merged.Spec.SessionAffinity, corev1.ServiceAffinityNone)
	want.Spec.SessionAffinityConfig = merged.Spec.SessionAffinityConfig
	if len(merged.Spec.IPFamilies) > 0 {
		want.Spec.IPFamilies = merged.Spec.IPFamilies
		policy := corev1.IPFamilyPolicySingleStack
		if len(merged.Spec.IPFamilies) > 1 {
			policy = corev1.IPFamilyPolicyRequireDualStack
		}
		want.Spec.IPFamilyPolicy = &policy
	}
	if !exists {
		if err := c.client.Create(ctx, want); err != nil {
			return nil, fmt.Errorf("create derived Service %s: %w", name, err)
		}
		c.own.wrote(want)
		return want.Spec.ClusterIPs, nil
	}
	if !equality.Semantic.DeepEqual(want.Spec, svc.Spec) || !maps.Equal(want.Labels, svc.Labels) {
		if err := c.client.Update(ctx, want); err != nil {
			return nil, fmt.Errorf("update derived Service %s: %w", name, err)
		}
		c.own.wrote(want)
	}
	return want.Spec.ClusterIPs, nil
}

// leftByEarlierImport reports whether a derived Service is mcs-syncer's,
// controlled by an earlier ServiceImport of the same name (one that was
// deleted and created again).
func (c *Controller) leftByEarlierImport(svc *corev1.Service, si *mcsv1beta1.ServiceImport) bool {
	ref := metav1.GetControllerOfNoCopy(svc)
	return svc.Labels[ManagedByLabel] == c.opts.ManagedBy && ref != nil &&
		ref.Kind == serviceImportGVK.Kind && ref.APIVersion == serviceImportGVK.GroupVersion().String() &&
		ref.Name == si.Name && ref.UID != si.UID
}

// applySlices reconciles the slices of every source cluster: the
// endpoints of those exporting, nothing for the others.
func (c *Controller) applySlices(ctx context.Context, si *mcsv1beta1.ServiceImport, merged clusterset.Merged, exports []*clusterset.ExportedService, unsettled map[clusterset.ClusterID]bool) error {
	var list discoveryv1.EndpointSliceList
	if err := c.sliceCache.List(ctx, &list, client.InNamespace(si.Namespace), client.MatchingFields{importedSliceIndex: si.Name}); err != nil {
		return fmt.Errorf("list imported EndpointSlices of %s/%s: %w", si.Namespace, si.Name, err)
	}
	// Every member, and every other source that slices name: those of a
	// cluster that left the clusterset (or was renamed) are withdrawn.
	sources := slices.Clone(c.opts.Membership.IDs())
	bySource := map[clusterset.ClusterID][]*discoveryv1.EndpointSlice{}
	for i := range list.Items {
		s := &list.Items[i]
		id := sourceOf(s)
		if _, ok := bySource[id]; !ok && !slices.Contains(sources, id) {
			sources = append(sources, id)
		}
		bySource[id] = append(bySource[id], s)
	}
	exportOf := map[clusterset.ClusterID]*clusterset.ExportedService{}
	for _, es := range exports {
		exportOf[es.Cluster] = es
	}
	addressTypes := addressTypesOf(merged.Spec.IPFamilies)
	var errs []error
	for _, source := range sources {
		es := exportOf[source]
		if (es == nil && len(bySource[source]) == 0) || unsettled[source] {
			continue // nothing to do, or not all known yet: its slices stay as they are
		}
		in := reconciler.Input{
			Owner: si, OwnerGVK: serviceImportGVK,
			AddressTypes: addressTypes,
			Existing:     bySource[source],
			Labeler:      c.labeler(si, merged, source),
		}
		if es != nil {
			in.TriggerTime = es.LastChangeTriggerTime
			for _, g := range es.Endpoints {
				if slices.Contains(addressTypes, g.AddressType) {
					in.Desired = append(in.Desired, g)
				}
			}
		}
		endpoints := 0
		for _, g := range in.Desired {
			endpoints += len(g.Endpoints)
		}
		c.opts.Metrics.setImported(source, c.opts.Consumer, client.ObjectKeyFromObject(si), endpoints)
		r := c.reconcilerFor(source)
		plan, err := r.Plan(in)
		if err != nil {
			errs = append(errs, fmt.Errorf("EndpointSlices from %s: %w", source, err))
			continue
		}
		if !plan.Empty() {
			if err := r.Apply(ctx, plan); err != nil {
				errs = append(errs, fmt.Errorf("EndpointSlices from %s: %w", source, err))
				continue
			}
		}
		c.opts.Metrics.propagated(source, c.opts.Consumer, client.ObjectKeyFromObject(si), es, !plan.Empty())
	}
	return errors.Join(errs...)
}

func (c *Controller) labeler(si *mcsv1beta1.ServiceImport, merged clusterset.Merged, source clusterset.ClusterID) reconciler.Labeler {
	return reconciler.LabelerFunc(func() (map[string]string, map[string]string) {
		l := map[string]string{
			mcsv1beta1.LabelServiceName:   si.Name,
			mcsv1beta1.LabelSourceCluster: string(source),
		}
		// Only for ClusterSetIP: kube-proxy then routes the derived
		// Service's IP to these endpoints. Never the plain Service name,
		// which would mix them into the local Service.
		if merged.Spec.Type == mcsv1beta1.ClusterSetIP {
			l[discoveryv1.LabelServiceName] = DerivedServiceName(client.ObjectKeyFromObject(si))
		}
		return l, nil
	})
}

// addressTypesOf returns the address types of the import's IP families;
// without families (an export from a cluster without dual-stack fields),
// both, and the endpoints decide.
func addressTypesOf(families []corev1.IPFamily) []discoveryv1.AddressType {
	if types := reconciler.AddressTypesForIPFamilies(families); len(types) > 0 {
		return types
	}
	return []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6}
}

// applyStatus writes the ServiceImport's status when it changed.
func (c *Controller) applyStatus(ctx context.Context, si *mcsv1beta1.ServiceImport, merged clusterset.Merged) error {
	want := si.DeepCopy()
	want.Status.Clusters = nil
	for _, id := range merged.Clusters {
		want.Status.Clusters = append(want.Status.Clusters, mcsv1beta1.ClusterStatus{Cluster: string(id)})
	}
	want.Status.EndpointSliceObjects = mcsv1beta1.EndpointSliceObjectsPresent
	meta.SetStatusCondition(&want.Status.Conditions, metav1.Condition{
		Type: string(mcsv1beta1.ServiceImportConditionReady), Status: metav1.ConditionTrue,
		Reason: string(mcsv1beta1.ServiceImportReasonReady), ObservedGeneration: si.Generation,
		Message: fmt.Sprintf("imported from %v", merged.Clusters),
	})
	if equality.Semantic.DeepEqual(want.Status, si.Status) {
		return nil
	}
	if err := c.client.Status().Update(ctx, want); err != nil {
		return fmt.Errorf("update status of ServiceImport %s/%s: %w", si.Namespace, si.Name, err)
	}
	c.own.wrote(want)
	return nil
}
