package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/audit"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/controlplane"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/syncer"
)

const (
	scaleNamespace = "scale"
	floorNamespace = "scale-floor"
	// writers is how many requests the bench's plain clients have in
	// flight per cluster.
	writers = 16
)

// scaleResult is what the scale scenario measured.
type scaleResult struct {
	Services, Endpoints int
	// Setup is the time the bench took to create the exports in east and
	// west (mcs-syncer stopped).
	Setup time.Duration
	// Floor is the time a plain concurrent client took to write the same
	// objects into the consumers; FloorWrites how many writes that took.
	Floor       time.Duration
	FloorWrites int
	// Converge is from mcs-syncer's start until every consumer held every
	// import; Converged false if that did not happen within the limit.
	Converge  time.Duration
	Converged bool
	Writes    audit.Writes
	// RSS and PeakRSS of mcs-syncer once converged; ImportedEndpoints the
	// endpoints it imported (every consumer counted).
	RSS, PeakRSS      int64
	ImportedEndpoints int
	CPU               time.Duration
	Load1             string
}

// parallel runs f(0..n-1) on `workers` goroutines and returns the first
// error.
func parallel(ctx context.Context, n, workers int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		}()
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	return first
}

func scaleName(i int) string { return fmt.Sprintf("s-%04d", i) }

// runScale creates the scale scenario's exports with mcs-syncer stopped,
// measures the write floor, then starts mcs-syncer and times its import.
func (b *bench) runScale(ctx context.Context, services int, writeFloor bool) (*scaleResult, error) {
	res := &scaleResult{Services: services, Endpoints: b.endpoints}
	if err := b.stopSyncer(); err != nil {
		return nil, err
	}
	if err := b.ensureNamespace(ctx, scaleNamespace); err != nil {
		return nil, err
	}
	start := time.Now()
	for o, exporter := range []string{"east", "west"} {
		if err := parallel(ctx, services, writers, func(ctx context.Context, i int) error {
			return b.createExport(ctx, exporter, o, scaleNamespace, scaleName(i), i, b.endpoints)
		}); err != nil {
			return nil, err
		}
	}
	res.Setup = time.Since(start)
	b.logf("scale: %d exports created in east and west in %s", services, res.Setup.Round(time.Millisecond))

	if writeFloor {
		if err := b.writeFloor(ctx, res); err != nil {
			return nil, err
		}
		b.logf("scale: write floor %s (%d writes)", res.Floor.Round(time.Millisecond), res.FloorWrites)
	}

	views, err := b.importViews(ctx, b.bed.Clusters, scaleNamespace, []string{"east", "west"})
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := b.startSyncer(ctx); err != nil {
		return nil, err
	}
	_, err = waitFor(ctx, "every import complete in every consumer", convergeStall, func() (bool, string) {
		return allComplete(views, func(v *importView) (bool, string) { return v.complete(ctx, services, b.endpoints) })
	})
	res.Converged = err == nil
	res.Converge = time.Since(t0)
	res.Load1 = loadAverage()
	if res.RSS, res.PeakRSS, err = memory(b.syncer.Pid()); err != nil {
		return nil, err
	}
	if res.CPU, err = cpuTime(b.syncer.Pid()); err != nil {
		return nil, err
	}
	res.ImportedEndpoints = services * b.endpoints * 2 * len(b.bed.Clusters)
	sleep(ctx, time.Second) // the last writes' audit events
	if res.Writes, err = audit.CountWrites(b.auditLogs(), t0, time.Now()); err != nil {
		return nil, err
	}
	for _, v := range views {
		v.stop()
	}
	if !res.Converged {
		b.logf("scale: NOT converged: %v", err)
	}
	return res, nil
}

