package publish

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/log"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// ReaderGroup is what the readers of one mcs-syncer share: their metrics,
// registered once, and the demultiplexers of the informers they read
// (demux). Two mcs-syncers in one process (two tests, say) have a group
// each, and share neither.
type ReaderGroup struct {
	// refused counts the publications a reader refused, by source
	// cluster; overLimit those it left out because their member holds its
	// limit already (ReaderOptions.MaxObjects, MaxBytes).
	refused, overLimit *prometheus.CounterVec

	mu sync.Mutex
	// demuxes are the demuxes in use, by cache (not by informer: a cache
	// limited to namespaces hands out a new wrapper of the same informers
	// on every GetInformer); one leaves with its last reader.
	demuxes map[any]*demux
}

// NewReaderGroup returns a group of readers with metrics of their own.
func NewReaderGroup() *ReaderGroup {
	return &ReaderGroup{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcs_syncer_publications_refused_total",
			Help: "Publications of another member that were refused because a field is invalid; their export is withdrawn until a valid one replaces it (the log says what was wrong).",
		}, []string{"source"}),
		overLimit: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcs_syncer_publications_over_limit_total",
			Help: "Publications (heads or parts) of another member left out because the reader already holds as many of that member's as --max-publications-per-member allows, or as many bytes as --max-publication-bytes-per-member does; the member's other exports keep being read.",
		}, []string{"source"}),
		demuxes: map[any]*demux{},
	}
}

// RegisterMetrics registers the group's metrics.
func (g *ReaderGroup) RegisterMetrics(reg prometheus.Registerer) error {
	return errors.Join(reg.Register(g.refused), reg.Register(g.overLimit))
}

// ReaderOptions configure a Reader.
type ReaderOptions struct {
	// Heartbeats hears what the reader sees of the member's marker (nil:
	// nobody).
	Heartbeats *Heartbeats
	// Namespaces are those the clusterset exports: a publication of
	// another is refused, whatever its member's export side did.
	Namespaces clusterset.NamespacePolicy
	// MaxObjects bounds the heads and parts the reader holds of its
	// member (0: DefaultMaxObjectsPerMember): a member's identity may
	// write any number into a hub, and every reader would hold them all.
	// A new one past it is left out, logged and counted
	// (mcs_syncer_publications_over_limit_total); what is held stays.
	MaxObjects int
	// MaxBytes bounds the bytes of those heads and parts, as JSON
	// (estimated: heldBytes), beside their number (0:
	// DefaultMaxBytesPerMember): within MaxObjects, a member could make
	// each of them as large as the API server takes (over 1 MiB). One that
	// is new or grows past it is left out as one past MaxObjects is (one
	// that grew: what it held goes too).
	MaxBytes int64
	// Group is what the reader shares with the other readers of its
	// mcs-syncer (nil: a group of its own, its metrics not registered).
	Group *ReaderGroup
}

// DefaultMaxObjectsPerMember is the most heads and parts a reader holds of
// one member unless set otherwise: 1,000 exports and 400,000 endpoints in
// parts of 100 fit; at the limit, a reader holds about 0.5 million
// endpoints of the member (docs/benchmarks.md, BenchmarkReaderAtLimit).
const DefaultMaxObjectsPerMember = 5000

// DefaultMaxBytesPerMember is the most bytes of heads and parts (as JSON,
// estimated) a reader holds of one member unless set otherwise: about
// twice what DefaultMaxObjectsPerMember heads and parts of 100 endpoints
// of a Pod each take (150 bytes an endpoint).
const DefaultMaxBytesPerMember = 128 << 20

