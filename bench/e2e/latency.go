package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/test/testbed/audit"
)

// Labels of the relay's slices: the floor's source slices in east and
// their mirrors in west.
const (
	roleLabel    = "bench.mcs-syncer.io/role"
	roleRelaySrc = "relay-src"
	roleRelayDst = "relay-dst"
	benchManager = "mcs-bench"
)

// Paths a change takes.
const (
	pathMCS   = "mcs-syncer"
	pathFloor = "floor"
)

// latencyScenario sends changes at Rate per second to the source slices
// of Services services in Namespace (each path gets Rate; their changes
// alternate), for Duration.
type latencyScenario struct {
	Name      string
	Namespace string
	Services  int
	Rate      float64
	Duration  time.Duration
	// Existing: the services (prefix "s-") were created by the scale
	// scenario; otherwise they are created with prefix "svc-".
	Existing bool
	// CPUReference: the CPU per change of the churn at scale is compared
	// with this scenario's.
	CPUReference bool
}

// latencyResult is what one latency scenario measured.
type latencyResult struct {
	Scenario       latencyScenario
	MCS, Floor     []time.Duration
	Sent           map[string]int // changes sent, by path
	Wrong          map[string]int // slices seen with a change's trigger time but not its condition, by path
	Writes         audit.Writes   // mcs-syncer's writes in every consumer during the scenario
	CPU            time.Duration  // mcs-syncer's CPU time during the scenario, idle share removed
	IdleCPURate    time.Duration  // per second of wall time
	Hist           histogram      // the propagation histogram's observations (east -> west)
	Load1Begin     string
	Load1End       string
	ElapsedSending time.Duration
}

// change is one change in flight: the trigger time it carries, and the
// endpoint whose readiness it set.
type change struct {
	trigger time.Time
	address string
	ready   bool
}

// tracker matches the consumer's events with the changes sent.
type tracker struct {
	mu      sync.Mutex
	pending map[string][]change // by path + "/" + slice key
	samples map[string][]time.Duration
	// wrong counts, by path, the slices that carried a change's trigger
	// time but not its condition.
	wrong map[string]int
}

func newTracker() *tracker {
	return &tracker{pending: map[string][]change{}, samples: map[string][]time.Duration{}, wrong: map[string]int{}}
}

func (t *tracker) sent(path, key string, c change) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending[path+"/"+key] = append(t.pending[path+"/"+key], c)
}

// seen resolves every pending change of path/key that the slice seen at
// `at` carries: its trigger time is at or after the change's, and the
// endpoint that the last of them changed has that change's readiness (a
// slice that carries the time but not the condition is counted as wrong).
func (t *tracker) seen(path, key string, s *discoveryv1.EndpointSlice, at time.Time) {
	tt, err := time.Parse(time.RFC3339Nano, s.Annotations[corev1.EndpointsLastChangeTriggerTime])
	if err != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	k := path + "/" + key
	list := t.pending[k]
	n := 0
	for n < len(list) && !list[n].trigger.After(tt) {
		n++
	}
	if n == 0 {
		return
	}
	if last := list[n-1]; !hasReadiness(s, last.address, last.ready) {
		t.wrong[path]++
		return
	}
	for _, c := range list[:n] {
		t.samples[path] = append(t.samples[path], at.Sub(c.trigger))
	}
	t.pending[k] = list[n:]
}

// hasReadiness reports whether slice s holds the endpoint address with
// the given ready and serving conditions.
func hasReadiness(s *discoveryv1.EndpointSlice, address string, ready bool) bool {
	for _, ep := range s.Endpoints {
		if len(ep.Addresses) > 0 && ep.Addresses[0] == address {
			return ep.Conditions.Ready != nil && *ep.Conditions.Ready == ready &&
				ep.Conditions.Serving != nil && *ep.Conditions.Serving == ready
		}
	}
	return false
}

func (t *tracker) outstanding() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, l := range t.pending {
		n += len(l)
	}
	return n
}

// source is one slice the bench changes, and the last version it wrote.
type source struct {
	mu    sync.Mutex
	path  string
	key   string // the name the consumer's slice is matched by
	slice *discoveryv1.EndpointSlice
	seq   int
}

