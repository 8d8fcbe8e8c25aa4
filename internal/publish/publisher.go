package publish

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/plumbing"
)

// ConfigureCache makes a cache hold only the PublishedExports of cluster
// in namespace: a reader's of one member, or a publisher's of its own. With
// no cluster it holds every member's (a hub's, which the readers of all
// members read through it share).
func ConfigureCache(o *cache.Options, namespace string, cluster clusterset.ClusterID) {
	if o.ByObject == nil {
		o.ByObject = map[client.Object]cache.ByObject{}
	}
	selector := labels.SelectorFromSet(labels.Set{mcsv1beta1.LabelSourceCluster: string(cluster)})
	if cluster == "" {
		exists, _ := labels.NewRequirement(mcsv1beta1.LabelSourceCluster, selection.Exists, nil)
		selector = labels.NewSelector().Add(*exists)
	}
	o.ByObject[&v1alpha1.PublishedExport{}] = cache.ByObject{Namespaces: map[string]cache.Config{namespace: {}}, Label: selector, Transform: transform}
}

// PublisherOptions configure a Publisher.
type PublisherOptions struct {
	// Cluster is the member whose exports are published (the local one).
	Cluster clusterset.ClusterID
	// Namespace is where the publications go.
	Namespace string
	// Store holds the member's exports (its export watcher's).
	Store *clusterset.Store
	// Feedback hears which exports could not be published and whether the
	// heartbeat is written: the export watcher turns that into the
	// ServiceExports' Ready condition.
	Feedback *clusterset.Feedback
	// Workers reconcile that many exports at once (default 1).
	Workers int
	// Heartbeat is how often the marker is renewed (0: never, as
	// publishers before the heartbeat did); see Heartbeats.
	Heartbeat time.Duration
	// MaxEndpointsPerPart is the most endpoints in one part (default
	// DefaultMaxEndpointsPerPart).
	MaxEndpointsPerPart int
	// Readers tells the form to publish in: whole (every endpoint in the
	// head) while wholeOnly names members whose readers do not assemble
	// parts; and whether what is known of the readers is settled (each
	// member read has been read once). Nil: every reader assembles parts.
	Readers func() (wholeOnly []clusterset.ClusterID, settled bool)
	// ReadersChanged returns a channel closed when what Readers answers
	// may have changed (a notify.Signal's Changed); required with Readers.
	ReadersChanged func() <-chan struct{}
	// Warn tells the member about one of its exports (a Warning event on
	// its ServiceExport); nil: the log only.
	Warn func(ctx context.Context, key types.NamespacedName, reason, message string)
}

// ReasonPublicationRewritten is the reason of the Warning that a
// publisher gives an export whose publication it found claiming an
// export time before the ServiceExport's creation: written by another
// holder of the member's identity (docs/security.md), or left from an
// earlier ServiceExport of the same name.
const ReasonPublicationRewritten = "PublicationRewritten"

// DefaultMaxEndpointsPerPart is the most endpoints in one part unless set
// otherwise: an EndpointSlice's default, so a part is about 15 KB.
const DefaultMaxEndpointsPerPart = 100

// Publisher keeps the publications of one member in a publication server
// equal to the member's exports in the Store, writes the member's marker
// once they first are, and then renews it (the member's heartbeat). A
// marker that disappears (a wiped hub, a hand that deleted it) is written
// again once every export is published again.
type Publisher struct {
	opts   PublisherOptions
	client client.Client
	cache  cache.Cache
	// apiReader reads past the cache: what a create found in its way.
	apiReader  client.Reader
	controller controller.TypedController[reconcile.Request]
	// markerDone is set once the marker is known to exist.
	markerDone atomic.Bool
	// problem is why the marker could not be written or renewed ("" when
	// it last was): the member's heartbeat is not reaching the others.
	problem atomic.Pointer[string]
	// synced is set once the publisher's cache has synced.
	synced atomic.Bool
	// clock is this process's (nil), or a fake one in tests; renewedAt is when,
	// by it, this publisher last wrote the marker (zero: not yet). Only
	// the marker's work item reads or writes it, and a controller never
	// runs one item on two workers at once.
	clock     clock.PassiveClock
	renewedAt time.Time
	// memos are what the last plan of each export's parts read
	// (partmemo.go).
	memos partMemos
	// own are the member's parts as the cache holds them (ownparts.go).
	own *ownParts
}