// Reader puts one member's publications into the Store, read from a
// publication server through a cache set up with ConfigureCache: for that
// member alone (its own API server), or for every member (the hub, whose
// one informer the readers of all members share: see demux).
type Reader struct {
	group      *ReaderGroup
	cluster    clusterset.ClusterID
	store      *clusterset.Store
	heartbeats *Heartbeats
	cache      cache.Cache
	logger     logr.Logger
	// namespaces are those the clusterset exports: a publication of
	// another is refused, whatever its member's export side did.
	namespaces clusterset.NamespacePolicy
	// maxObjects and maxBytes bound held and bytes (below).
	maxObjects int
	maxBytes   int64

	mu sync.Mutex
	// held counts the heads and parts held, bytes their bytes (headBytes:
	// each head's, a Part its own); overflow names those left out for
	// maxObjects or maxBytes (and the export each is of), read again through
	// replay whenever one held is let go, and partsLeftOut counts the
	// parts left out of each export (ExportedService.PartsLeftOut).
	held         int
	bytes        int64
	overflow     map[string]types.NamespacedName
	partsLeftOut map[types.NamespacedName]int
	replay       func(names []string)
	// keys are the member's exports the reader put into the Store.
	keys map[types.NamespacedName]bool
	// heads are the member's valid heads, decoded; parts its valid parts,
	// decoded, by export and object name. An export is a head's
	// endpoints and its parts' (assemble).
	heads     map[types.NamespacedName]*clusterset.ExportedService
	headBytes map[types.NamespacedName]int64
	parts     map[types.NamespacedName]map[string]*Part
	// sorted are each export's parts in name order, kept while no part
	// comes or goes: sorting 500 names took most of a reader's work for
	// one endpoint's change of 50,000 (issue 56).
	sorted map[types.NamespacedName]*sortedParts
	// unions are what each export was assembled into last (union.go).
	unions map[types.NamespacedName]*union
	// firstSeen is the earliest creationTimestamp of each export's head
	// the reader has seen, kept while the reader lives, through a head's
	// deletion: a head created again (a wiped hub, whose deletions and
	// republications reach the reader in no set order) keeps the export's
	// place in conflicts. Keeping it past a real withdrawal gives a member
	// that exports the Service again no more than the place the reader saw
	// it hold before.
	firstSeen map[types.NamespacedName]metav1.Time
	// stale are the exports whose parts were removed in a first pass:
	// the Store keeps their endpoints until the member is synced again.
	stale map[types.NamespacedName]bool
	// listed says the informer's first list went through the handler;
	// marked that the Store was told the member is synced (since the
	// marker was last seen).
	markerSeen, listed, marked bool
	// removing are the heads and parts whose deletion waits RemovalDelay
	// before it withdraws anything, by object name: the deletion's
	// sequence number.
	removing map[string]uint64
	removals uint64
	// delay runs a removal after RemovalDelay (the tests' seam; nil:
	// time.AfterFunc).
	delay func(func())
	// leaving are parts deleted and written again before their removal
	// took effect, by export and name: what each held before, kept beside
	// what it holds now for RemovalDelay more. A publisher that re-creates
	// a deleted part may move one of its endpoints into another part in a
	// second write; without it, that endpoint left the import between the
	// two (issue 55: 999 → 998 → 999 ready).
	leaving map[types.NamespacedName]map[string]*Part
	// named are the parts that each held head names (spec.parts), by
	// object name; none for a head of an older publisher. vanished are
	// what parts it names held when they were deleted, by export and
	// name: imported with the rest until the head names them no more or
	// every part it names is read again (its publisher writes such a part
	// again after every other: Publisher.write). So a part deleted by
	// someone else takes no endpoint away, however long its publisher
	// takes to write it again (issue 55).
	named    map[types.NamespacedName]map[string]bool
	vanished map[types.NamespacedName]map[string]*Part
}

// RemovalDelay is how long a deleted publication waits before its export
// is withdrawn: when a hub is wiped (or every publication is deleted at
// once), the deletions reach the readers in no set order, and the
// marker's among them says that the member's publications are being
// rebuilt, not withdrawn. Half a second is far more than a burst of
// deletions takes to go through an informer, and little beside the
// seconds an unexported Service takes to leave the other clusters.
const RemovalDelay = 500 * time.Millisecond

