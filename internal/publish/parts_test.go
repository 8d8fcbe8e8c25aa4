package publish

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/notify"
)

// writes counts a fake publication server's writes by verb.
type writes struct{ create, update, remove int }

func countingPublisher(t *testing.T, store *clusterset.Store) (*Publisher, client.Client, *writes) {
	w := &writes{}
	var mu sync.Mutex // the publisher writes parts concurrently
	count := func(n *int) { mu.Lock(); *n++; mu.Unlock() }
	built := fakePublicationServer(t).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
			count(&w.create)
			return c.Create(ctx, o, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
			count(&w.update)
			return c.Update(ctx, o, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.DeleteOption) error {
			count(&w.remove)
			return c.Delete(ctx, o, opts...)
		},
	}).Build()
	cl, own := fedByWrites(t, built)
	return &Publisher{opts: PublisherOptions{Cluster: "east", Namespace: "mcs-system", Store: store, Feedback: clusterset.NewFeedback()}, client: cl, apiReader: cl, own: own}, cl, w
}

// endpointSet is an export's endpoints by first address, failing on one
// held twice.
func endpointSet(t *testing.T, es *clusterset.ExportedService) map[string]discoveryv1.Endpoint {
	t.Helper()
	out := map[string]discoveryv1.Endpoint{}
	if es == nil {
		return out
	}
	for _, g := range es.Endpoints {
		for _, e := range g.Endpoints {
			if _, twice := out[e.Addresses[0]]; twice {
				t.Errorf("%s imported twice", e.Addresses[0])
			}
			out[e.Addresses[0]] = e
		}
	}
	return out
}