// runLatency runs one latency scenario.
func (b *bench) runLatency(ctx context.Context, sc latencyScenario) (*latencyResult, error) {
	east, west := b.kube["east"], b.kube["west"]
	if err := b.ensureNamespace(ctx, sc.Namespace); err != nil {
		return nil, err
	}
	prefix := "svc-"
	if sc.Existing {
		prefix = "s-"
	}
	var mcsSources, floorSources []*source
	wanted := map[string]bool{}
	for i := range sc.Services {
		name := fmt.Sprintf("%s%04d", prefix, i)
		src, err := b.sourceSlice(ctx, sc, name, i)
		if err != nil {
			return nil, err
		}
		mcsSources = append(mcsSources, &source{path: pathMCS, key: name, slice: src})
		wanted[name] = true
		relay := fmt.Sprintf("relay-%04d", i)
		rs, err := b.relayPair(ctx, sc.Namespace, relay, i)
		if err != nil {
			return nil, err
		}
		floorSources = append(floorSources, &source{path: pathFloor, key: relay, slice: rs})
	}

	tr := newTracker()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The consumer's view: imported slices of east's exports and the
	// relay's mirrors, as a watch delivers them.
	westSlices := sliceInformer(west, sc.Namespace)
	imported := map[string]bool{}
	var importedMu sync.Mutex
	onSlice := func(obj any) {
		now := time.Now()
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return
		}
		switch {
		case s.Labels[roleLabel] == roleRelayDst:
			tr.seen(pathFloor, s.Labels[discoveryv1.LabelServiceName], s, now)
		case s.Labels[mcsv1beta1.LabelSourceCluster] == "east" && s.Labels[discoveryv1.LabelManagedBy] == "mcs":
			name := s.Labels[mcsv1beta1.LabelServiceName]
			tr.seen(pathMCS, name, s, now)
			if wanted[name] {
				importedMu.Lock()
				imported[name] = true
				importedMu.Unlock()
			}
		}
	}
	if _, err := westSlices.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onSlice,
		UpdateFunc: func(_, obj any) { onSlice(obj) },
	}); err != nil {
		return nil, err
	}
	go westSlices.Run(ctx.Done())
	// The relay: every change of a relay source in east is copied to its
	// mirror in west, as a controller would: keys in a workqueue (changes
	// that queue up for one slice are coalesced), worked by as many
	// workers as mcs-syncer's import controller has, each writing the
	// newest source from its informer over the mirror it last wrote.
	eastRelay := sliceInformer(east, sc.Namespace)
	r := newRelay(west, eastRelay, westSlices, b.logf)
	defer r.queue.ShutDown()
	if _, err := eastRelay.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if s, ok := obj.(*discoveryv1.EndpointSlice); ok && s.Labels[roleLabel] == roleRelaySrc {
				r.queue.Add(s.Labels[discoveryv1.LabelServiceName])
			}
		},
	}); err != nil {
		return nil, err
	}
	go eastRelay.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), westSlices.HasSynced, eastRelay.HasSynced) {
		return nil, ctx.Err()
	}
	for range relayWorkers {
		go r.work(ctx, sc.Namespace)
	}
	if _, err := waitFor(ctx, "every service imported into west", 2*time.Minute, func() (bool, string) {
		importedMu.Lock()
		defer importedMu.Unlock()
		return len(imported) == sc.Services, fmt.Sprintf("%d of %d imported", len(imported), sc.Services)
	}); err != nil {
		return nil, err
	}

	res := &latencyResult{Scenario: sc, Sent: map[string]int{}}
	idle := b.idleWindow()
	cpu0, err := cpuTime(b.syncer.Pid())
	if err != nil {
		return nil, err
	}
	sleep(ctx, idle)
	cpu1, err := cpuTime(b.syncer.Pid())
	if err != nil {
		return nil, err
	}
	res.IdleCPURate = time.Duration(float64(cpu1-cpu0) / idle.Seconds())
	before, err := b.latencyHistogram(ctx)
	if err != nil {
		return nil, err
	}
	res.Load1Begin = loadAverage()
	begin := time.Now()

	// Send: 2*Rate ticks per second, alternating between the paths, the
	// services of each path in turn.
	period := time.Duration(float64(time.Second) / (2 * sc.Rate))
	ticker := time.NewTicker(period)
	var wg sync.WaitGroup
	var sendErr error
	var sendErrOnce sync.Once
	for tick := 0; time.Since(begin) < sc.Duration; tick++ {
		list := mcsSources
		if tick%2 == 1 {
			list = floorSources
		}
		s := list[(tick/2)%len(list)]
		res.Sent[s.path]++
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.change(ctx, east, s, tr); err != nil {
				sendErrOnce.Do(func() { sendErr = err })
			}
		}()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ticker.C:
		}
	}
	ticker.Stop()
	wg.Wait()
	res.ElapsedSending = time.Since(begin)
	if sendErr != nil {
		return nil, sendErr
	}
	// Drain: wait for the changes in flight while they arrive (those never
	// seen are reported as lost).
	_, _ = waitFor(ctx, "the changes in flight", 10*time.Second, outstanding(tr))
	end := time.Now()
	res.Load1End = loadAverage()
	cpu2, err := cpuTime(b.syncer.Pid())
	if err != nil {
		return nil, err
	}
	res.CPU = max(0, cpu2-cpu1-time.Duration(float64(res.IdleCPURate)*end.Sub(begin).Seconds()))
	after, err := b.latencyHistogram(ctx)
	if err != nil {
		return nil, err
	}
	res.Hist = after.minus(before)
	// The audit log is written as requests complete; give the last ones a
	// moment to land before counting.
	sleep(ctx, time.Second)
	if res.Writes, err = audit.CountWrites(b.auditLogs(), begin, end); err != nil {
		return nil, err
	}
	tr.mu.Lock()
	res.MCS, res.Floor = tr.samples[pathMCS], tr.samples[pathFloor]
	res.Wrong = map[string]int{pathMCS: tr.wrong[pathMCS], pathFloor: tr.wrong[pathFloor]}
	tr.mu.Unlock()
	return res, nil
}