// NewReader returns the Reader of member's publications in cl, registers
// its informer, and marks the member's exports in the Store as being read
// anew until the member's marker and the first list are in.
func NewReader(cl cluster.Cluster, member clusterset.ClusterID, store *clusterset.Store, opts ReaderOptions) (*Reader, error) {
	r := newReader(member, store, opts.Heartbeats, cl.GetCache())
	r.namespaces = opts.Namespaces
	if opts.Group != nil {
		r.group = opts.Group
	}
	if opts.MaxObjects > 0 {
		r.maxObjects = opts.MaxObjects
	}
	if opts.MaxBytes > 0 {
		r.maxBytes = opts.MaxBytes
	}
	if _, err := r.cache.GetInformer(context.Background(), &v1alpha1.PublishedExport{}, cache.BlockUntilSynced(false)); err != nil {
		return nil, fmt.Errorf("informer of publications: %w", err)
	}
	store.BeginResync(member)
	return r, nil
}

func newReader(member clusterset.ClusterID, store *clusterset.Store, heartbeats *Heartbeats, c cache.Cache) *Reader {
	return &Reader{group: NewReaderGroup(), cluster: member, store: store, heartbeats: heartbeats, cache: c, logger: logr.Discard(),
		keys: map[types.NamespacedName]bool{}, heads: map[types.NamespacedName]*clusterset.ExportedService{}, unions: map[types.NamespacedName]*union{}, headBytes: map[types.NamespacedName]int64{},
		named: map[types.NamespacedName]map[string]bool{}, vanished: map[types.NamespacedName]map[string]*Part{},
		parts: map[types.NamespacedName]map[string]*Part{}, sorted: map[types.NamespacedName]*sortedParts{}, stale: map[types.NamespacedName]bool{},
		firstSeen: map[types.NamespacedName]metav1.Time{}, maxObjects: DefaultMaxObjectsPerMember, maxBytes: DefaultMaxBytesPerMember}
}

// admit reports whether the reader may hold pub of key, new or already
// held, within maxObjects and maxBytes, and its bytes (heldBytes). One left
// out is remembered in overflow, counted once and logged when the member
// first goes over; one held that grew past maxBytes is let go of (a head
// withdraws its export); a part left out makes its export incomplete
// (assembled again to say so). r.mu must be held.
func (r *Reader) admit(key types.NamespacedName, pub *v1alpha1.PublishedExport) (int64, bool) {
	var was bool
	var old int64
	if IsPart(pub) {
		var held *Part
		if held, was = r.parts[key][pub.Name]; was {
			old = held.bytes
		}
	} else {
		old, was = r.headBytes[key]
	}
	size := heldBytes(pub)
	if r.bytes-old+size <= r.maxBytes && (was || r.held < r.maxObjects) {
		if !was {
			r.held++
		}
		r.bytes += size - old
		r.forgetLeftOut(pub.Name)
		return size, true
	}
	if was && IsPart(pub) {
		r.dropPart(key, pub.Name)
	} else if was {
		r.withdraw(key)
	}
	if _, known := r.overflow[pub.Name]; known {
		return 0, false
	}
	r.group.overLimit.WithLabelValues(string(r.cluster)).Inc()
	if len(r.overflow) == 0 {
		r.logger.Error(nil, "The member publishes more than this reader holds of one member: what is over is left out until there is room (--max-publications-per-member, --max-publication-bytes-per-member)",
			"limit", r.maxObjects, "bytesLimit", r.maxBytes, "publication", pub.Namespace+"/"+pub.Name)
	}
	if r.overflow == nil {
		r.overflow, r.partsLeftOut = map[string]types.NamespacedName{}, map[types.NamespacedName]int{}
	}
	r.overflow[pub.Name] = key
	r.heartbeats.setLeftOut(r.cluster, len(r.overflow))
	if IsPart(pub) {
		r.partsLeftOut[key]++
		r.assemble(key)
	}
	return 0, false
}

