package imports

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	discoveryclient "k8s.io/client-go/kubernetes/typed/discovery/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/plumbing"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// ManagedByLabel marks the ServiceImports and derived Services mcs-syncer
// owns (value: the managed-by value); others are never modified.
const ManagedByLabel = clusterset.ManagedByLabel

// Exports is what the controller needs of the Store (clusterset.Store):
// the exports of a key, whether a member's exports are all known, and the
// changes.
type Exports interface {
	ExportsOf(types.NamespacedName, []clusterset.ClusterID) (exports []*clusterset.ExportedService, notSynced, neverSynced []clusterset.ClusterID)
	GetFrom(types.NamespacedName, clusterset.ClusterID) *clusterset.ExportedService
	Keys() []types.NamespacedName
	NotSynced([]clusterset.ClusterID) []clusterset.ClusterID
	Subscribe(ctx context.Context, sub clusterset.Subscriber)
}

// Feedback is where the controller says that an import is blocked
// (clusterset.Feedback): status flows back to the exporters on a channel
// of its own, not through the Store of the exports.
type Feedback interface {
	SetImportBlocked(key types.NamespacedName, consumer clusterset.ClusterID, why string)
}

// importMaxBackoff caps the wait before an import whose writes failed is
// tried again: the failure backoff doubles from 5 ms, so a Service whose
// import stays refused (a quota on EndpointSlices, a consumer that may not
// write them) is tried about 14 times in its first minute and then once a
// minute (docs/troubleshooting.md), and an import that a person unblocks
// (the quota raised) is written within a minute, not after up to the
// default's 16 minutes.
const importMaxBackoff = time.Minute

// incrementalPlansFrom is the number of endpoints from one source from
// which the source's reconciler remembers what it planned, and plans a
// change from what moved (reconciler.WithIncrementalPlans; issue 56). Below
// it a plan in full costs less than a millisecond, and the memo's 270 bytes
// per endpoint are not worth it.
const incrementalPlansFrom = 1000

// concurrentWrites is how many writes of one source's plan the import
// sends at once (reconciler.WithConcurrentWrites): an import of 50,000
// endpoints is 500 slices, and one at a time it waited for 500 round trips
// in a row, where a plain client writing with 16 at once took a fifth of
// the time (issue 56). The API server's Priority and Fairness queues what
// it cannot take at once; the import's workers bound the total.
const concurrentWrites = 8

// Options configure a Controller.
type Options struct {
	// Consumer is the cluster the controller writes into. Required.
	Consumer clusterset.ClusterID
	// Store holds the exports; Membership tells who the members are and
	// whether each answers; Feedback hears which imports are blocked. All
	// required.
	Store      Exports
	Membership clusterset.Membership
	Feedback   Feedback
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
	// AddressRanges, by member, are the only addresses that member's
	// endpoints may have: an endpoint with another is left out and counted
	// (mcs_syncer_unimportable_endpoints, the EndpointsNotImported event).
	// A member without ranges is not limited.
	AddressRanges map[clusterset.ClusterID][]netip.Prefix
}

// Controller is the import controller of one consumer cluster. Its parts
// live in one file each: the ServiceImport (serviceimport.go), the derived
// Service (derivedservice.go), the slices (slices.go), the status
// (status.go), and which exports count (view.go).
type Controller struct {
	opts   Options
	client client.Client
	// siGVK is the ServiceImport's kind in the version the consumer
	// serves (its client's scheme, internal/mcsapi): the owner of the
	// derived Service and of the slices.
	siGVK      schema.GroupVersionKind
	slices     importedSlices // the imported slices, from a cache of their own
	recorder   events.EventRecorder
	controller controller.TypedController[reconcile.Request]
	sliceCache cache.Cache
	// zones are the zones of the consumer's nodes (local-first imports
	// only, localfirst.go), from nodeCache; zonesChanged says they changed.
	zones        zoneSource
	nodeCache    cache.Cache
	zonesChanged chan struct{}

	newReconciler func() (*reconciler.Reconciler, error)
	own           *plumbing.OwnWrites

	mu sync.Mutex
	// reconcilers, one per source cluster: each tracks the slices of its
	// source, so that reconciling one source never sees the others' slices
	// as missing.
	reconcilers map[clusterset.ClusterID]*reconciler.Reconciler
	// settled says which sources' slices need no planning (settled.go).
	settled *settled
	// addresses says which addresses several sources export (duplicates.go).
	addresses *addressIndex
	// checked are the arrays of endpoints found importable (checked.go).
	checked *checkedArrays
	// reported holds the problems already logged, see reportOnce.
	reported map[reportKey]bool
}

var _ reconcile.Reconciler = (*Controller)(nil)