// change writes one change to a source slice: endpoint seq (mod its
// endpoints) flips its readiness; the trigger time is set just before
// the write.
func (b *bench) change(ctx context.Context, cs kubernetes.Interface, s *source, tr *tracker) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	slice := s.slice.DeepCopy()
	ep := &slice.Endpoints[s.seq%len(slice.Endpoints)]
	ready := ep.Conditions.Ready == nil || !*ep.Conditions.Ready
	ep.Conditions.Ready, ep.Conditions.Serving = &ready, &ready
	s.seq++
	// The trigger time as the consumer will parse it back.
	now, _ := time.Parse(time.RFC3339Nano, time.Now().UTC().Format(time.RFC3339Nano))
	slice.Annotations[corev1.EndpointsLastChangeTriggerTime] = now.Format(time.RFC3339Nano)
	tr.sent(s.path, s.key, change{trigger: now, address: ep.Addresses[0], ready: ready})
	updated, err := cs.DiscoveryV1().EndpointSlices(slice.Namespace).Update(ctx, slice, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("change %s/%s: %w", slice.Namespace, slice.Name, err)
	}
	s.slice = updated
	return nil
}

// relayWorkers is how many relay writes are in flight at most: as many as
// mcs-syncer's import workers per consumer (--concurrent-import-syncs).
const relayWorkers = 10

// relay is the raw relay floor: the cheapest correct copy of a slice from
// east to west. It reads the source from its informer, writes the mirror
// over the copy it last wrote (no GET: mcs-syncer writes from its cache
// too), and coalesces the changes that queue up for one slice.
type relay struct {
	west        kubernetes.Interface
	src, dst    cache.SharedIndexInformer
	queue       workqueue.TypedRateLimitingInterface[string]
	logf        func(string, ...any)
	mu          sync.Mutex
	lastWritten map[string]*discoveryv1.EndpointSlice // by mirror name
}