// forgetLeftOut forgets that publication name was left out for the limit
// (it is held now, or gone), and reports whether it was a part whose
// export is now one part less incomplete. r.mu must be held.
func (r *Reader) forgetLeftOut(name string) bool {
	key, ok := r.overflow[name]
	if !ok {
		return false
	}
	delete(r.overflow, name)
	r.heartbeats.setLeftOut(r.cluster, len(r.overflow))
	if r.partsLeftOut[key] == 0 {
		return false
	}
	if r.partsLeftOut[key]--; r.partsLeftOut[key] == 0 {
		delete(r.partsLeftOut, key)
	}
	return true
}

// release records that a held head or part of size bytes is no longer
// held, and has what was left out for the limit read again. r.mu must be
// held.
func (r *Reader) release(size int64) {
	r.held--
	r.bytes -= size
	if len(r.overflow) == 0 || r.replay == nil {
		return
	}
	names := slices.Sorted(maps.Keys(r.overflow))
	// Not under r.mu: the demux takes its lock before the reader's.
	go r.replay(names)
}

// sawFirst records that a head of key created at created was seen, and
// returns the earliest such time; r.mu must be held. What it remembers is
// bounded: past twice maxObjects keys, those without a head now are
// forgotten (a member that publishes ever new names costs no more).
func (r *Reader) sawFirst(key types.NamespacedName, created metav1.Time) metav1.Time {
	if was, ok := r.firstSeen[key]; ok && (created.IsZero() || was.Before(&created)) {
		return was
	}
	if len(r.firstSeen) >= 2*r.maxObjects {
		maps.DeleteFunc(r.firstSeen, func(k types.NamespacedName, _ metav1.Time) bool { return r.heads[k] == nil })
	}
	r.firstSeen[key] = created
	return created
}

// Start feeds the Store until ctx ends.
func (r *Reader) Start(ctx context.Context) error {
	inf, err := r.cache.GetInformer(ctx, &v1alpha1.PublishedExport{})
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.logger = log.FromContext(ctx).WithValues("cluster", r.cluster)
	r.mu.Unlock()
	d, err := r.group.attach(r.cache, inf, r)
	if err != nil {
		return err
	}
	defer d.detach(r)
	if !toolscache.WaitForCacheSync(ctx.Done(), d.reg.HasSynced) {
		return nil
	}
	r.mu.Lock()
	r.listed = true
	r.markSyncedLocked()
	// An earlier reader of the member may have left out what this one holds.
	r.heartbeats.setLeftOut(r.cluster, len(r.overflow))
	r.mu.Unlock()
	r.heartbeats.markListed(r.cluster)
	<-ctx.Done()
	return nil
}

// demux is the one event handler of an informer of publications, shared by
// the readers of every member read through it: it hands each publication
// to the reader of the cluster its source-cluster label names, and keeps
// what it saw of every cluster for a reader that comes later. Through a hub
// of 255 members, a process holds one watch and one handler (with one
// buffer of pending events) rather than 254 of each: 254 watches per
// importer left the hub unable to keep up (make bench-scale).
type demux struct {
	group *ReaderGroup
	owner any
	inf   cache.Informer
	reg   toolscache.ResourceEventHandlerRegistration

	mu      sync.Mutex
	readers map[clusterset.ClusterID]*Reader
	// seen holds each cluster's publications, by object name.
	seen map[clusterset.ClusterID]map[string]*v1alpha1.PublishedExport
}

// attach hands r the publications of its cluster from inf, the informer
// of cache owner: those seen so far at once, then every change.
func (g *ReaderGroup) attach(owner any, inf cache.Informer, r *Reader) (*demux, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	d := g.demuxes[owner]
	if d == nil {
		d = &demux{group: g, owner: owner, inf: inf, readers: map[clusterset.ClusterID]*Reader{}, seen: map[clusterset.ClusterID]map[string]*v1alpha1.PublishedExport{}}
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(o any) { d.put(o) },
			UpdateFunc: func(old, o any) {
				if sourceOf(old) != sourceOf(o) {
					d.remove(old)
				}
				d.put(o)
			},
			DeleteFunc: d.remove,
		})
		if err != nil {
			return nil, err
		}
		d.reg = reg
		g.demuxes[owner] = d
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.readers[r.cluster] = r
	r.mu.Lock()
	r.replay = func(names []string) { d.replay(r, names) }
	r.mu.Unlock()
	for _, pub := range d.seen[r.cluster] {
		r.put(pub)
	}
	return d, nil
}