// MaxPublicationBytes bounds the size of one object of a publication as
// JSON: under the 1.5 MiB that etcd takes in one request by default
// (kube-apiserver's own bound is 3 MiB), with room for the metadata. A
// head or part over it is refused with a condition rather than written
// and lost ("etcdserver: request is too large"). Parts keep every object
// far under it (100 endpoints take about 15 KB); only a publication
// whole, for readers before parts, can reach it: about 7,000 endpoints.
const MaxPublicationBytes = 1 << 20

// publishMaxBackoff caps the wait before a failed write is tried again:
// when a hub returns from an outage (a watch resumed, with no event to
// requeue anything), the member's heartbeat and the withdrawals it could
// not write must reach it within seconds, not after the default backoff
// grew to minutes (seen: an export ended during an outage stayed
// published 30-50 s after the hub's return).
const publishMaxBackoff = 5 * time.Second

// markerRequest is the work item of the marker.
var markerRequest = reconcile.Request{}

// NewPublisher returns a Publisher that writes through target's client; its
// cache must be set up with ConfigureCache for opts.Cluster.
func NewPublisher(target cluster.Cluster, opts PublisherOptions) (*Publisher, error) {
	if opts.Readers != nil && opts.ReadersChanged == nil {
		return nil, errors.New("publish: Readers needs ReadersChanged")
	}
	if opts.Cluster == "" || opts.Namespace == "" || opts.Store == nil || opts.Feedback == nil {
		return nil, fmt.Errorf("publish: cluster, namespace, store and feedback are required")
	}
	p := &Publisher{opts: opts, client: target.GetClient(), cache: target.GetCache(), apiReader: target.GetAPIReader(), own: newOwnParts(string(opts.Cluster))}
	// Registered now, so that Start waits for it (and a member's own
	// cache counts as synced only once it is).
	if _, err := p.cache.GetInformer(context.Background(), &v1alpha1.PublishedExport{}, cache.BlockUntilSynced(false)); err != nil {
		return nil, fmt.Errorf("informer of publications: %w", err)
	}
	c, err := plumbing.NewControllerWithBackoff("publish-"+string(opts.Cluster), p, opts.Workers, log.Log.WithValues("cluster", opts.Cluster), publishMaxBackoff)
	if err != nil {
		return nil, err
	}
	for _, src := range []source.TypedSource[reconcile.Request]{
		// The marker, once at the start: the member's first pass may have
		// been announced before this controller subscribed to the Store
		// (seen: a member without exports never got its marker).
		source.TypedFunc[reconcile.Request](func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			q.Add(markerRequest)
			return nil
		}),
		// Every change of the member's exports; and, when the Store
		// announces everything (its first pass is done), the marker.
		plumbing.StoreSource(opts.Store, func(_ types.NamespacedName, cluster clusterset.ClusterID) bool {
			return cluster == opts.Cluster
		}, func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			q.Add(markerRequest)
		}),
		// Every export, when the members that read whole publications
		// only change: the last of them upgraded, its exports go into
		// parts.
		source.TypedFunc[reconcile.Request](p.followReaders),
		// A publication changed or removed by someone else is put back; a
		// stale one (of an export gone while the publisher was away) is
		// seen and removed. Until the marker is written, every write of
		// ours looks at it again.
		source.Kind(p.cache, &v1alpha1.PublishedExport{}, handler.TypedEventHandler[*v1alpha1.PublishedExport, reconcile.Request](partEvents{parts: p.own, enqueue: func(o *v1alpha1.PublishedExport) []reconcile.Request {
			if IsMarker(o) {
				return []reconcile.Request{markerRequest}
			}
			reqs := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.Spec.Namespace, Name: o.Spec.Name}}}
			if !p.markerDone.Load() {
				reqs = append(reqs, markerRequest)
			}
			return reqs
		}})),
	} {
		if err := c.Watch(src); err != nil {
			return nil, err
		}
	}
	p.controller = c
	return p, nil
}

// followReaders enqueues every export of the member, until ctx ends, each
// time opts.Readers says otherwise than before, as opts.ReadersChanged
// tells. What it says when the controller starts is taken before any
// export is reconciled, so no change is missed.
func (p *Publisher) followReaders(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	if p.opts.Readers == nil {
		return nil
	}
	said := func() string {
		wholeOnly, settled := p.opts.Readers()
		slices.Sort(wholeOnly)
		return fmt.Sprint(settled, wholeOnly)
	}
	changed := p.opts.ReadersChanged() // before the read: a change after it closes this
	last := said()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
			changed = p.opts.ReadersChanged()
			if now := said(); now != last {
				last = now
				for _, key := range p.opts.Store.Keys() {
					if p.mine(key) != nil {
						q.Add(reconcile.Request{NamespacedName: key})
					}
				}
			}
		}
	}()
	return nil
}