func newRelay(west kubernetes.Interface, src, dst cache.SharedIndexInformer, logf func(string, ...any)) *relay {
	return &relay{west: west, src: src, dst: dst, logf: logf, lastWritten: map[string]*discoveryv1.EndpointSlice{},
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
}

// work copies queued relay slices until the queue shuts down.
func (r *relay) work(ctx context.Context, ns string) {
	for {
		name, shutdown := r.queue.Get()
		if shutdown {
			return
		}
		if err := r.copy(ctx, ns, name); err != nil {
			if ctx.Err() == nil && !apierrors.IsConflict(err) {
				r.logf("relay %s: %v", name, err)
			}
			r.queue.AddRateLimited(name)
		} else {
			r.queue.Forget(name)
		}
		r.queue.Done(name)
	}
}

// copy writes the newest source of relay name over its mirror. After a
// conflict (the mirror changed behind the relay's back) it starts again
// from the informer's copy.
func (r *relay) copy(ctx context.Context, ns, name string) error {
	obj, ok, err := r.src.GetStore().GetByKey(ns + "/" + name + "-src")
	if err != nil || !ok {
		return err
	}
	src := obj.(*discoveryv1.EndpointSlice)
	dstName := name + "-dst"
	r.mu.Lock()
	dst := r.lastWritten[dstName]
	r.mu.Unlock()
	if dst == nil {
		obj, ok, err := r.dst.GetStore().GetByKey(ns + "/" + dstName)
		if err != nil || !ok {
			return fmt.Errorf("mirror %s not in the informer (%v)", dstName, err)
		}
		dst = obj.(*discoveryv1.EndpointSlice)
	}
	dst = dst.DeepCopy()
	dst.Endpoints = src.Endpoints
	dst.Annotations[corev1.EndpointsLastChangeTriggerTime] = src.Annotations[corev1.EndpointsLastChangeTriggerTime]
	written, err := r.west.DiscoveryV1().EndpointSlices(ns).Update(ctx, dst, metav1.UpdateOptions{})
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		delete(r.lastWritten, dstName)
		return err
	}
	r.lastWritten[dstName] = written
	return nil
}

// sourceSlice returns the source slice of an exported Service in east,
// creating the Service, the slice and the ServiceExport unless the
// scenario reuses the scale scenario's.
func (b *bench) sourceSlice(ctx context.Context, sc latencyScenario, name string, i int) (*discoveryv1.EndpointSlice, error) {
	east := b.kube["east"]
	if sc.Existing {
		return east.DiscoveryV1().EndpointSlices(sc.Namespace).Get(ctx, name+"-src", metav1.GetOptions{})
	}
	if err := b.createExport(ctx, "east", 0, sc.Namespace, name, i, b.endpoints); err != nil {
		return nil, err
	}
	return east.DiscoveryV1().EndpointSlices(sc.Namespace).Get(ctx, name+"-src", metav1.GetOptions{})
}

// relayPair creates the floor's source slice in east and its mirror in
// west (same endpoints), and returns the source.
func (b *bench) relayPair(ctx context.Context, ns, name string, i int) (*discoveryv1.EndpointSlice, error) {
	src := endpointSlice(ns, name+"-src", name, benchIP(9, i, 0), b.endpoints)
	src.Labels[roleLabel] = roleRelaySrc
	dst := src.DeepCopy()
	dst.Name, dst.Labels[roleLabel] = name+"-dst", roleRelayDst
	if _, err := create(ctx, b.kube["west"].DiscoveryV1().EndpointSlices(ns).Create, dst); err != nil {
		return nil, err
	}
	return create(ctx, b.kube["east"].DiscoveryV1().EndpointSlices(ns).Create, src)
}

// create creates obj, or returns the existing one (a scenario run twice).
func create[T any](ctx context.Context, f func(context.Context, T, metav1.CreateOptions) (T, error), obj T) (T, error) {
	got, err := f(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return obj, fmt.Errorf("%T already exists: the bench runs on a fresh testbed only", obj)
	}
	return got, err
}

// sliceInformer watches every EndpointSlice of namespace ns.
func sliceInformer(cs kubernetes.Interface, ns string) cache.SharedIndexInformer {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	return f.Discovery().V1().EndpointSlices().Informer()
}

// latencyHistogram reads mcs-syncer's propagation histogram east -> west.
func (b *bench) latencyHistogram(ctx context.Context) (histogram, error) {
	text, err := b.syncer.Metrics(ctx)
	if err != nil {
		return histogram{}, err
	}
	return parseHistogram(text, "mcs_syncer_propagation_latency_seconds",
		map[string]string{"source_cluster": "east", "consumer_cluster": "west"}), nil
}

// benchIP returns the j-th address of the i-th slice of owner o (one of a
// handful of bench-wide owners: 0 east, 1 west, 9 the relay): 10.(150+o).0.0
// plus i*1000+j, so that no two slices share an address.
func benchIP(o, i, j int) string {
	return formatIPv4(uint32(10)<<24 | uint32(150+o)<<16 + uint32(i*1000+j))
}