// replay hands r again the publications named that it left out for its
// limit (ReaderOptions.MaxObjects), as the demux holds them now.
func (d *demux) replay(r *Reader, names []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.readers[r.cluster] != r {
		return
	}
	for _, name := range names {
		if pub := d.seen[r.cluster][name]; pub != nil {
			r.put(pub)
		}
	}
}

// detach stops handing r publications; the last reader to leave removes
// the handler.
func (d *demux) detach(r *Reader) {
	d.group.mu.Lock()
	defer d.group.mu.Unlock()
	d.mu.Lock()
	if d.readers[r.cluster] == r {
		delete(d.readers, r.cluster)
	}
	last := len(d.readers) == 0
	d.mu.Unlock()
	if last {
		delete(d.group.demuxes, d.owner)
		_ = d.inf.RemoveEventHandler(d.reg)
	}
}

func (d *demux) put(o any) {
	pub, ok := o.(*v1alpha1.PublishedExport)
	if !ok {
		return
	}
	id := sourceOf(pub)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen[id] == nil {
		d.seen[id] = map[string]*v1alpha1.PublishedExport{}
	}
	d.seen[id][pub.Name] = pub
	if r := d.readers[id]; r != nil {
		r.put(pub)
	}
}

func (d *demux) remove(o any) {
	if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	pub, ok := o.(*v1alpha1.PublishedExport)
	if !ok {
		return
	}
	id := sourceOf(pub)
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.seen[id], pub.Name)
	if len(d.seen[id]) == 0 {
		delete(d.seen, id)
	}
	if r := d.readers[id]; r != nil {
		r.remove(pub)
	}
}

// sourceOf is the cluster a publication's source-cluster label names: the
// reader it goes to, which then checks that its spec says the same.
func sourceOf(o any) clusterset.ClusterID {
	if pub, ok := o.(*v1alpha1.PublishedExport); ok {
		return clusterset.ClusterID(pub.Labels[mcsv1beta1.LabelSourceCluster])
	}
	return ""
}

func (r *Reader) put(pub *v1alpha1.PublishedExport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if IsMarker(pub) {
		if pub.Spec.Cluster == string(r.cluster) {
			r.heartbeats.observe(r.cluster, pub, time.Now())
			r.markerSeen = true
			r.markSyncedLocked()
		}
		return
	}
	key := types.NamespacedName{Namespace: pub.Spec.Namespace, Name: pub.Spec.Name}
	if _, pending := r.removing[pub.Name]; pending && IsPart(pub) {
		r.keepLeaving(key, pub.Name)
	}
	delete(r.removing, pub.Name) // back before its removal took effect
	if IsPart(pub) {
		r.putPart(key, pub)
		return
	}
	es, err := Decode(pub)
	if err == nil && es.Cluster != r.cluster {
		err = fmt.Errorf("published as %s, read from the publications of %s", es.Cluster, r.cluster)
	}
	if why := r.namespaces.Refuses(key.Namespace); err == nil && why != "" {
		err = fmt.Errorf("%s: %s", clusterset.ReasonRestrictedNamespace, why)
	}
	if err != nil {
		r.refuse(err, pub)
		r.withdraw(key)
		return
	}
	size, ok := r.admit(key, pub)
	if !ok {
		return
	}
	r.headBytes[key] = size
	// The order of conflicts trusts the publication server's clock, not
	// the member's claim alone (clusterset.ExportedService.Age).
	es.FirstSeen = r.sawFirst(key, pub.CreationTimestamp)
	r.heads[key] = es
	r.keys[key] = true
	r.name(key, pub.Spec.Parts)
	r.assemble(key)
}

