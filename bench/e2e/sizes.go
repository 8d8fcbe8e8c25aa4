package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	v1alpha1 "github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/publish"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/syncer"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/workloads"
)

// The sizes phase of make bench-scale (issue 45): what one endpoint's
// change costs as the Service that holds it grows, in each mode at the
// smallest N, against the relay floor (one part-sized object per hop); the
// bytes the hub sends per change; and the import of one large Service
// against a plain client that writes the same slices.

// sizesNamespace holds the sizes phase's Services in every member.
const sizesNamespace = "sizes"

// Bench owners (benchIP) of the sizes phase's addresses: the Services of
// each size, and the large import.
const (
	ownerSizes  = 5
	ownerImport = 6
)

// sizeResult is one Service size in one mode.
type sizeResult struct {
	Mode      string
	Endpoints int
	// Import is the time from the ServiceExport's creation until every
	// member imported every endpoint.
	Import         time.Duration
	Latency, Floor []time.Duration
	// HubBytes is what the hub sent its watchers of publications per
	// change (hub mode; the relay's share taken out), Watchers how many
	// watch the changed member's publications, PartBytes the size of one
	// part of DefaultMaxEndpointsPerPart endpoints as JSON.
	HubBytes  float64
	Watchers  int
	PartBytes int
}

// importResult is the large import in one mode, against its floor.
type importResult struct {
	Mode          string
	Endpoints     int
	Import, Floor time.Duration
}

// runSizes runs the sizes phase at N = the smallest -members.
func (g *growth) runSizes(ctx context.Context, rep *growthReport) error {
	n := g.f.members[0]
	members := g.bed.Clusters[:n]
	if err := g.ensureNamespace(ctx, sizesNamespace); err != nil {
		return err
	}
	views, err := g.importViews(ctx, members, sizesNamespace, []string{memberName(0)})
	if err != nil {
		return err
	}
	defer func() {
		for _, v := range views {
			v.stop()
		}
	}()
	for _, mode := range g.f.modes {
		args, err := g.procArgs(n, mode)
		if err != nil {
			return err
		}
		// Each process's CPU profile while the largest Service changes
		// goes into the state folder (what takes a change's time where the
		// figures only say how much).
		pprofs := map[string]string{}
		for name := range args {
			port, err := host.FreePort(false)
			if err != nil {
				return err
			}
			args[name] = append(args[name], "--pprof-bind-address", fmt.Sprintf("127.0.0.1:%d", port))
			pprofs[name] = fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/", port)
		}
		if err := g.startProcs(ctx, args); err != nil {
			return err
		}
		var growthViews []*importView
		for _, c := range members {
			growthViews = append(growthViews, g.views[c.Name])
		}
		// A quiet start: the growth Services imported first.
		if _, err := waitFor(ctx, "every import complete in every member", convergeStall, func() (bool, string) {
			return allComplete(growthViews, func(v *importView) (bool, string) { return v.complete(ctx, g.f.exported, g.endpoints) })
		}); err != nil {
			return fmt.Errorf("sizes, %s mode: %w", mode, err)
		}
		for _, size := range g.f.sizes {
			var profiled map[string]string
			if size == slices.Max(g.f.sizes) && !g.f.quick { // a smoke run waits for no profile
				profiled = pprofs
			}
			r, err := g.measureSize(ctx, mode, members, views, size, profiled)
			if err != nil {
				return fmt.Errorf("sizes, %s mode, %d endpoints: %w", mode, size, err)
			}
			rep.sizes = append(rep.sizes, r)
		}
		if g.f.sizeImport > 0 {
			var profiled map[string]string
			if !g.f.quick {
				profiled = pprofs
			}
			r, err := g.measureImport(ctx, mode, views, profiled)
			if err != nil {
				return fmt.Errorf("sizes, %s mode, import of %d endpoints: %w", mode, g.f.sizeImport, err)
			}
			rep.imports = append(rep.imports, r)
		}
		if err := g.resetSizes(ctx); err != nil {
			return fmt.Errorf("sizes, %s mode: clean up: %w", mode, err)
		}
	}
	return nil
}

// procArgs are the flags of each mcs-syncer process of mode in a
// clusterset of the first n members, by process name.
func (g *growth) procArgs(n int, mode string) (map[string][]string, error) {
	if mode == modeCentral {
		path, err := g.configPath(n, mode, "")
		if err != nil {
			return nil, err
		}
		return map[string][]string{"central": {"--clusterset-config", path}}, nil
	}
	args := map[string][]string{}
	for _, c := range g.bed.Clusters[:n] {
		path, err := g.configPath(n, mode, c.Name)
		if err != nil {
			return nil, err
		}
		args[c.Name] = []string{"--clusterset-config", path, "--local-cluster", c.Name}
	}
	return args, nil
}