// writeFloor writes into every consumer, with plain concurrent clients,
// what an import of the scale scenario consists of, in the one order a
// correct importer can: the ServiceImport, then its derived Service (whose
// owner reference needs the ServiceImport's UID), then the ServiceImport's
// spec.ips (the clusterset IP exists only once the API server allocated
// the Service's), its status, and one slice per exporting cluster. Then it
// removes them again (and waits for that) so that mcs-syncer's run does
// not see them.
func (b *bench) writeFloor(ctx context.Context, res *scaleResult) error {
	if err := b.ensureNamespace(ctx, floorNamespace); err != nil {
		return err
	}
	start := time.Now()
	var writes sync.Map
	var wg sync.WaitGroup
	errs := make(chan error, len(b.bed.Clusters))
	for _, c := range b.bed.Clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			var mu sync.Mutex
			err := parallel(ctx, res.Services, writers, func(ctx context.Context, i int) error {
				w, err := b.writeFloorImport(ctx, c.Name, i)
				mu.Lock()
				n += w
				mu.Unlock()
				return err
			})
			writes.Store(c.Name, n)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	res.Floor = time.Since(start)
	for err := range errs {
		if err != nil {
			return fmt.Errorf("write floor: %w", err)
		}
	}
	writes.Range(func(_, v any) bool { res.FloorWrites += v.(int); return true })
	for _, c := range b.bed.Clusters {
		if err := b.kube[c.Name].CoreV1().Namespaces().Delete(ctx, floorNamespace, metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	return b.namespaceGone(ctx, floorNamespace)
}

// namespaceGone waits until every cluster's namespace ns is deleted; its
// progress is the namespace's conditions (what is left to delete).
func (b *bench) namespaceGone(ctx context.Context, ns string) error {
	_, err := waitFor(ctx, "namespace "+ns+" deleted in every cluster", 5*time.Minute, func() (bool, string) {
		var left []string
		for _, c := range b.bed.Clusters {
			n, err := b.kube[c.Name].CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				left = append(left, c.Name+": "+err.Error())
			default:
				var conds []string
				for _, cond := range n.Status.Conditions {
					if cond.Status == corev1.ConditionTrue {
						conds = append(conds, cond.Message)
					}
				}
				left = append(left, fmt.Sprintf("%s: %s %v", c.Name, n.Status.Phase, conds))
			}
		}
		return len(left) == 0, strings.Join(left, "; ")
	})
	return err
}

// writeFloorImport writes one import's objects into cluster, each write
// after the one it depends on, and returns the number of writes.
func (b *bench) writeFloorImport(ctx context.Context, cluster string, i int) (int, error) {
	cs, cl := b.kube[cluster], b.ctrl[cluster]
	name := scaleName(i)
	si := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: floorNamespace},
		Spec: mcsv1beta1.ServiceImportSpec{
			Type:  mcsv1beta1.ClusterSetIP,
			Ports: []mcsv1beta1.ServicePort{{Name: benchPort.Name, Protocol: benchPort.Protocol, Port: benchPort.Port}},
		},
	}
	if err := cl.Create(ctx, si); err != nil {
		return 0, err
	}
	owner := []metav1.OwnerReference{{APIVersion: mcsv1beta1.SchemeGroupVersion.String(), Kind: "ServiceImport",
		Name: si.Name, UID: si.UID, Controller: ptr.To(true)}}
	svc, err := cs.CoreV1().Services(floorNamespace).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "derived-" + name, Namespace: floorNamespace, OwnerReferences: owner},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{benchPort}},
	}, metav1.CreateOptions{})
	if err != nil {
		return 1, err
	}
	si.Spec.IPs = svc.Spec.ClusterIPs
	if err := cl.Update(ctx, si); err != nil {
		return 2, err
	}
	si.Status.Clusters = []mcsv1beta1.ClusterStatus{{Cluster: "east"}, {Cluster: "west"}}
	meta.SetStatusCondition(&si.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", Message: "floor"})
	if err := cl.Status().Update(ctx, si); err != nil {
		return 3, err
	}
	for o, source := range []string{"east", "west"} {
		s := endpointSlice(floorNamespace, name+"-"+source, svc.Name, benchIP(o, i, 0), b.endpoints)
		s.Labels[mcsv1beta1.LabelServiceName] = name
		s.Labels[mcsv1beta1.LabelSourceCluster] = source
		s.OwnerReferences = owner
		if _, err := cs.DiscoveryV1().EndpointSlices(floorNamespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return 4 + o, err
		}
	}
	return 6, nil
}

