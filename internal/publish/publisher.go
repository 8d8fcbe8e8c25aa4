package publish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/equality"
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
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
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

// prepare plans the publication of mine over its existing parts (plan),
// and says why it is refused, if it is, from what it would write alone:
// the head and the parts written, never the parts left as they are (a
// change of one endpoint is checked as one part, whatever the export's
// size).
func (p *Publisher) prepare(mine *clusterset.ExportedService, parts []*v1alpha1.PublishedExport) (want *v1alpha1.PublishedExport, plan partPlan, inParts bool, refused string, ok bool) {
	want, plan, inParts, whyWhole, ok := p.plan(mine, parts)
	if !ok {
		return nil, partPlan{}, false, "", false
	}
	if err := checkWrites(want, plan); err != nil {
		// The readers check what they read as this does: an export they
		// would refuse is never Ready=True here (a Service name that the
		// readers' rules once refused was).
		return want, plan, inParts, "the other members would refuse its publication: " + err.Error(), true
	}
	return want, plan, inParts, oversized(mine, want, plan, whyWhole), true
}

// checkWrites checks the head and the parts that plan writes as readers
// will (Decode, DecodePart).
func checkWrites(head *v1alpha1.PublishedExport, plan partPlan) error {
	if _, err := Decode(head); err != nil {
		return err
	}
	for _, part := range append(slices.Clip(plan.create), plan.update...) {
		if _, err := DecodePart(part); err != nil {
			return fmt.Errorf("part %s: %w", part.Spec.Part, err)
		}
	}
	return nil
}

// withdraw removes a publication (head first: a reader withdraws the
// export with it, and holds parts that have no head) and its parts.
func (p *Publisher) withdraw(ctx context.Context, name types.NamespacedName, head *v1alpha1.PublishedExport, parts []*v1alpha1.PublishedExport) (reconcile.Result, error) {
	if head == nil && len(parts) == 0 {
		return reconcile.Result{}, nil
	}
	if head != nil {
		if err := p.remove(ctx, head); err != nil {
			return retry(ctx, fmt.Errorf("withdraw publication %s: %w", name, err))
		}
	}
	for _, part := range parts {
		if err := p.remove(ctx, part); err != nil {
			return retry(ctx, fmt.Errorf("withdraw part %s: %w", part.Name, err))
		}
	}
	log.FromContext(ctx).V(2).Info("Publication withdrawn", "publication", name, "parts", len(parts))
	return reconcile.Result{}, nil
}

// oversized says why a publication cannot be written ("" when every
// object it writes fits): what was published before, if anything, stays,
// so the others keep the endpoints they had, and the condition says why
// no more.
func oversized(mine *clusterset.ExportedService, want *v1alpha1.PublishedExport, plan partPlan, whyWhole string) string {
	for _, o := range append(append([]*v1alpha1.PublishedExport{want}, plan.create...), plan.update...) {
		if size := encodedSize(o); size > MaxPublicationBytes {
			return fmt.Sprintf("its publication's object %s would take %d bytes (%d endpoints in the export), over the %d bytes that one object may take%s; "+
				"the other members keep what was published before, if anything", o.Name, size, mine.EndpointCount(), MaxPublicationBytes, whyWhole)
		}
	}
	return ""
}