// Start runs the publisher until ctx ends, once its cache has synced
// (however long that takes: a hub that does not answer delays the
// publications, it is no error of the member's).
func (p *Publisher) Start(ctx context.Context) error {
	if !p.cache.WaitForCacheSync(ctx) {
		return nil
	}
	p.synced.Store(true)
	return p.controller.Start(ctx)
}

// Reconcile publishes, updates or withdraws the publication of one export,
// or writes the marker. A write that fails for more than a race is
// recorded: the export's in the Feedback (its Ready condition says so),
// the marker's in Problem (/readyz) and in the Feedback (every export's
// Ready condition).
func (p *Publisher) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req == markerRequest {
		res, err := p.syncMarker(ctx)
		why := ""
		if err != nil {
			why = err.Error()
		}
		p.problem.Store(&why)
		p.opts.Feedback.SetUnheard(why)
		return res, err
	}
	res, why, err := p.sync(ctx, req.NamespacedName)
	if err != nil {
		why = err.Error()
	}
	p.opts.Feedback.SetUnpublished(req.NamespacedName, why)
	return res, err
}

// Problem says why the member's marker could not be written or renewed,
// or that the publication server has not been read yet; "" when the
// marker last was written.
func (p *Publisher) Problem() string {
	if why := p.problem.Load(); why != nil {
		return *why
	}
	if !p.synced.Load() {
		return "the publication server has not been read yet (its cache has not synced)"
	}
	return ""
}

// partialViewRecheck is how soon a withdrawal or the marker is looked at
// again while the member's exports are not all in the Store (its first
// pass is under way; the Store announces its end, this is the fallback).
const partialViewRecheck = time.Second

// mine is the member's own export of key: one of up to a thousand (Get
// sorted them all, on every reconcile: make bench-scale).
func (p *Publisher) mine(key types.NamespacedName) *clusterset.ExportedService {
	return p.opts.Store.GetFrom(key, p.opts.Cluster)
}

// sync publishes, updates or withdraws the publication of key; refused
// says why an export was not published although nothing failed (an
// object of it would be too large, or the readers would refuse it).
func (p *Publisher) sync(ctx context.Context, key types.NamespacedName) (res reconcile.Result, refused string, err error) {
	// Whether the member's exports are all in the Store, read before its
	// export: read after, a first pass that ended in between would make
	// an export not yet put look withdrawn (clusterset.Store.ExportsOf).
	synced := p.opts.Store.Synced(p.opts.Cluster)
	mine := p.mine(key)
	name := types.NamespacedName{Namespace: p.opts.Namespace, Name: ObjectName(p.opts.Cluster, key)}
	head := &v1alpha1.PublishedExport{}
	err = p.client.Get(ctx, name, head)
	switch {
	case apierrors.IsNotFound(err):
		head = nil
	case err != nil:
		return reconcile.Result{}, "", fmt.Errorf("get publication %s: %w", name, err)
	}
	if head != nil && mine != nil {
		// Ordered here as the readers order it (clusterset.ExportedService.Age).
		p.opts.Store.SawFirst(p.opts.Cluster, key, head.CreationTimestamp)
	}
	parts := p.own.of(key)
	if mine == nil {
		if !synced && (head != nil || len(parts) > 0) {
			return reconcile.Result{RequeueAfter: partialViewRecheck}, "", nil // never withdraw on a partial view
		}
		p.memos.forget(key)
		res, err := p.withdraw(ctx, name, head, parts)
		return res, "", err
	}
	want, plan, inParts, refused, ok := p.prepare(mine, parts)
	switch {
	case !ok:
		return reconcile.Result{RequeueAfter: partialViewRecheck}, "", nil
	case refused != "":
		return reconcile.Result{}, refused, nil
	}
	res, err = p.write(ctx, name, head, want, plan, inParts)
	if err == nil && (!plan.empty() || head == nil) {
		// What a publisher writes: with the importers' "Imported
		// EndpointSlices written", -v=2 tells where a change's time went.
		log.FromContext(ctx).V(2).Info("Publication written", "publication", name, "endpoints", mine.EndpointCount(),
			"created", head == nil, "partsCreated", len(plan.create), "partsUpdated", len(plan.update), "partsRemoved", len(plan.remove))
	}
	return res, "", err
}