// importView is a watch-fed view of one consumer's imports in one
// namespace, of Services exported by every one of sources (source o
// exporting the addresses of bench owner o).
type importView struct {
	cluster string
	sources []string
	cache   cache.Cache
	stop    context.CancelFunc
}

func (b *bench) importViews(ctx context.Context, clusters []*testbed.Cluster, ns string, sources []string) ([]*importView, error) {
	var views []*importView
	for _, c := range clusters {
		cc, err := cache.New(b.restConfig(c), cache.Options{
			Scheme:            controlplane.Scheme(),
			DefaultNamespaces: map[string]cache.Config{ns: {}},
		})
		if err != nil {
			return nil, err
		}
		vctx, cancel := context.WithCancel(ctx)
		v := &importView{cluster: c.Name, sources: sources, cache: cc, stop: cancel}
		// Informers for both kinds before the cache starts.
		for _, obj := range []client.Object{&mcsv1beta1.ServiceImport{}, &discoveryv1.EndpointSlice{}, &corev1.Service{}} {
			if _, err := cc.GetInformer(vctx, obj); err != nil {
				cancel()
				return nil, err
			}
		}
		go func() { _ = cc.Start(vctx) }()
		if !cc.WaitForCacheSync(vctx) {
			cancel()
			return nil, fmt.Errorf("import view of %s did not sync", c.Name)
		}
		views = append(views, v)
	}
	return views, nil
}

// complete reports whether the consumer holds every import, judged by
// content: each ServiceImport Ready, with both exporting clusters in its
// status and its clusterset IP that of its derived Service; for each
// exporting cluster, exactly the endpoints it exports (address and
// ready/serving/terminating) in slices labelled with that source. state
// counts what it holds so far.
func (v *importView) complete(ctx context.Context, services, endpoints int) (done bool, state string) {
	var sis mcsv1beta1.ServiceImportList
	if err := v.cache.List(ctx, &sis, client.UnsafeDisableDeepCopy); err != nil {
		return false, err.Error()
	}
	var list discoveryv1.EndpointSliceList
	if err := v.cache.List(ctx, &list, client.UnsafeDisableDeepCopy, client.HasLabels{mcsv1beta1.LabelSourceCluster}); err != nil {
		return false, err.Error()
	}
	state = fmt.Sprintf("%s: %d of %d ServiceImports, %d of %d slices", v.cluster, len(sis.Items), services, len(list.Items), len(v.sources)*services)
	// Cheap counts first: while the import is under way, most looks end
	// here.
	if len(sis.Items) < services || len(list.Items) < len(v.sources)*services {
		return false, state
	}
	var svcs corev1.ServiceList
	if err := v.cache.List(ctx, &svcs, client.UnsafeDisableDeepCopy); err != nil {
		return false, err.Error()
	}
	clusterIPs := map[string]string{}
	for i := range svcs.Items {
		clusterIPs[svcs.Items[i].Name] = strings.Join(svcs.Items[i].Spec.ClusterIPs, ",")
	}
	// imported[service/source] = the endpoints, as "address ready serving terminating".
	imported := map[string][]string{}
	for i := range list.Items {
		s := &list.Items[i]
		k := s.Labels[mcsv1beta1.LabelServiceName] + "/" + s.Labels[mcsv1beta1.LabelSourceCluster]
		for _, ep := range s.Endpoints {
			imported[k] = append(imported[k], endpointState(ep))
		}
	}
	byName := map[string]*mcsv1beta1.ServiceImport{}
	for i := range sis.Items {
		byName[sis.Items[i].Name] = &sis.Items[i]
	}
	complete := 0
	for i := range services {
		if v.importComplete(byName[scaleName(i)], i, clusterIPs, imported, endpoints) {
			complete++
		}
	}
	return complete == services, fmt.Sprintf("%s; %d of %d imports complete", state, complete, services)
}

// importComplete reports whether si, the i-th Service's import, is as
// complete describes.
func (v *importView) importComplete(si *mcsv1beta1.ServiceImport, i int, clusterIPs map[string]string, imported map[string][]string, endpoints int) bool {
	if si == nil || len(si.Status.Clusters) != len(v.sources) || !meta.IsStatusConditionTrue(si.Status.Conditions, "Ready") ||
		len(si.Spec.IPs) != 1 || clusterIPs[si.Annotations[derivedServiceAnnotation]] != si.Spec.IPs[0] {
		return false
	}
	for o, source := range v.sources {
		got := imported[si.Name+"/"+source]
		if len(got) != endpoints {
			return false
		}
		slices.Sort(got)
		if !slices.Equal(got, exportedEndpoints(o, i, endpoints)) {
			return false
		}
	}
	return true
}