// write writes a publication's plan: additions before the head, removals
// after it, so that a reader holds every endpoint that stays at every
// moment. A part that the head names but someone else deleted is written
// again last of all parts: a reader keeps what it held until then (and
// lets go of it when it reads the part again), so every endpoint moved out
// of it must be in another part first. inParts says the head carries no
// endpoints of its own.
func (p *Publisher) write(ctx context.Context, name types.NamespacedName, head, want *v1alpha1.PublishedExport, plan partPlan, inParts bool) (reconcile.Result, error) {
	update := func(part *v1alpha1.PublishedExport) error { return p.client.Update(ctx, part) }
	if part, err := writeEach(plan.update, update); err != nil {
		return retry(ctx, fmt.Errorf("update part %s: %w", part.Name, err))
	}
	var named []string
	if head != nil {
		named = head.Spec.Parts
	}
	create := func(part *v1alpha1.PublishedExport) error { return p.client.Create(ctx, part) }
	for _, again := range []bool{false, true} {
		round := slices.DeleteFunc(slices.Clone(plan.create), func(part *v1alpha1.PublishedExport) bool {
			return slices.Contains(named, part.Spec.Part) != again
		})
		if part, err := writeEach(round, create); err != nil {
			return p.createFailed(ctx, part, err)
		}
	}
	switch {
	case head == nil:
		if err := p.client.Create(ctx, want); err != nil {
			return p.createFailed(ctx, want, err)
		}
	case !headCurrent(head, want, plan, inParts):
		want.ResourceVersion, want.UID = head.ResourceVersion, head.UID
		if err := p.client.Update(ctx, want); err != nil {
			return retry(ctx, fmt.Errorf("update publication %s: %w", name, err))
		}
		if head.Spec.ExportCreated.Before(&want.Spec.ExportCreated) {
			p.warnBackdated(ctx, head, want)
		}
	}
	remove := func(part *v1alpha1.PublishedExport) error { return p.remove(ctx, part) }
	if part, err := writeEach(plan.remove, remove); err != nil {
		return retry(ctx, fmt.Errorf("remove part %s: %w", part.Name, err))
	}
	return reconcile.Result{}, nil
}

// concurrentWrites is how many parts of a publication the publisher
// writes at once: a publication of 50,000 endpoints is 500 parts, which
// one at a time took 500 round trips to the hub in a row (issue 56). The
// hub's Priority and Fairness queues what it cannot take at once.
const concurrentWrites = 8

// writeEach writes every part, up to concurrentWrites at once, and
// returns when all writes have returned: the first part, in parts' order,
// whose write failed, with its error (nil if none did), so that a
// refusal reads the same from one try to the next. The writes of one call
// are of parts that no reader needs in any order; what must come first
// (additions before the head, the head before removals) is written by
// separate calls.
func writeEach(parts []*v1alpha1.PublishedExport, write func(*v1alpha1.PublishedExport) error) (*v1alpha1.PublishedExport, error) {
	errs := make([]error, len(parts))
	var g errgroup.Group
	g.SetLimit(concurrentWrites)
	for i, part := range parts {
		g.Go(func() error {
			errs[i] = write(part)
			return nil
		})
	}
	_ = g.Wait() // the errors are in errs, in order
	for i, err := range errs {
		if err != nil {
			return parts[i], err
		}
	}
	return nil, nil
}

// warnBackdated says that the head it replaced claimed an export time
// before the ServiceExport existed. mcs-syncer never writes that: the
// head was left from an earlier ServiceExport of the same name, or
// written by another holder of the member's identity, which is worth an
// administrator's look (precedence never trusted it: readers order by the
// later of it and when the publication server first saw the head).
func (p *Publisher) warnBackdated(ctx context.Context, head, want *v1alpha1.PublishedExport) {
	key := types.NamespacedName{Namespace: want.Spec.Namespace, Name: want.Spec.Name}
	msg := fmt.Sprintf("the publication %s said the export was created at %s, before this ServiceExport was (%s); rewritten. "+
		"Left from an earlier ServiceExport of the same name, or written by another holder of this member's identity (docs/security.md: rotate it). "+
		"Exports are ordered by when the publication server first saw them, so the earlier time won no conflict",
		head.Name, head.Spec.ExportCreated.UTC().Format(time.RFC3339), want.Spec.ExportCreated.UTC().Format(time.RFC3339))
	log.FromContext(ctx).Info("Backdated publication rewritten", "publication", head.Name, "exportCreated", head.Spec.ExportCreated.UTC(), "serviceExportCreated", want.Spec.ExportCreated.UTC())
	if p.opts.Warn != nil {
		p.opts.Warn(ctx, key, ReasonPublicationRewritten, msg)
	}
}