// createSizedExport creates in the first member Service ns/name of n ready
// endpoints of bench owner o, in slices of at most 1,000 named
// <name>-<i>, and its ServiceExport.
func (g *growth) createSizedExport(ctx context.Context, ns, name string, o, n int) error {
	cs := g.kube[memberName(0)]
	if _, err := create(ctx, cs.CoreV1().Services(ns).Create, sizedService(ns, name)); err != nil {
		return err
	}
	if err := parallel(ctx, (n+999)/1000, writers, func(ctx context.Context, i int) error {
		_, err := create(ctx, cs.DiscoveryV1().EndpointSlices(ns).Create, sizedSlice(ns, name, name, o, i, n))
		return err
	}); err != nil {
		return err
	}
	se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	return g.ctrl[memberName(0)].Create(ctx, se)
}

// sizedService is the Service ns/name of a sized export.
func sizedService(ns, name string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{benchPort}}}
}

// sizedSlice is source slice i, <prefix>-<i>, of a sized export of
// Service ns/name: at most 1,000 of its n endpoints of bench owner o.
func sizedSlice(ns, prefix, name string, o, i, n int) *discoveryv1.EndpointSlice {
	return endpointSlice(ns, fmt.Sprintf("%s-%d", prefix, i), name, benchIP(o, i, 0), min(1000, n-i*1000))
}

// readyFrom counts the ready endpoints of ns/name from the first member
// that view holds.
func readyFrom(ctx context.Context, v *importView, ns, name string) (int, error) {
	var list discoveryv1.EndpointSliceList
	if err := v.cache.List(ctx, &list, client.InNamespace(ns), client.UnsafeDisableDeepCopy, client.MatchingLabels{
		mcsv1beta1.LabelServiceName: name, mcsv1beta1.LabelSourceCluster: memberName(0)}); err != nil {
		return 0, err
	}
	ready := 0
	for i := range list.Items {
		ready += workloads.CountReady(list.Items[i].Endpoints)
	}
	return ready, nil
}

// importedEverywhere waits until every view holds the n ready endpoints of
// ns/name, and returns how long that took from since.
func (g *growth) importedEverywhere(ctx context.Context, views []*importView, ns, name string, n int, since time.Time) (time.Duration, error) {
	_, err := waitFor(ctx, fmt.Sprintf("%s imported everywhere", name), convergeStall, func() (bool, string) {
		return allComplete(views, func(v *importView) (bool, string) {
			got, err := readyFrom(ctx, v, ns, name)
			if err != nil {
				return false, err.Error()
			}
			return got == n, fmt.Sprintf("%s: %d of %d endpoints", v.cluster, got, n)
		})
	})
	return time.Since(since), err
}

// measureSize exports a Service of size endpoints from the first member,
// waits for its import, then times changes of one endpoint against the
// relay floor and, in hub mode, counts the hub's bytes. While the changes
// are timed, a CPU profile of each process of profile (name: its pprof
// URL) is saved as sizes-<mode>-<size>-<name>.cpu.pprof.
func (g *growth) measureSize(ctx context.Context, mode string, members []*testbed.Cluster, views []*importView, size int, profile map[string]string) (*sizeResult, error) {
	name := fmt.Sprintf("size-%d", size)
	r := &sizeResult{Mode: mode, Endpoints: size, PartBytes: partBytes()}
	t0 := time.Now()
	if err := g.createSizedExport(ctx, sizesNamespace, name, ownerSizes, size); err != nil {
		return nil, err
	}
	var err error
	if r.Import, err = g.importedEverywhere(ctx, views, sizesNamespace, name, size, t0); err != nil {
		return nil, err
	}
	var before hubWatchBytes
	if mode == modeHub {
		if before, err = g.hubWatchBytes(ctx); err != nil {
			return nil, err
		}
	}
	target := changeTarget{ns: sizesNamespace, service: name, slice: name + "-0", views: views, relayEndpoints: min(size, 1000)}
	profiling := g.profileEach(ctx, profile, func(proc string) string { return fmt.Sprintf("sizes-%s-%d-%s.cpu.pprof", mode, size, proc) })
	r.Latency, r.Floor, err = g.timeChanges(ctx, members, g.relayHopOf(mode), target)
	profiling.Wait()
	if err != nil {
		return nil, err
	}
	if mode == modeHub {
		after, err := g.hubWatchBytes(ctx)
		if err != nil {
			return nil, err
		}
		// The relay's hop is a publication too, sent to its one watcher
		// (the relay) once per floor change.
		relay, err := json.Marshal(relayObject(sizesNamespace, min(size, partSize)))
		if err != nil {
			return nil, err
		}
		r.HubBytes = (after.bytes - before.bytes - float64(len(r.Floor)*len(relay))) / float64(len(r.Latency))
		r.Watchers = len(members) // the other members' readers and the member's own publisher
	}
	g.logf("sizes: %s mode, %d endpoints: imported in %s, change p50 %s ms (floor %s ms)%s",
		mode, size, r.Import.Round(10*time.Millisecond), ms(percentile(r.Latency, 50)), ms(percentile(r.Floor, 50)), hubBytesNote(r))
	return r, nil
}