// New returns the import controller of consumer cl, as an unmanaged
// controller named "import-<consumer>" that Start runs: it lives as long as
// the consumer's connection. It registers the informers it needs in cl's
// cache.
func New(cl cluster.Cluster, opts Options) (*Controller, error) {
	if opts.ManagedBy == "" {
		opts.ManagedBy = "mcs"
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
		Scheme: cl.GetScheme(), Mapper: cl.GetRESTMapper(), DefaultTransform: plumbing.StripUnread,
		ByObject: map[client.Object]cache.ByObject{&discoveryv1.EndpointSlice{}: {
			Label:     labels.NewSelector().Add(*managed, *imported),
			Transform: shareWithStore(opts.Store),
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("import %s: slice cache: %w", opts.Consumer, err)
	}
	slices, err := indexImportedSlices(sliceCache)
	if err != nil {
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
	c, err := newController(cl.GetClient(), slices, clientset.DiscoveryV1(), plumbing.NonBlockingRecorder(cl.GetEventRecorder("mcs-syncer")), opts)
	if err != nil {
		return nil, err
	}
	c.sliceCache = sliceCache
	// Nodes' metadata, read only once an import puts the local cluster
	// first (zones.go).
	c.nodeCache, err = cache.New(cl.GetConfig(), cache.Options{Scheme: cl.GetScheme(), Mapper: cl.GetRESTMapper(), DefaultTransform: plumbing.StripUnread})
	if err != nil {
		return nil, fmt.Errorf("import %s: node cache: %w", opts.Consumer, err)
	}
	c.zonesChanged = make(chan struct{}, 1)
	c.zones = newNodeZones(c.nodeCache, func() {
		select {
		case c.zonesChanged <- struct{}{}:
		default: // one pending notice is enough
		}
	})
	ctrl, err := plumbing.NewControllerWithBackoff("import-"+string(opts.Consumer), c, opts.Workers, log.Log.WithValues("cluster", opts.Consumer), importMaxBackoff)
	if err != nil {
		return nil, err
	}
	for _, src := range c.watches(memberCache, sliceCache, cl.GetScheme(), cl.GetRESTMapper()) {
		if err := ctrl.Watch(src); err != nil {
			return nil, err
		}
	}
	c.controller = ctrl
	return c, nil
}

// newController is the Controller without its watches and caches: what
// Reconcile needs. sliceWriter writes the imported slices (the reconciler
// speaks client-go), sliceReader reads them per import.
func newController(cl client.Client, sliceReader importedSlices, sliceWriter discoveryclient.EndpointSlicesGetter, recorder events.EventRecorder, opts Options) (*Controller, error) {
	if opts.Consumer == "" || opts.Store == nil || opts.Membership == nil || opts.Feedback == nil {
		return nil, errors.New("import: consumer, store, membership and feedback are required")
	}
	if opts.ManagedBy == "" {
		opts.ManagedBy = "mcs"
	}
	if opts.MaxEndpointsPerSlice == 0 {
		opts.MaxEndpointsPerSlice = reconciler.DefaultMaxEndpointsPerSlice
	}
	siGVK, err := apiutil.GVKForObject(&mcsv1beta1.ServiceImport{}, cl.Scheme())
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	c := &Controller{
		opts: opts, client: cl, siGVK: siGVK, slices: sliceReader, recorder: recorder,
		reconcilers: map[clusterset.ClusterID]*reconciler.Reconciler{},
		reported:    map[reportKey]bool{},
		own:         plumbing.NewOwnWrites(),
		settled:     newSettled(),
		addresses:   newAddressIndex(),
		checked:     newCheckedArrays(),
		newReconciler: func() (*reconciler.Reconciler, error) {
			ro := []reconciler.Option{
				reconciler.WithMaxEndpointsPerSlice(opts.MaxEndpointsPerSlice),
				reconciler.WithOwnershipEnforced(true),
				reconciler.WithEventRecorder(recorder),
				reconciler.WithTrafficDistribution(true), // hints.go
				reconciler.WithIncrementalPlans(incrementalPlansFrom),
				reconciler.WithConcurrentWrites(concurrentWrites),
			}
			if opts.Metrics != nil && opts.Metrics.reconcilerRegisterer != nil {
				ro = append(ro, reconciler.WithMetrics(opts.Metrics.reconcilerRegisterer))
			}
			return reconciler.New(sliceWriter, opts.ManagedBy, ro...)
		},
	}
	if _, err := c.newReconciler(); err != nil { // options are checked once, here
		return nil, fmt.Errorf("import %s: %w", opts.Consumer, err)
	}
	return c, nil
}

// Start runs the slice cache and the controller until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	failed := make(chan error, 1)
	waiting, stopWaiting := context.WithCancel(ctx)
	waitForFirstPasses(waiting, c.firstPasses, c.firstPassesChanged(waiting), exportsQuiet, exportsLimit)
	stopWaiting()
	go func() { failed <- c.sliceCache.Start(ctx) }()
	go func() {
		if err := c.nodeCache.Start(ctx); err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "The cache of Nodes stopped: imports cannot put the local cluster first", "cluster", c.opts.Consumer)
		}
	}()
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
		r, _ = c.newReconciler() // cannot fail: newController tried the same options
		c.reconcilers[source] = r
	}
	return r
}