// plan returns the head to publish of mine and what makes its parts
// (existing) hold its endpoints: in parts (inParts), or whole, when it
// fits in one part (wholeFits) or while a reader reads only that
// (whyWhole then says so, for a refusal's message). ok is false while
// the readers are not settled: a publisher that has not heard every
// member yet would take an older reader for a newer one.
func (p *Publisher) plan(mine *clusterset.ExportedService, existing []*v1alpha1.PublishedExport) (head *v1alpha1.PublishedExport, plan partPlan, inParts bool, whyWhole string, ok bool) {
	var wholeOnly []clusterset.ClusterID
	if p.opts.Readers != nil {
		var settled bool
		if wholeOnly, settled = p.opts.Readers(); !settled {
			return nil, partPlan{}, false, "", false
		}
	}
	if len(wholeOnly) > 0 {
		slices.Sort(wholeOnly)
		whyWhole = fmt.Sprintf(" (published whole, not in parts, while %s reads whole publications only: upgrade its mcs-syncer)", strings.Join(idStrings(wholeOnly), ", "))
	}
	if whyWhole != "" || wholeFits(mine.EndpointCount(), len(existing), p.maxPerPart()) {
		p.memos.forget(mine.Key)
		whole := *mine
		whole.Endpoints = reconciler.JoinRuns(mine.Endpoints) // one group per key, as every reader's version reads it
		return Encode(&whole, p.opts.Namespace), partPlan{remove: existing}, false, whyWhole, true
	}
	trigger := formatTriggerTime(mine.LastChangeTriggerTime)
	if m := p.memos.of(mine.Key, mine.Endpoints); m != nil {
		plan = m.plan(p.opts.Cluster, mine.Key, p.opts.Namespace, trigger, mine.Endpoints, existing, p.maxPerPart())
	} else {
		plan = planParts(p.opts.Cluster, mine.Key, p.opts.Namespace, trigger, mine.Endpoints, existing, p.maxPerPart())
	}
	head = EncodeHead(mine, p.opts.Namespace)
	head.Spec.Parts = plan.ids
	return head, plan, true, "", true
}

// allPublished reports whether heads and parts (the member's publications,
// parts by export) are every export of the Store as published, and how
// many exports that is. An export not withdrawn yet, or not written yet,
// and parts of no export all say no.
func (p *Publisher) allPublished(heads []*v1alpha1.PublishedExport, parts map[types.NamespacedName][]*v1alpha1.PublishedExport) (published int, all bool) {
	headless := maps.Clone(parts)
	for _, head := range heads {
		key := types.NamespacedName{Namespace: head.Spec.Namespace, Name: head.Spec.Name}
		mine := p.mine(key)
		if mine == nil {
			return published, false
		}
		want, plan, inParts, _, ok := p.plan(mine, parts[key])
		if !ok || !plan.empty() || !headCurrent(head, want, plan, inParts) {
			return published, false
		}
		delete(headless, key)
		published++
	}
	return published, len(headless) == 0 && published == p.opts.Store.Count(p.opts.Cluster)
}

// headCurrent reports whether head already says what want says. In parts
// (inParts), a part written for a change carries its trigger time, so the
// head is not rewritten for its trigger time alone, unless no part
// carries it: plan only removes parts.
func headCurrent(head, want *v1alpha1.PublishedExport, plan partPlan, inParts bool) bool {
	if !equality.Semantic.DeepEqual(head.Labels, want.Labels) {
		return false
	}
	spec := want.Spec
	if inParts && (len(plan.remove) == 0 || len(plan.create)+len(plan.update) > 0) {
		spec.LastChangeTriggerTime = head.Spec.LastChangeTriggerTime
	}
	return equality.Semantic.DeepEqual(head.Spec, spec)
}

func idStrings(ids []clusterset.ClusterID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(id)
	}
	return out
}

// maxPerPart is opts.MaxEndpointsPerPart, or its default.
func (p *Publisher) maxPerPart() int {
	if p.opts.MaxEndpointsPerPart <= 0 {
		return DefaultMaxEndpointsPerPart
	}
	return p.opts.MaxEndpointsPerPart
}