func hubBytesNote(r *sizeResult) string {
	if r.Mode != modeHub {
		return ""
	}
	return fmt.Sprintf(", hub sent %.0f bytes per change (one part: %d bytes, %d watchers)", r.HubBytes, r.PartBytes, r.Watchers)
}

// partBytes is the size, as JSON, of a part of DefaultMaxEndpointsPerPart
// of the bench's endpoints: the largest part of an export of one more
// (an export of one part's worth is published whole, in its head).
func partBytes() int {
	s := endpointSlice(sizesNamespace, "", "x", benchIP(ownerSizes, 0, 0), partSize+1)
	es := &clusterset.ExportedService{Cluster: clusterset.ClusterID(memberName(0)), Key: types.NamespacedName{Namespace: sizesNamespace, Name: "x"},
		Endpoints: []reconciler.EndpointGroup{{AddressType: s.AddressType, Ports: s.Ports, Endpoints: s.Endpoints}}}
	_, parts := publish.EncodeParts(es, "mcs-system", partSize)
	largest := 0
	for _, p := range parts {
		raw, _ := json.Marshal(p)
		largest = max(largest, len(raw))
	}
	return largest
}

// hubWatchBytes is what the hub's API server has sent its watchers of
// publications, from its apiserver_watch_events_sizes histogram.
type hubWatchBytes struct{ bytes, events float64 }