// name records the parts (IDs) that key's head names, and lets go of what
// vanished parts held that it names no more, or of all of them once it
// holds every part named. r.mu must be held.
func (r *Reader) name(key types.NamespacedName, ids []string) {
	if len(ids) == 0 {
		delete(r.named, key)
	} else {
		names := make(map[string]bool, len(ids))
		for _, id := range ids {
			names[PartName(r.cluster, key, id)] = true
		}
		r.named[key] = names
	}
	for name := range r.vanished[key] {
		if !r.named[key][name] {
			r.letGo(key, name)
		}
	}
	r.settle(key)
}

// settle lets go of what key's vanished parts held once every part its
// head names is held again (or left out for the limit: it would never
// be). r.mu must be held.
func (r *Reader) settle(key types.NamespacedName) {
	if len(r.vanished[key]) == 0 {
		return
	}
	for name := range r.named[key] {
		if _, held := r.parts[key][name]; !held {
			if _, over := r.overflow[name]; !over {
				return
			}
		}
	}
	for name := range r.vanished[key] {
		r.letGo(key, name)
	}
}

// vanish keeps what part name of key held, deleted while its head names
// it, still counted, until the head lets go of it (name, settle): no
// delay, the head says it is not withdrawn. Deleted again before that, it
// keeps what it held first, which the head's last complete view had.
// r.mu must be held.
func (r *Reader) vanish(key types.NamespacedName, name string, held *Part) {
	delete(r.parts[key], name)
	delete(r.sorted, key)
	if len(r.parts[key]) == 0 {
		delete(r.parts, key)
	}
	if r.vanished[key] == nil {
		r.vanished[key] = map[string]*Part{}
	}
	if _, already := r.vanished[key][name]; already {
		r.release(held.bytes)
		return
	}
	r.vanished[key][name] = held
}

// letGo forgets what vanished part name of key held. r.mu must be held.
func (r *Reader) letGo(key types.NamespacedName, name string) {
	part, ok := r.vanished[key][name]
	if !ok {
		return
	}
	delete(r.vanished[key], name)
	if len(r.vanished[key]) == 0 {
		delete(r.vanished, key)
	}
	r.release(part.bytes)
}

// putPart takes a part of key's publication; r.mu must be held.
func (r *Reader) putPart(key types.NamespacedName, pub *v1alpha1.PublishedExport) {
	part, err := DecodePart(pub)
	if err == nil && part.Cluster != r.cluster {
		err = fmt.Errorf("published as %s, read from the publications of %s", part.Cluster, r.cluster)
	}
	if err != nil {
		r.refuse(err, pub)
		if r.dropPart(key, pub.Name) {
			r.assemble(key)
		}
		return
	}
	size, ok := r.admit(key, pub)
	if !ok {
		return
	}
	part.bytes = size
	if r.parts[key] == nil {
		r.parts[key] = map[string]*Part{}
	}
	r.parts[key][pub.Name] = part
	at := r.sorted[key].replace(pub.Name, part)
	if at < 0 {
		delete(r.sorted, key) // a part that came: sorted again when assembled
	}
	r.settle(key)
	r.assembleAfter(key, at)
}

// keepLeaving keeps what part name of key held, deleted and about to be
// written again, for RemovalDelay more (Reader.leaving); r.mu must be
// held.
func (r *Reader) keepLeaving(key types.NamespacedName, name string) {
	old := r.parts[key][name]
	if old == nil {
		return
	}
	if r.leaving == nil {
		r.leaving = map[types.NamespacedName]map[string]*Part{}
	}
	if r.leaving[key] == nil {
		r.leaving[key] = map[string]*Part{}
	}
	r.leaving[key][name] = old
	later := func() { r.left(key, name, old) }
	if r.delay != nil {
		r.delay(later)
	} else {
		time.AfterFunc(RemovalDelay, later)
	}
}

// left lets go of what part name of key held before it was deleted and
// written again (keepLeaving), unless a later deletion kept another.
func (r *Reader) left(key types.NamespacedName, name string, old *Part) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leaving[key][name] != old {
		return
	}
	delete(r.leaving[key], name)
	if len(r.leaving[key]) == 0 {
		delete(r.leaving, key)
	}
	r.assemble(key)
}