// TestPublishedInParts: an export of 12,001 endpoints (over what one
// object may take) is published as a head without endpoints and parts of
// at most 100, which a reader assembles into the export exactly; a change
// of one endpoint, an endpoint added and one removed each rewrite one part
// and leave the head alone, and the export read back carries the change's
// trigger time; an endpoint that needs a new part writes it and the head,
// which names it; the endpoints of a whole part removed delete it and
// bring the trigger time in the head; an unchanged export writes nothing.
// The head names exactly the parts there are after every change.
func TestPublishedInParts(t *testing.T) {
	store := clusterset.NewStore()
	es := withEndpoints(12000)
	store.Put(es)
	p, cl, w := countingPublisher(t, store)
	reconcileOK(t, p, webKey)
	if why := p.opts.Feedback.Unpublished(webKey); why != "" {
		t.Fatalf("unpublished: %s", why)
	}
	pubs := publications(t, cl)
	head := pubs[ObjectName("east", webKey)]
	if head == nil || len(head.Spec.Endpoints) != 0 {
		t.Fatalf("head %v", head)
	}
	for name, pub := range pubs {
		if IsPart(pub) {
			if n := len(pub.Spec.Endpoints[0].Endpoints); n > DefaultMaxEndpointsPerPart || !strings.HasPrefix(name, head.Name+".") {
				t.Errorf("part %s holds %d endpoints", name, n)
			}
		}
	}
	if len(pubs) != 1+121 || w.create != 122 {
		t.Errorf("%d objects, %d creates; want a head and 121 parts", len(pubs), w.create)
	}
	got := endpointSet(t, readBack(t, cl, "east", webKey))
	if want := endpointSet(t, es); len(got) != len(want) {
		t.Fatalf("assembled %d endpoints, want %d", len(got), len(want))
	}

	*w = writes{}
	reconcileOK(t, p, webKey)
	if *w != (writes{}) {
		t.Errorf("an unchanged export wrote %+v", *w)
	}

	// The endpoints of part 0, to remove them all.
	inPart0 := map[string]bool{}
	for _, e := range pubs[PartName("east", webKey, "0")].Spec.Endpoints[0].Endpoints {
		inPart0[e.Addresses[0]] = true
	}
	headRV := publications(t, cl)[head.Name].ResourceVersion
	triggered := es.LastChangeTriggerTime
	for _, change := range []struct {
		name string
		edit func(g *[]discoveryv1.Endpoint)
		// writes are the writes expected, headWritten whether the head
		// is one of them.
		writes      int
		headWritten bool
	}{
		{"one endpoint not ready", func(eps *[]discoveryv1.Endpoint) { (*eps)[5000].Conditions.Ready = ptr.To(false) }, 1, false},
		// Its group's parts are full: a new part, which the head then names.
		{"one endpoint added", func(eps *[]discoveryv1.Endpoint) {
			*eps = append(*eps, discoveryv1.Endpoint{Addresses: []string{"10.99.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
		}, 2, true},
		{"another added, into the new part's room", func(eps *[]discoveryv1.Endpoint) {
			*eps = append(*eps, discoveryv1.Endpoint{Addresses: []string{"10.99.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
		}, 1, false},
		{"one endpoint removed", func(eps *[]discoveryv1.Endpoint) { *eps = append((*eps)[:7000:7000], (*eps)[7001:]...) }, 1, false},
		{"a whole part's endpoints removed", func(eps *[]discoveryv1.Endpoint) {
			*eps = slices.DeleteFunc(*eps, func(e discoveryv1.Endpoint) bool { return inPart0[e.Addresses[0]] })
		}, 2, true},
	} {
		next := *es
		next.Endpoints = append(next.Endpoints[:0:0], es.Endpoints...)
		next.Endpoints[0].Endpoints = append(es.Endpoints[0].Endpoints[:0:0], es.Endpoints[0].Endpoints...)
		change.edit(&next.Endpoints[0].Endpoints)
		triggered = triggered.Add(time.Second)
		next.LastChangeTriggerTime = triggered
		es = &next
		store.Put(es)
		*w = writes{}
		reconcileOK(t, p, webKey)
		if w.create+w.update+w.remove != change.writes {
			t.Errorf("%s: %+v, want %d writes", change.name, *w, change.writes)
		}
		if rv := publications(t, cl)[head.Name].ResourceVersion; (rv != headRV) != change.headWritten {
			t.Errorf("%s: the head was rewritten: %v, want %v", change.name, rv != headRV, change.headWritten)
		}
		now := publications(t, cl)
		headRV = now[head.Name].ResourceVersion
		var ids []string
		for _, pub := range now {
			if IsPart(pub) {
				ids = append(ids, pub.Spec.Part)
			}
		}
		slices.SortFunc(ids, comparePartIDs)
		if named := now[head.Name].Spec.Parts; !slices.Equal(named, ids) {
			t.Errorf("%s: the head names %d parts (%v…), there are %d", change.name, len(named), named[:min(3, len(named))], len(ids))
		}
		back := readBack(t, cl, "east", webKey)
		if !back.LastChangeTriggerTime.Equal(triggered) {
			t.Errorf("%s: read back with trigger time %s, want %s", change.name, back.LastChangeTriggerTime, triggered)
		}
		got, want := endpointSet(t, back), endpointSet(t, es)
		if len(got) != len(want) {
			t.Errorf("%s: assembled %d endpoints, want %d", change.name, len(got), len(want))
		}
		for a, e := range want {
			if g, ok := got[a]; !ok || !equality.Semantic.DeepEqual(g, e) {
				t.Errorf("%s: %s assembled as %+v, want %+v", change.name, a, g.Conditions, e.Conditions)
				break
			}
		}
	}
}

// TestReaderAssemblesNeverHalf: parts without their head are held; the
// head brings them in; an endpoint moved from one part to another (the new
// part first) is held once throughout; a head of the form before parts
// (endpoints in the head) and parts are read together; a part's removal
// takes out its endpoints only; the head's, the export.
func TestReaderAssemblesNeverHalf(t *testing.T) {
	store := clusterset.NewStore()
	r, later := syncedReader(store, nil)
	es := withEndpoints(3)
	group := func(eps ...discoveryv1.Endpoint) []v1alpha1.EndpointGroup {
		g := v1alpha1.EndpointGroup(es.Endpoints[0])
		g.Endpoints = eps
		return []v1alpha1.EndpointGroup{g}
	}
	eps := es.Endpoints[0].Endpoints
	p0 := encodePart("east", webKey, "mcs-system", "0", group(eps[0], eps[1]))
	r.put(p0)
	if store.GetFrom(webKey, "east") != nil {
		t.Fatal("a part without its head was imported")
	}
	head := EncodeHead(es, "mcs-system")
	r.put(head)
	if got := endpointSet(t, store.GetFrom(webKey, "east")); len(got) != 2 {
		t.Fatalf("head and part: %d endpoints", len(got))
	}
	// eps[1] moves to part 1: written there first, then out of part 0.
	r.put(encodePart("east", webKey, "mcs-system", "1", group(eps[1], eps[2])))
	if got := endpointSet(t, store.GetFrom(webKey, "east")); len(got) != 3 {
		t.Fatalf("during the move: %d endpoints", len(got))
	}
	r.put(encodePart("east", webKey, "mcs-system", "0", group(eps[0])))
	if got := endpointSet(t, store.GetFrom(webKey, "east")); len(got) != 3 {
		t.Fatalf("after the move: %d endpoints", len(got))
	}
	// The form before parts: the head holds endpoints of its own.
	whole := Encode(withEndpoints(5), "mcs-system")
	r.put(whole)
	if got := endpointSet(t, store.GetFrom(webKey, "east")); len(got) != 6 { // 10.0.0.0-4, fd00::1
		t.Fatalf("a whole head beside parts: %d endpoints", len(got))
	}
	r.put(head)
	r.remove(encodePart("east", webKey, "mcs-system", "1", nil))
	later.fire()
	if got := endpointSet(t, store.GetFrom(webKey, "east")); len(got) != 1 {
		t.Fatalf("part 1 removed: %d endpoints, want part 0's", len(got))
	}
	r.remove(head)
	later.fire()
	if store.GetFrom(webKey, "east") != nil {
		t.Fatal("the head's removal left the export")
	}
}

// TestVanishedPartsLetGo: a part that its head names and that is deleted
// keeps its endpoints, whatever time passes, until the head names it no
// more; a head that names parts never written changes nothing; the head's
// removal lets go of all it kept. The reader's count of what it holds
// follows.
func TestVanishedPartsLetGo(t *testing.T) {
	store := clusterset.NewStore()
	r, later := syncedReader(store, nil)
	es := withEndpoints(3)
	g := v1alpha1.EndpointGroup(es.Endpoints[0])
	part := func(id string, i int) *v1alpha1.PublishedExport {
		one := g
		one.Endpoints = g.Endpoints[i : i+1]
		return encodePart("east", webKey, "mcs-system", id, []v1alpha1.EndpointGroup{one})
	}
	head := func(ids ...string) *v1alpha1.PublishedExport {
		h := EncodeHead(es, "mcs-system")
		h.Spec.Parts = ids
		return h
	}
	count := func(what string, want int) {
		t.Helper()
		if got := len(endpointSet(t, store.GetFrom(webKey, "east"))); got != want {
			t.Errorf("%s: %d endpoints, want %d", what, got, want)
		}
	}
	r.put(part("0", 0))
	r.put(part("1", 1))
	r.put(head("0", "1", "7")) // 7 was never written
	count("the head and its two parts", 2)
	r.remove(part("1", 1))
	later.fire()
	count("part 1 deleted, named by the head", 2)
	r.put(head("0"))
	count("the head names part 1 no more", 1)
	r.remove(part("0", 0))
	later.fire()
	count("part 0 deleted, named by the head", 1)
	if r.held != 2 {
		t.Errorf("holds %d, want 2 (the head, what part 0 held)", r.held)
	}
	r.remove(head("0"))
	later.fire()
	if store.GetFrom(webKey, "east") != nil || r.held != 0 || len(r.vanished) != 0 {
		t.Errorf("the head removed: export %v, %d held, %d vanished", store.GetFrom(webKey, "east"), r.held, len(r.vanished))
	}
}

// TestDecodePartRefuses: a part is another cluster's input, checked as a
// head is; a refused part takes out its own endpoints, not the export.
func TestDecodePartRefuses(t *testing.T) {
	good := func() *v1alpha1.PublishedExport {
		return encodePart("east", webKey, "mcs-system", "0", []v1alpha1.EndpointGroup{v1alpha1.EndpointGroup(export().Endpoints[0])})
	}
	if _, err := DecodePart(good()); err != nil {
		t.Fatalf("a good part: %v", err)
	}
	for name, tc := range map[string]struct {
		edit func(*v1alpha1.PublishedExport)
		want string
	}{
		"misnamed":        {func(p *v1alpha1.PublishedExport) { p.Name = "east.ns.web.part.1" }, "is named"},
		"as another":      {func(p *v1alpha1.PublishedExport) { p.Labels[mcsv1beta1.LabelSourceCluster] = "west" }, "label"},
		"bad part ID":     {func(p *v1alpha1.PublishedExport) { p.Spec.Part = "Zero"; p.Name = "east.ns.web.part.Zero" }, "spec.part"},
		"a head's fields": {func(p *v1alpha1.PublishedExport) { p.Spec.Type = "ClusterSetIP" }, "fields of a head"},
		"a head's parts":  {func(p *v1alpha1.PublishedExport) { p.Spec.Parts = []string{"1"} }, "fields of a head"},
		"a bad address":   {func(p *v1alpha1.PublishedExport) { p.Spec.Endpoints[0].Endpoints[0].Addresses = []string{"10.0.0.300"} }, "not an IPv4 address"},
	} {
		p := good()
		tc.edit(p)
		if _, err := DecodePart(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	if _, err := Decode(good()); err == nil || !strings.Contains(err.Error(), "not its head") {
		t.Errorf("a part decoded as a head: %v", err)
	}

	store := clusterset.NewStore()
	r := newReader("east", store, nil, nil)
	r.put(EncodeHead(export(), "mcs-system"))
	r.put(good())
	bad := good()
	bad.Spec.Endpoints[0].Endpoints[0].Addresses = []string{"nonsense"}
	r.put(bad)
	if es := store.GetFrom(webKey, "east"); es == nil || len(endpointSet(t, es)) != 0 {
		t.Errorf("after a refused part: %+v, want the export without the part's endpoints", es)
	}
}

// TestWholeWhileAReaderIsOlder: while a member's marker lacks readsParts
// the export is published whole and its parts removed once the head holds
// every endpoint; when no such member is left, the parts are written
// before the head lets go of its endpoints. Until the readers are settled
// nothing is written.
func TestWholeWhileAReaderIsOlder(t *testing.T) {
	store := clusterset.NewStore()
	store.Put(withEndpoints(250))
	p, cl, _ := countingPublisher(t, store)
	wholeOnly, settled := []clusterset.ClusterID{"west"}, false
	p.opts.Readers = func() ([]clusterset.ClusterID, bool) { return wholeOnly, settled }
	if res := reconcileOK(t, p, webKey); res.RequeueAfter == 0 || len(publications(t, cl)) != 0 {
		t.Fatalf("unsettled: %v, %d objects", res, len(publications(t, cl)))
	}
	settled = true
	reconcileOK(t, p, webKey)
	if pubs := publications(t, cl); len(pubs) != 1 || len(endpointSet(t, readBack(t, cl, "east", webKey))) != 251 {
		t.Fatalf("whole: %d objects", len(pubs))
	}
	wholeOnly = nil
	reconcileOK(t, p, webKey)
	pubs := publications(t, cl)
	if len(pubs) != 5 || len(pubs[ObjectName("east", webKey)].Spec.Endpoints) != 0 { // 100, 100, 50 IPv4, 1 IPv6
		t.Fatalf("in parts: %d objects", len(pubs))
	}
	wholeOnly = []clusterset.ClusterID{"west"}
	reconcileOK(t, p, webKey)
	if pubs := publications(t, cl); len(pubs) != 1 || len(endpointSet(t, readBack(t, cl, "east", webKey))) != 251 {
		t.Fatalf("whole again: %d objects", len(pubs))
	}
}

// TestReadersChangedRepublishes: when the members that read whole
// publications only change (the last of them upgraded), every export of
// the member is reconciled again, with no event of its own; and only then.
func TestReadersChangedRepublishes(t *testing.T) {
	store := clusterset.NewStore()
	store.Put(withEndpoints(10))
	other := export()
	other.Key.Name = "other"
	store.Put(other)
	west := export()
	west.Cluster = "west"
	west.Key.Name = "west-only"
	store.Put(west)
	p, _, _ := countingPublisher(t, store)
	var mu sync.Mutex
	wholeOnly := []clusterset.ClusterID{"west"}
	asked := make(chan struct{}, 10) // one per call of Readers
	p.opts.Readers = func() ([]clusterset.ClusterID, bool) {
		defer func() { asked <- struct{}{} }()
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(wholeOnly), true
	}
	var readers notify.Signal
	p.opts.ReadersChanged = readers.Changed
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if err := p.followReaders(ctx, q); err != nil {
		t.Fatal(err)
	}
	waitAsked := func(what string) {
		t.Helper()
		select {
		case <-asked:
		case <-time.After(30 * time.Second):
			t.Fatalf("Readers not asked %s", what)
		}
	}
	waitAsked("at the start")
	// Notified twice without a change: once the second is read, whatever
	// the first queued is in the queue (one goroutine reads and queues).
	readers.Notify()
	waitAsked("at the first notification")
	readers.Notify()
	waitAsked("at the second notification")
	if q.Len() != 0 {
		t.Fatalf("%d queued while the readers did not change", q.Len())
	}
	mu.Lock()
	wholeOnly = nil
	mu.Unlock()
	readers.Notify()
	deadline := time.Now().Add(30 * time.Second)
	for q.Len() < 2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	var got []string
	for q.Len() > 0 {
		req, _ := q.Get()
		got = append(got, req.Name)
		q.Done(req)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"other", "web"}) {
		t.Errorf("queued %v, want the member's exports other and web", got)
	}
}

// TestMarkerOfAnOlderRunRewritten: a marker without readsParts (written
// by the member's mcs-syncer before an upgrade) is rewritten with it at
// once, with a heartbeat or without, not at the next renewal.
func TestMarkerOfAnOlderRunRewritten(t *testing.T) {
	for _, heartbeat := range []time.Duration{0, time.Hour} {
		older := Marker("east", "mcs-system", heartbeat)
		older.Spec.ReadsParts = false
		store := clusterset.NewStore()
		store.BeginResync("east")
		store.MarkSynced("east", nil)
		p, cl := publisherOf(t, store, older)
		p.opts.Heartbeat = heartbeat
		reconcileOK(t, p, markerRequest.NamespacedName)
		if m := publications(t, cl)[MarkerName("east")]; m == nil || !m.Spec.ReadsParts {
			t.Errorf("heartbeat %s: marker %+v, want readsParts", heartbeat, m)
		}
	}
}

// BenchmarkReaderAssembles50000: a reader taking a head and the 500 parts
// of an export of 50,000 endpoints, one event each, as a consumer does
// when the export is first published.
func BenchmarkReaderAssembles50000(b *testing.B) {
	es := withEndpoints(50000)
	head := EncodeHead(es, "mcs-system")
	plan := planParts("east", webKey, "mcs-system", "", es.Endpoints, nil, DefaultMaxEndpointsPerPart)
	b.ResetTimer()
	for range b.N {
		store := clusterset.NewStore()
		r := newReader("east", store, nil, nil)
		for _, part := range plan.create {
			r.put(part)
		}
		r.put(head)
		if got := store.GetFrom(webKey, "east").EndpointCount(); got != 50001 {
			b.Fatalf("%d endpoints", got)
		}
	}
}

// TestEncodeParts: what EncodeParts returns is what a publisher writes of
// a new export: the same head and parts, which a reader assembles exactly.
func TestEncodeParts(t *testing.T) {
	for _, n := range []int{9, 250} { // whole (10 endpoints), in parts
		es := withEndpoints(n)
		head, parts := EncodeParts(es, "mcs-system", DefaultMaxEndpointsPerPart)
		store := clusterset.NewStore()
		store.Put(es)
		p, cl, _ := countingPublisher(t, store)
		reconcileOK(t, p, webKey)
		written := publications(t, cl)
		if len(written) != 1+len(parts) {
			t.Fatalf("%d endpoints: the publisher wrote %d objects, EncodeParts gave %d", n+1, len(written), 1+len(parts))
		}
		for _, o := range append(parts, head) {
			w := written[o.Name]
			if w == nil || !equality.Semantic.DeepEqual(w.Spec, o.Spec) || !equality.Semantic.DeepEqual(w.Labels, o.Labels) {
				t.Errorf("%d endpoints: %s: EncodeParts differs from what the publisher wrote", n+1, o.Name)
			}
		}
	}
}

// TestSmallExportsPublishedWhole: an export that fits in one part is one
// object, its endpoints in its head; grown past a part's size it is a
// head and parts; shrunk, it stays in parts down to half a part, then is
// one object again, its parts deleted. A change of a whole export writes
// its one object. A reader that sees each write as it is made holds
// every endpoint that a step keeps after each write, and exactly the
// export after each step.
func TestSmallExportsPublishedWhole(t *testing.T) {
	store := clusterset.NewStore()
	var read *clusterset.Store
	var kept int // withEndpoints(n)'s IPv4 endpoints are withEndpoints(n+1)'s first n
	check := func(after string) {
		t.Helper()
		got := endpointSet(t, read.GetFrom(webKey, "east"))
		for a := range endpointSet(t, withEndpoints(kept)) {
			if _, ok := got[a]; !ok {
				t.Errorf("after %s the reader lacks %s, which the step keeps", after, a)
				return
			}
		}
	}
	w := watchedPublisher(t, store, check)
	read = w.read
	last := 0
	for _, step := range []struct {
		endpoints int // IPv4; one IPv6 endpoint besides
		objects   int
		whole     bool
		writes    int
	}{
		{60, 1, true, 1},
		{59, 1, true, 1},   // a change of a whole export: its one object
		{99, 1, true, 1},   // 100 in all: one part's worth
		{100, 3, false, 3}, // 101: an IPv4 and an IPv6 part, then the head
		{79, 3, false, 1},  // 80: in parts above half a part
		{49, 1, true, 3},   // 50: whole, then the two parts deleted
		{10, 1, true, 1},
	} {
		kept = min(last, step.endpoints)
		store.Put(withEndpoints(step.endpoints))
		w.writes.Store(0)
		reconcileOK(t, w.p, webKey)
		pubs := publications(t, w.cl)
		head := pubs[ObjectName("east", webKey)]
		if len(pubs) != step.objects || head == nil || (len(head.Spec.Endpoints) > 0) != step.whole || (len(head.Spec.Parts) == 0) != step.whole {
			t.Fatalf("%d endpoints: %d objects, a head holding %d groups and naming %d parts; want %d objects, whole %v",
				step.endpoints+1, len(pubs), len(head.Spec.Endpoints), len(head.Spec.Parts), step.objects, step.whole)
		}
		if n := int(w.writes.Load()); n != step.writes {
			t.Errorf("%d endpoints: %d writes, want %d", step.endpoints+1, n, step.writes)
		}
		if got := endpointSet(t, read.GetFrom(webKey, "east")); len(got) != step.endpoints+1 {
			t.Errorf("%d endpoints: the reader holds %d", step.endpoints+1, len(got))
		}
		last = step.endpoints
	}
}

// TestRecreatedPartLosesNoEndpoint (issue 55): 1,000 endpoints in ten
// full parts; one removed at the source (a part then has room); then the
// hub's administrator deletes a full part. The publisher writes it again,
// and may move one of its endpoints into the part with room in a second
// write. A reader that sees each write as it is made holds every one of
// the 999 endpoints after each of them, however late the publisher is:
// the reader's removal delays all run out after each write and before
// the publisher sees the deletion. It holds no part twice in its count
// at the end.
func TestRecreatedPartLosesNoEndpoint(t *testing.T) {
	store := clusterset.NewStore()
	es := withEndpoints(999) // 1,000: withEndpoints adds one
	store.Put(es)
	want := 0
	var read *clusterset.Store
	check := func(after string) {
		t.Helper()
		if got := len(endpointSet(t, read.GetFrom(webKey, "east"))); want > 0 && got != want {
			t.Errorf("after %s the reader holds %d endpoints, want %d", after, got, want)
		}
	}
	w := watchedPublisher(t, store, check)
	p, cl, r, delayed := w.p, w.cl, w.r, w.delayed
	read = w.read
	reconcileOK(t, p, webKey)
	if got := len(endpointSet(t, read.GetFrom(webKey, "east"))); got != 1000 {
		t.Fatalf("published %d endpoints, want 1000", got)
	}

	smaller := withEndpoints(999)
	smaller.Endpoints[0].Endpoints = smaller.Endpoints[0].Endpoints[1:]
	store.Put(smaller)
	reconcileOK(t, p, webKey)
	delayed.fire()
	want = 999
	check("one endpoint removed")

	for i := range 20 {
		var full *v1alpha1.PublishedExport
		for _, pub := range publications(t, cl) {
			if IsPart(pub) && len(pub.Spec.Endpoints[0].Endpoints) == DefaultMaxEndpointsPerPart && (full == nil || pub.Name < full.Name) {
				full = pub
			}
		}
		if full == nil {
			t.Fatal("no full part")
		}
		if err := cl.Delete(context.Background(), full); err != nil { // the hub's administrator
			t.Fatal(err)
		}
		reconcileOK(t, p, webKey)
		check(fmt.Sprintf("deletion %d of a full part, written again", i+1))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(publications(t, cl)); r.held != n || len(r.vanished) != 0 {
		t.Errorf("the reader counts %d publications held (%d exports with vanished parts), the server has %d", r.held, len(r.vanished), n)
	}
}

// watched is a publisher of a Store's exports into a fake publication
// server whose every write a reader (its Store read, the member synced)
// sees as it is made, as a watch of the hub delivers it.
type watched struct {
	p       *Publisher
	cl      client.Client
	read    *clusterset.Store
	r       *Reader
	delayed *delayed
	// writes counts the writes made (the publisher writes parts
	// concurrently).
	writes atomic.Int32
}

// watchedPublisher returns the watched publisher of store's exports;
// check is called after each write, and again after the reader's removal
// delays ran out.
func watchedPublisher(t *testing.T, store *clusterset.Store, check func(after string)) *watched {
	w := &watched{read: clusterset.NewStore()}
	w.r, w.delayed = syncedReader(w.read, nil)
	seen := func(err error, o client.Object, what string, take func(*v1alpha1.PublishedExport)) error {
		if err == nil {
			w.writes.Add(1)
			take(o.(*v1alpha1.PublishedExport).DeepCopy())
			check(what + " of " + o.GetName())
			w.delayed.fire()
			check(what + " of " + o.GetName() + " and the removals' delay")
		}
		return err
	}
	built := fakePublicationServer(t).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
			return seen(c.Create(ctx, o, opts...), o, "the create", w.r.put)
		},
		Update: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
			return seen(c.Update(ctx, o, opts...), o, "the update", w.r.put)
		},
		Delete: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.DeleteOption) error {
			return seen(c.Delete(ctx, o, opts...), o, "the deletion", w.r.remove)
		},
	}).Build()
	var own *ownParts
	w.cl, own = fedByWrites(t, built)
	w.p = &Publisher{opts: PublisherOptions{Cluster: "east", Namespace: "mcs-system", Store: store, Feedback: clusterset.NewFeedback()}, client: w.cl, apiReader: w.cl, own: own}
	return w
}