// remove deletes one object of the member's publications, as it was read.
func (p *Publisher) remove(ctx context.Context, o *v1alpha1.PublishedExport) error {
	err := p.client.Delete(ctx, o, client.Preconditions{UID: &o.UID, ResourceVersion: &o.ResourceVersion})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// createFailed handles a create of a head or part that failed.
func (p *Publisher) createFailed(ctx context.Context, o *v1alpha1.PublishedExport, err error) (reconcile.Result, error) {
	if apierrors.IsAlreadyExists(err) {
		return p.inTheWay(ctx, types.NamespacedName{Namespace: o.Namespace, Name: o.Name})
	}
	return retry(ctx, fmt.Errorf("publish %s: %w", o.Name, err))
}

// encodedSize is the size of a publication as JSON, as the API server
// stores it. A head's part IDs (500 at 50,000 endpoints) are counted, not
// encoded: they are DNS labels, which JSON takes as they are (encoding
// them was a fifth of the publisher's work for one endpoint's change).
func encodedSize(p *v1alpha1.PublishedExport) int {
	if len(p.Spec.Parts) > 0 && !slices.ContainsFunc(p.Spec.Parts, func(id string) bool { return !isDNSLabel(id) }) {
		withoutIDs := *p
		withoutIDs.Spec.Parts = nil
		// ,"parts":["1","2"]: the key, brackets, and each ID quoted, after
		// a comma but the first.
		size := len(`,"parts":[]`) + len(p.Spec.Parts) - 1
		for _, id := range p.Spec.Parts {
			size += len(id) + 2
		}
		return encodedSize(&withoutIDs) + size
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return 0
	}
	return len(raw)
}

// retry turns a write that lost a race (or a shutdown) into a short
// requeue, and returns other errors for the controller's backoff.
func retry(ctx context.Context, err error) (reconcile.Result, error) {
	if after, routine := plumbing.Routine(ctx, err); routine {
		return reconcile.Result{RequeueAfter: after}, nil
	}
	return reconcile.Result{}, err
}

// inTheWay handles a create that found an object of the publication's
// name: our own create that the cache has not seen yet is looked at again
// once it has; an object that is not this member's publication (the cache
// never shows it: it selects ours) is an error that names it, retried
// with backoff, rather than a quiet requeue for ever.
func (p *Publisher) inTheWay(ctx context.Context, name types.NamespacedName) (reconcile.Result, error) {
	var there v1alpha1.PublishedExport
	if err := p.apiReader.Get(ctx, name, &there); err == nil && there.Labels[mcsv1beta1.LabelSourceCluster] != string(p.opts.Cluster) {
		return reconcile.Result{}, fmt.Errorf("publish %s: an object of that name is in the way, and it is not %s's publication (source-cluster label %q): remove it",
			name, p.opts.Cluster, there.Labels[mcsv1beta1.LabelSourceCluster])
	}
	return reconcile.Result{RequeueAfter: plumbing.ConflictRetry}, nil
}

// syncMarker writes the marker once every export of the member is
// published as it is in the Store and no stale publication is left; then
// it renews it every Heartbeat. What the cache shows is confirmed by a
// read of the publication server itself before the marker is written: a
// wiped hub deletes the marker first, and a cache that has seen that
// deletion but not yet its publications' would bring the marker back
// before them, and readers would then withdraw an export whose head they
// saw deleted (CI: an import withdrawn and created again with a new
// clusterset IP, the hub rebuilt under load).
func (p *Publisher) syncMarker(ctx context.Context) (reconcile.Result, error) {
	if p.markerDone.Load() {
		return p.renewMarker(ctx)
	}
	if !p.opts.Store.Synced(p.opts.Cluster) {
		return reconcile.Result{RequeueAfter: partialViewRecheck}, nil
	}
	published, all, marked, err := p.publishedIn(ctx, p.client)
	switch {
	case err != nil:
		return reconcile.Result{}, err
	case marked:
		p.markerDone.Store(true)
		return p.renewMarker(ctx) // written by an earlier run, or just now
	case !all:
		return reconcile.Result{}, nil // not there yet: the publications' next event looks again
	}
	if _, all, _, err = p.publishedIn(ctx, p.apiReader); err != nil {
		return reconcile.Result{}, err
	} else if !all {
		return reconcile.Result{RequeueAfter: partialViewRecheck}, nil // the cache is behind
	}
	now := p.now()
	if err := p.client.Create(ctx, markerAt(p.opts.Cluster, p.opts.Namespace, p.opts.Heartbeat, now)); err != nil && !apierrors.IsAlreadyExists(err) {
		return retry(ctx, fmt.Errorf("write the marker of %s: %w", p.opts.Cluster, err))
	} else if err == nil {
		p.renewedAt = now
	}
	log.FromContext(ctx).Info("Every export published", "cluster", p.opts.Cluster, "exports", published)
	p.markerDone.Store(true)
	return reconcile.Result{RequeueAfter: p.opts.Heartbeat}, nil
}

// publishedIn reads the member's publications through reader (the cache,
// or the publication server itself) and reports whether every export is
// published as the Store has it (allPublished), and whether the marker is
// there.
func (p *Publisher) publishedIn(ctx context.Context, reader client.Reader) (published int, all, marked bool, err error) {
	var list v1alpha1.PublishedExportList
	if err := reader.List(ctx, &list, client.InNamespace(p.opts.Namespace),
		client.MatchingLabels{mcsv1beta1.LabelSourceCluster: string(p.opts.Cluster)}); err != nil {
		return 0, false, false, fmt.Errorf("list publications: %w", err)
	}
	var heads []*v1alpha1.PublishedExport
	parts := map[types.NamespacedName][]*v1alpha1.PublishedExport{}
	for i := range list.Items {
		pub := &list.Items[i]
		if IsMarker(pub) {
			return 0, false, true, nil
		}
		key := types.NamespacedName{Namespace: pub.Spec.Namespace, Name: pub.Spec.Name}
		if IsPart(pub) {
			parts[key] = append(parts[key], pub)
		} else {
			heads = append(heads, pub)
		}
	}
	published, all = p.allPublished(heads, parts)
	return published, all, false, nil
}

// now is the time on the publisher's clock.
func (p *Publisher) now() time.Time {
	if p.clock == nil {
		return time.Now()
	}
	return p.clock.Now()
}

// renewMarker renews the marker once its renewal is due, and says when to
// look again. A marker that is gone (a wiped hub) is written anew, after
// every export is published again: the publications' own events (their
// deletion, seen by the cache) put them back.
//
// A renewal is due a heartbeat after this publisher's last one, on its own
// clock: the time the marker holds may have been written by another
// clock (a replica that led before, a clock step, a hand), and a time in
// the future once stopped the renewals for as long as it lay ahead, while
// every reader withdrew the member (docs/architecture.md, "Liveness").
// Only a publisher that has not renewed yet (just started) spares itself
// a write by the marker's time, and only for a time in the past less than
// a heartbeat ago.
func (p *Publisher) renewMarker(ctx context.Context) (reconcile.Result, error) {
	marker := &v1alpha1.PublishedExport{}
	err := p.client.Get(ctx, types.NamespacedName{Namespace: p.opts.Namespace, Name: MarkerName(p.opts.Cluster)}, marker)
	if apierrors.IsNotFound(err) {
		log.FromContext(ctx).Info("The marker is gone; it is written again once every export is published", "cluster", p.opts.Cluster)
		p.markerDone.Store(false)
		return reconcile.Result{RequeueAfter: partialViewRecheck}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("get the marker of %s: %w", p.opts.Cluster, err)
	}
	// A marker without readsParts was written by this member's mcs-syncer
	// before an upgrade: rewritten at once, or the others would publish
	// whole for it until its next renewal (or forever, without a
	// heartbeat).
	older := !marker.Spec.ReadsParts
	if p.opts.Heartbeat <= 0 && !older {
		return reconcile.Result{}, nil
	}
	now := p.now()
	last := p.renewedAt
	if last.IsZero() && marker.Spec.RenewTime != nil && !marker.Spec.RenewTime.After(now) {
		last = marker.Spec.RenewTime.Time
	}
	if due := p.opts.Heartbeat - now.Sub(last); !older && due > 0 && marker.Spec.RenewIntervalSeconds == intervalSeconds(p.opts.Heartbeat) {
		return reconcile.Result{RequeueAfter: due}, nil
	}
	renewed := markerAt(p.opts.Cluster, p.opts.Namespace, p.opts.Heartbeat, now)
	renewed.ResourceVersion, renewed.UID = marker.ResourceVersion, marker.UID
	if err := p.client.Update(ctx, renewed); err != nil {
		return retry(ctx, fmt.Errorf("renew the marker of %s: %w", p.opts.Cluster, err))
	}
	p.renewedAt = now
	if p.opts.Heartbeat <= 0 {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: p.opts.Heartbeat}, nil
}