// dropHead forgets key's head, if held, and what its vanished parts
// held; r.mu must be held.
func (r *Reader) dropHead(key types.NamespacedName) {
	delete(r.unions, key)
	if _, ok := r.heads[key]; ok {
		delete(r.heads, key)
		r.release(r.headBytes[key])
		delete(r.headBytes, key)
	}
	r.name(key, nil)
}

// withdraw forgets key's head and withdraws its export from the Store;
// r.mu must be held.
func (r *Reader) withdraw(key types.NamespacedName) {
	r.dropHead(key)
	if r.keys[key] {
		delete(r.keys, key)
		r.store.Delete(r.cluster, key)
	}
}

// dropPart forgets part name of key, if held, and reports whether it was;
// r.mu must be held.
func (r *Reader) dropPart(key types.NamespacedName, name string) bool {
	part, ok := r.parts[key][name]
	if !ok {
		return false
	}
	delete(r.parts[key], name)
	delete(r.sorted, key)
	if len(r.parts[key]) == 0 {
		delete(r.parts, key)
	}
	r.release(part.bytes)
	return true
}

func (r *Reader) refuse(err error, pub *v1alpha1.PublishedExport) {
	r.group.refused.WithLabelValues(string(r.cluster)).Inc()
	r.logger.Error(err, "Publication refused; what it carried is withdrawn until a valid one replaces it", "publication", pub.Namespace+"/"+pub.Name)
}

// assemble puts key's export into the Store: its head with the endpoints
// of the head and of every part held, each endpoint once (one moved
// between parts may be in both for a moment), and the newest trigger time
// of them all. Parts without a head are held, not imported. r.mu must be
// held.
func (r *Reader) assemble(key types.NamespacedName) { r.assembleAfter(key, -1) }

// assembleAfter is assemble when the part at index changed of key's
// sorted parts is the only one that may have changed since the last
// (-1: anything may have).
func (r *Reader) assembleAfter(key types.NamespacedName, changed int) {
	head := r.heads[key]
	if head == nil {
		return
	}
	parts, leaving, vanished := r.parts[key], r.leaving[key], r.vanished[key]
	if len(parts) == 0 && len(leaving) == 0 && len(vanished) == 0 && r.partsLeftOut[key] == 0 {
		r.store.Put(head)
		return
	}
	es := *head
	es.PartsLeftOut = r.partsLeftOut[key]
	sorted := r.sorted[key]
	if sorted == nil {
		sorted = sortedPartsOf(parts)
		r.sorted[key] = sorted
	}
	for _, part := range sorted.parts {
		if t := part.LastChangeTriggerTime; t.After(es.LastChangeTriggerTime) {
			es.LastChangeTriggerTime = t
		}
	}
	var u *union
	if changed >= 0 && len(leaving) == 0 && len(vanished) == 0 {
		u = patchedFor(r.unions[key], head, sorted, changed)
	}
	if u == nil {
		u = r.unions[key].next(assembledSources(head, sorted, leaving, vanished), incrementalPartsFrom)
	}
	r.unions[key] = u
	es.Endpoints = u.groups
	r.store.Put(&es)
}

// assembledSources are what an export is assembled from: the head's
// groups, each part's in name order, then those of parts leaving and
// vanished, whose endpoints a part that holds them now takes over.
func assembledSources(head *clusterset.ExportedService, sorted *sortedParts, leaving, vanished map[string]*Part) [][]reconciler.EndpointGroup {
	sources := make([][]reconciler.EndpointGroup, 0, len(sorted.parts)+len(leaving)+len(vanished)+1)
	sources = append(sources, head.Endpoints)
	for _, part := range sorted.parts {
		sources = append(sources, part.Endpoints)
	}
	for _, name := range slices.Sorted(maps.Keys(leaving)) {
		sources = append(sources, leaving[name].Endpoints)
	}
	for _, name := range slices.Sorted(maps.Keys(vanished)) {
		sources = append(sources, vanished[name].Endpoints)
	}
	return sources
}