// derivedServiceAnnotation names a ServiceImport's derived Service.
const derivedServiceAnnotation = "multicluster.kubernetes.io/derived-service"

// endpointState is an endpoint's address and conditions, as text.
func endpointState(ep discoveryv1.Endpoint) string {
	b := func(p *bool) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("%s %s %s %s", strings.Join(ep.Addresses, ","), b(ep.Conditions.Ready), b(ep.Conditions.Serving), b(ep.Conditions.Terminating))
}

// exportedEndpoints returns, sorted, the endpoints exporter o (bench owner
// o) exports for scale Service i, as endpointState writes them.
func exportedEndpoints(o, i, endpoints int) []string {
	s := endpointSlice("", "", "", benchIP(o, i, 0), endpoints)
	out := make([]string, 0, endpoints)
	for _, ep := range s.Endpoints {
		out = append(out, endpointState(ep))
	}
	slices.Sort(out)
	return out
}

// restartResult: the writes of a restart over the scale scenario's imports.
type restartResult struct {
	Window time.Duration
	Writes audit.Writes
}

// runRestart stops mcs-syncer, starts it again, and counts its writes from
// the start until it has settled: its reconciles stopped for quiet, and
// at least minWindow passed.
func (b *bench) runRestart(ctx context.Context, minWindow, quiet time.Duration) (*restartResult, error) {
	if err := b.stopSyncer(); err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := b.startSyncer(ctx); err != nil {
		return nil, err
	}
	if _, err := settle(ctx, b.syncer, t0, minWindow, quiet, 10*time.Minute); err != nil {
		return nil, err
	}
	sleep(ctx, time.Second)
	res := &restartResult{Window: time.Since(t0)}
	var err error
	res.Writes, err = audit.CountWrites(b.auditLogs(), t0, time.Now())
	return res, err
}

// settleWindows are the windows a restarted process is watched over:
// at least minWindow in all, and quiet without a reconcile.
func settleWindows(quick bool) (minWindow, quiet time.Duration) {
	if quick {
		return 5 * time.Second, 2 * time.Second
	}
	return 30 * time.Second, 10 * time.Second
}

// settle waits, at most limit after t0, until process p has settled
// after its start at t0: its reconciles stopped for quiet, and at least
// minWindow passed. It returns the time of its last reconcile seen. (A
// process that never stops reconciling is a finding, not slowness: the
// one fixed limit of the benchmarks.)
func settle(ctx context.Context, p *syncer.Process, t0 time.Time, minWindow, quiet, limit time.Duration) (time.Time, error) {
	ctx, cancel := context.WithDeadline(ctx, t0.Add(limit))
	defer cancel()
	last, lastChange := -1.0, time.Now()
	_, err := waitFor(ctx, "mcs-syncer settled after its restart", limit, func() (bool, string) {
		n, err := reconciles(ctx, p)
		if err != nil {
			return false, err.Error()
		}
		if n != last {
			last, lastChange = n, time.Now()
		}
		return time.Since(t0) >= minWindow && time.Since(lastChange) >= quiet, fmt.Sprintf("%.0f reconciles", n)
	})
	return lastChange, err
}

// reconciles returns the sum of a process's reconciles, every controller.
func reconciles(ctx context.Context, p *syncer.Process) (float64, error) {
	families, err := p.MetricFamilies(ctx)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, m := range families["controller_runtime_reconcile_total"].GetMetric() {
		sum += m.GetCounter().GetValue()
	}
	return sum, nil
}

// runIdle counts mcs-syncer's writes while nothing changes.
func (b *bench) runIdle(ctx context.Context, d time.Duration) (audit.Writes, error) {
	t0 := time.Now()
	sleep(ctx, d)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return audit.CountWrites(b.auditLogs(), t0, time.Now())
}