func (g *growth) hubWatchBytes(ctx context.Context) (hubWatchBytes, error) {
	raw, err := g.kube[testbed.HubName].CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return hubWatchBytes{}, fmt.Errorf("metrics of the hub: %w", err)
	}
	families, err := syncer.ParseMetrics(string(raw))
	if err != nil {
		return hubWatchBytes{}, fmt.Errorf("metrics of the hub: %w", err)
	}
	var out hubWatchBytes
	family := families["apiserver_watch_events_sizes"]
	if family == nil {
		return out, fmt.Errorf("the hub's API server has no apiserver_watch_events_sizes")
	}
	for _, m := range family.GetMetric() {
		// "resource" since Kubernetes 1.32, "kind" before.
		if l := syncer.Labels(m); l["resource"] == "publishedexports" || l["kind"] == "PublishedExport" {
			out.bytes += m.GetHistogram().GetSampleSum()
			out.events += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return out, nil
}

// profileEach saves, in the background, a 10 s CPU profile of each
// process of profile (name: its pprof URL) as file(name); wait on the
// result before going on.
func (g *growth) profileEach(ctx context.Context, profile map[string]string, file func(proc string) string) *sync.WaitGroup {
	var profiling sync.WaitGroup
	for proc, url := range profile {
		profiling.Go(func() { g.saveProfile(ctx, url+"profile?seconds=10", file(proc)) })
	}
	return &profiling
}

// measureImport exports a Service of -size-import endpoints from the first
// member and times its import into every member, against the floor: a
// plain client that writes the same chain (importFloor: the source's
// objects, one object per part into the relay's hop if any, and as many
// slices of --max-endpoints-per-slice endpoints as mcs-syncer imports into
// every member), 16 writes in flight. The first 10 s of the import are
// profiled in each process of profile (name: its pprof URL), saved as
// sizes-<mode>-import-<n>-<name>.cpu.pprof.
func (g *growth) measureImport(ctx context.Context, mode string, views []*importView, profile map[string]string) (*importResult, error) {
	n := g.f.sizeImport
	r := &importResult{Mode: mode, Endpoints: n}
	name := fmt.Sprintf("import-%d", n)
	profiling := g.profileEach(ctx, profile, func(proc string) string { return fmt.Sprintf("sizes-%s-import-%d-%s.cpu.pprof", mode, n, proc) })
	t0 := time.Now()
	err := g.createSizedExport(ctx, sizesNamespace, name, ownerImport, n)
	if err == nil {
		r.Import, err = g.importedEverywhere(ctx, views, sizesNamespace, name, n, t0)
	}
	profiling.Wait()
	if err != nil {
		return nil, err
	}
	// The floor, into a namespace of its own in each cluster that nothing
	// watches but the API servers (and one in the relay's hop): the
	// chain a relay writes, in one pool of writers taken in chain order,
	// so that a hop's writes follow the last hop's.
	floorNS := "sizes-floor"
	clusters := []string{memberName(0)}
	for _, v := range views {
		if v.cluster != memberName(0) {
			clusters = append(clusters, v.cluster)
		}
	}
	for _, c := range clusters {
		if _, err := g.kube[c].CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: floorNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	hop := g.relayHopOf(mode)
	chain := importFloorChain(n, hop != nil, len(views))
	if hop != nil {
		if err := hop.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: importFloorHopNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	t1 := time.Now()
	if err := parallel(ctx, chain.writes(), writers, func(ctx context.Context, k int) error {
		return g.writeImportFloor(ctx, chain, hop, floorNS, views, k)
	}); err != nil {
		return nil, err
	}
	r.Floor = time.Since(t1)
	for _, c := range clusters {
		if err := g.kube[c].CoreV1().Namespaces().Delete(ctx, floorNS, metav1.DeleteOptions{}); err != nil {
			return nil, err
		}
	}
	if err := g.namespaceGone(ctx, floorNS); err != nil {
		return nil, err
	}
	if hop != nil {
		if err := hop.client.DeleteAllOf(ctx, &v1alpha1.PublishedExport{}, client.InNamespace(importFloorHopNamespace)); err != nil {
			return nil, err
		}
	}
	g.logf("sizes: %s mode: %d endpoints imported into every member in %s (the floor wrote them in %s: %s)", mode, n, r.Import.Round(10*time.Millisecond), r.Floor.Round(10*time.Millisecond), chain)
	return r, nil
}

// resetSizes stops the processes and removes the sizes phase's Services
// and what mcs-syncer made of them, then makes the namespace anew.
func (g *growth) resetSizes(ctx context.Context) error {
	if err := g.reset(ctx); err != nil {
		return err
	}
	for _, c := range g.bed.Clusters {
		if err := g.kube[c.Name].CoreV1().Namespaces().Delete(ctx, sizesNamespace, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if err := g.namespaceGone(ctx, sizesNamespace); err != nil {
		return err
	}
	return g.ensureNamespace(ctx, sizesNamespace)
}

// importFloorHopNamespace holds the large import's floor objects in the
// relay's hop, apart from the publications that mcs-syncer reads.
const importFloorHopNamespace = "bench-import-floor"

// importFloor is the chain of writes that carries an export of n endpoints
// from its source cluster into every consumer at least: the source's
// Service and slices of 1,000 (sizedService, sizedSlice, as
// createSizedExport writes them; its ServiceExport, one object more, is
// left out), a part-sized object per part into the relay's hop (relayHop:
// hub and direct mode), and the imported slices of partSize into each
// consumer. mcs-syncer's measured import carries the same chain.
type importFloor struct {
	n                   int
	source, hop, slices int // writes per hop; slices per consumer
	consumers           int
}

func importFloorChain(n int, viaHop bool, consumers int) importFloor {
	f := importFloor{n: n, source: 1 + (n+999)/1000, slices: (n + partSize - 1) / partSize, consumers: consumers}
	if viaHop {
		f.hop = f.slices
	}
	return f
}

func (f importFloor) writes() int { return f.source + f.hop + f.slices*f.consumers }

func (f importFloor) String() string {
	return fmt.Sprintf("%d source writes, %d into the relay's hop, %d into each of %d consumers, %d in flight", f.source, f.hop, f.slices, f.consumers, writers)
}

// writeImportFloor makes the floor's write k, in chain order.
func (g *growth) writeImportFloor(ctx context.Context, f importFloor, hop *relayHop, ns string, views []*importView, k int) error {
	src := g.kube[memberName(0)]
	switch {
	case k == 0:
		_, err := create(ctx, src.CoreV1().Services(ns).Create, sizedService(ns, "floor"))
		return err
	case k < f.source:
		_, err := create(ctx, src.DiscoveryV1().EndpointSlices(ns).Create, sizedSlice(ns, "floor-src", "floor", ownerImport, k-1, f.n))
		return err
	case k < f.source+f.hop:
		i := k - f.source
		obj := relayObject(ns, min(partSize, f.n-i*partSize))
		obj.Namespace, obj.Name = importFloorHopNamespace, fmt.Sprintf("floor.%s.%d", ns, i)
		return hop.client.Create(ctx, obj)
	default:
		k -= f.source + f.hop
		v, i := views[k/f.slices], k%f.slices
		_, err := create(ctx, g.kube[v.cluster].DiscoveryV1().EndpointSlices(ns).Create,
			endpointSlice(ns, fmt.Sprintf("floor-%d", i), "floor", benchIP(ownerImport, i/10, i%10*partSize), min(partSize, f.n-i*partSize)))
		return err
	}
}