// patchedFor is u patched for a change of sorted's part at index changed
// alone, when u was assembled from head and sorted and nothing else (no
// part leaving or vanished, none come or gone since); nil otherwise.
func patchedFor(u *union, head *clusterset.ExportedService, sorted *sortedParts, changed int) *union {
	if u == nil || len(u.sources) != len(sorted.parts)+1 || !sameSource(u.sources[0], head.Endpoints) {
		return nil
	}
	next, ok := u.patchOne(changed+1, sorted.parts[changed].Endpoints)
	if !ok {
		return nil
	}
	return next
}

// sortedParts are an export's parts in name order.
type sortedParts struct {
	names []string
	parts []*Part
}

func sortedPartsOf(parts map[string]*Part) *sortedParts {
	sp := &sortedParts{names: slices.Sorted(maps.Keys(parts))}
	sp.parts = make([]*Part, len(sp.names))
	for i, name := range sp.names {
		sp.parts[i] = parts[name]
	}
	return sp
}

// replace puts part in the place of the part of that name and returns
// its index; -1 (and sp unchanged) when sp has none of it. sp may be nil.
func (sp *sortedParts) replace(name string, part *Part) int {
	if sp == nil {
		return -1
	}
	i, found := slices.BinarySearch(sp.names, name)
	if !found {
		return -1
	}
	sp.parts[i] = part
	return i
}

// remove withdraws a deleted publication's export after RemovalDelay,
// unless it was published again meanwhile; if the member is then in a
// first pass, the export is left to MarkSynced. A marker deleted (a wiped
// hub, every publication deleted by hand) puts the member back into a
// first pass: what the Store holds of it stays until its publisher has
// written everything and its marker again, and only then is what it no
// longer publishes withdrawn (Store.MarkSynced). A fresh hub is not a
// member that left.
func (r *Reader) remove(pub *v1alpha1.PublishedExport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if IsMarker(pub) {
		if pub.Spec.Cluster == string(r.cluster) && r.markerSeen {
			r.markerSeen, r.marked = false, false
			r.store.BeginResync(r.cluster)
			r.logger.Info("The member's marker is gone: what it published is kept until it has published everything again")
		}
		return
	}
	key := types.NamespacedName{Namespace: pub.Spec.Namespace, Name: pub.Spec.Name}
	if r.forgetLeftOut(pub.Name) {
		r.assemble(key)
	}
	part := IsPart(pub)
	if part {
		held, ok := r.parts[key][pub.Name]
		if !ok {
			return
		}
		if r.named[key][pub.Name] {
			r.vanish(key, pub.Name, held)
			return
		}
	} else if !r.keys[key] {
		return
	}
	// In a first pass too: when a hub is wiped, the marker (deleted first:
	// its name sorts first) may be written again before the publisher has
	// seen its publications' deletions, so the marker can come back before
	// a publication that was never meant to leave (seen in CI: the import
	// withdrawn and created again with a new clusterset IP). A part waits
	// as a head does, for the same reason.
	r.removals++
	seq := r.removals
	if r.removing == nil {
		r.removing = map[string]uint64{}
	}
	name := pub.Name
	r.removing[name] = seq
	later := func() { r.removed(key, name, part, seq) }
	if r.delay != nil {
		r.delay(later)
	} else {
		time.AfterFunc(RemovalDelay, later)
	}
}

// removed withdraws the export of a head, or the endpoints of a part,
// deleted RemovalDelay ago, if it was not published again since. In a
// first pass the Store keeps what it has until the member is synced
// (markSyncedLocked).
func (r *Reader) removed(key types.NamespacedName, name string, part bool, seq uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.removing[name] != seq {
		return
	}
	delete(r.removing, name)
	if part {
		r.dropPart(key, name)
		if r.marked {
			r.assemble(key)
		} else {
			r.stale[key] = true
		}
		return
	}
	delete(r.keys, key)
	r.dropHead(key)
	if r.marked {
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
	// The endpoints of parts removed in the first pass leave now.
	for key := range r.stale {
		r.assemble(key)
	}
	clear(r.stale)
}
