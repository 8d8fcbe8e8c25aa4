package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/publish"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/audit"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/controlplane"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/workloads"
)

// hubLoadNamespace holds the hub load's Services.
const hubLoadNamespace = "hubload"

// floorEvery: one change in floorEvery is the relay floor's.
const floorEvery = 10

// hubLoadResult is what the hub load measured.
type hubLoadResult struct {
	// Server serves the hub: kube-apiserver or the generic control plane.
	Server                        string
	Members, Simulated, Importers int
	Publications                  int
	// Publish is the time the load generator took to write every
	// publication into the hub.
	Publish   time.Duration
	Converge  time.Duration
	Converged bool
	// ImportedEndpoints per importer; ImporterRSS of each importer once
	// converged.
	ImportedEndpoints int
	ImporterRSS       []int64
	// HubRSS is the hub's kube-apiserver and etcd; HubCPU their CPU per
	// second of wall time while the load ran.
	HubRSS     int64
	HubCPU     float64
	HubWatches int
	// MCS and Floor: every change's latency to every importer (a sample per
	// change and importer).
	MCS, Floor   []time.Duration
	Sent, Lost   int
	Wrong        int
	Rate         float64
	Load1        string
	Restart      time.Duration
	RestartReady time.Duration
	// Status is kubectl mcs status over the converged load.
	Status *statusFigure
	// RestartRSS is the restarted importer's RSS once it settled.
	RestartRSS   int64
	RestartWrite audit.Writes
	// ChangeInRestart is how long a change made as a restarted importer
	// answers (during its first sync) took to reach its cluster;
	// ChangeRestart is that restart's sync (to its last reconcile).
	ChangeInRestart, ChangeRestart time.Duration
	// Breakdown is where the first importer's time went under the load
	// (breakdown.go).
	Breakdown string
}

// hubSize is the clusterset of a hub load: its members, of which
// importers are real (testbed members running mcs-syncer), the rest
// simulated.
type hubSize struct {
	members, importers int
}

// parseHubSize reads one size of -hub-members: "N" (with the default
// importers) or "N:importers"; "0" is no hub load. Importers are testbed
// members, so at most the testbed's size (the largest -members).
func parseHubSize(s string, defaultImporters, testbed int) (hubSize, error) {
	members, importers, named := strings.Cut(s, ":")
	n, err := strconv.Atoi(members)
	if err != nil {
		return hubSize{}, fmt.Errorf("%q is not a number of members (N or N:importers)", s)
	}
	size := hubSize{members: n, importers: defaultImporters}
	if named {
		if size.importers, err = strconv.Atoi(importers); err != nil || size.importers < 1 || size.importers > testbed {
			return hubSize{}, fmt.Errorf("%q: importers %q are not in 1..%d (the largest -members)", s, importers, testbed)
		}
	}
	switch {
	case n == 0 && !named:
		return hubSize{}, nil
	case n <= size.importers || n > 1000:
		return hubSize{}, fmt.Errorf("%q is not in %d..1000 (more than its %d importers), nor 0", s, size.importers+1, size.importers)
	}
	return size, nil
}

// hubLoad is one run of the hub load: its clusterset, and whether the
// generic control plane serves the hub.
type hubLoad struct {
	hubSize
	generic bool
}

// hubLoads are the hub loads the flags ask for, in order: each size with
// kube-apiserver, the first also with the generic control plane.
func hubLoads(f *growthFlags) []hubLoad {
	var loads []hubLoad
	for i, size := range f.hubMembers {
		loads = append(loads, hubLoad{hubSize: size})
		if i == 0 && f.genericHub {
			loads = append(loads, hubLoad{hubSize: size, generic: true})
		}
	}
	return loads
}

func hubServer(generic bool) string {
	if generic {
		return "the generic control plane"
	}
	return "kube-apiserver"
}

// resetHubLoad removes what a hub load leaves, and waits until it is gone:
// the publications and markers in the hub, and the hub load's namespace
// (imports, the relay's mirrors) in the importers.
func (g *growth) resetHubLoad(ctx context.Context) error {
	for _, c := range g.bed.Clusters {
		if err := g.kube[c.Name].CoreV1().Namespaces().Delete(ctx, hubLoadNamespace, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	// One deletecollection of 25,000 publications outlasts the API
	// server's request timeout ("stream error: INTERNAL_ERROR") while the
	// deletion goes on: asked again, until none is left, while the count
	// goes down.
	var asked time.Time
	if _, err := waitFor(ctx, "the hub load's publications deleted", 5*time.Minute, func() (bool, string) {
		var list v1alpha1.PublishedExportList
		if err := g.hub.List(ctx, &list, client.InNamespace(controlplane.SystemNamespace), client.Limit(1)); err != nil {
			return false, err.Error()
		}
		left := len(list.Items) + int(ptr.Deref(list.RemainingItemCount, 0))
		if left > 0 && time.Since(asked) > 10*time.Second {
			asked = time.Now()
			if err := g.hub.DeleteAllOf(ctx, &v1alpha1.PublishedExport{}, client.InNamespace(controlplane.SystemNamespace)); err != nil {
				g.logf("hub load: delete the publications (%d left): %v", left, err)
			}
		}
		return left == 0, fmt.Sprintf("%d publications left", left)
	}); err != nil {
		return err
	}
	return g.namespaceGone(ctx, hubLoadNamespace)
}

// simName is the s-th simulated member.
func simName(s int) string { return fmt.Sprintf("sim-%03d", s) }

// simIP is the j-th address of simulated member s's i-th Service: from
// 100.64.0.0 on, every member's block after the last.
func (g *growth) simIP(s, i, j int) string {
	return formatIPv4(uint32(100)<<24 | uint32(64)<<16 + uint32((s*g.f.exported+i)*g.endpoints+j))
}

// publication is what simulated member s publishes of its i-th Service,
// as today's members do: a head and parts, or the head alone holding the
// endpoints of a Service that fits in one part.
func (g *growth) publication(s, i int) (head *v1alpha1.PublishedExport, parts []*v1alpha1.PublishedExport) {
	ep := endpointSlice("", "", "", g.simIP(s, i, 0), g.endpoints)
	_, trigger := triggerNow()
	es := &clusterset.ExportedService{
		Cluster: clusterset.ClusterID(simName(s)), Key: types.NamespacedName{Namespace: hubLoadNamespace, Name: hubServiceName(i)},
		ExportCreated: metav1.Now(),
		Spec: clusterset.ExportedSpec{Type: mcsv1beta1.ClusterSetIP,
			Ports: []mcsv1beta1.ServicePort{{Name: benchPort.Name, Protocol: benchPort.Protocol, Port: benchPort.Port}}},
		Endpoints: []reconciler.EndpointGroup{{AddressType: ep.AddressType, Ports: ep.Ports, Endpoints: ep.Endpoints}},
	}
	es.LastChangeTriggerTime, _ = time.Parse(time.RFC3339Nano, trigger)
	return publish.EncodeParts(es, controlplane.SystemNamespace, publish.DefaultMaxEndpointsPerPart)
}

func hubServiceName(i int) string { return fmt.Sprintf("h-%04d", i) }

// runHubLoad publishes what the simulated members would into the hub,
// starts the real importers in hub mode, then changes publications at
// the hub rate and times each change to every importer, next to the relay
// floor through the same hops; last, it restarts one importer.
func (g *growth) runHubLoad(ctx context.Context, size hubSize) (*hubLoadResult, error) {
	f := g.f
	importers := g.bed.Clusters[len(g.bed.Clusters)-size.importers:]
	res := &hubLoadResult{Members: size.members, Simulated: size.members - size.importers, Importers: size.importers, Rate: f.hubRate}
	sims := res.Simulated
	if err := g.ensureNamespace(ctx, hubLoadNamespace); err != nil {
		return nil, err
	}
	// The load generator: every simulated member's publications (each a
	// head and parts, written parts first, or a head alone) and its
	// marker, written as the cluster admin (exempt from the hub's
	// admission, which binds a member's identity to its own cluster). pubs
	// holds each Service's first object with endpoints: the one its
	// changes rewrite.
	start := time.Now()
	pubs := make([]*v1alpha1.PublishedExport, sims*f.exported)
	err := parallel(ctx, len(pubs)+sims, writers, func(ctx context.Context, k int) error {
		if k >= len(pubs) {
			return g.hub.Create(ctx, publish.Marker(clusterset.ClusterID(simName(k-len(pubs))), controlplane.SystemNamespace, 0))
		}
		head, parts := g.publication(k/f.exported, k%f.exported)
		for _, p := range append(parts, head) {
			if err := g.hub.Create(ctx, p); err != nil {
				return fmt.Errorf("publish %s: %w", p.Name, err)
			}
		}
		pubs[k] = head
		if len(parts) > 0 {
			pubs[k] = parts[0]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	res.Publish, res.Publications = time.Since(start), len(pubs)
	g.logf("hub load: %d publications and %d markers written into the hub in %s", len(pubs), sims, res.Publish.Round(time.Second))

	views, err := g.importViews(ctx, importers, hubLoadNamespace, nil)
	if err != nil {
		return nil, err
	}
	args := map[string][]string{}
	for _, c := range importers {
		conf := testbed.ClustersetConfig{Clusterset: "hubload",
			Hub: &testbed.HubSettings{Kubeconfig: filepath.Join(g.bed.StateDir, "hub", c.Name+".kubeconfig")}}
		for s := range sims {
			conf.Members = append(conf.Members, testbed.Member{ID: simName(s)})
		}
		for _, o := range importers {
			m := testbed.Member{ID: o.Name}
			if o == c {
				m.Kubeconfig, m.Context = c.KubeconfigPath, c.Context
			}
			conf.Members = append(conf.Members, m)
		}
		path, err := g.writeConfig("hubload-"+c.Name, conf)
		if err != nil {
			return nil, err
		}
		args[c.Name] = []string{"--clusterset-config", path, "--local-cluster", c.Name}
	}
	// The first importer's profiles (CPU under the load, heap once
	// converged) go into the state folder, for what the figures do not say.
	pprofPort, err := host.FreePort(false)
	if err != nil {
		return nil, err
	}
	pprof := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/", pprofPort)
	args[importers[0].Name] = append(args[importers[0].Name], "--pprof-bind-address", fmt.Sprintf("127.0.0.1:%d", pprofPort))
	h0, err := g.watches(ctx, testbed.HubName)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := g.startProcs(ctx, args); err != nil {
		return nil, err
	}
	defer g.stopAll()
	_, err = waitFor(ctx, "every importer to hold the hub load's imports", convergeStall, func() (bool, string) {
		return allComplete(views, func(v *importView) (bool, string) { return g.hubComplete(ctx, v, sims) })
	})
	res.Converged, res.Converge = err == nil, time.Since(t0)
	if err != nil {
		g.logf("hub load: NOT converged: %v", err)
		return res, nil
	}
	g.logf("hub load: %d importers converged in %s", len(importers), res.Converge.Round(time.Second))
	res.ImportedEndpoints = len(pubs) * g.endpoints
	for _, c := range importers {
		rss, _, err := memory(g.procs[c.Name].Pid())
		if err != nil {
			return nil, err
		}
		res.ImporterRSS = append(res.ImporterRSS, rss)
	}
	h1, err := g.watches(ctx, testbed.HubName)
	if err != nil {
		return nil, err
	}
	res.HubWatches = h1 - h0
	g.saveProfile(ctx, pprof+"heap", "importer-heap.pprof")
	hubPids, err := g.bed.Hub.Pids()
	if err != nil {
		return nil, err
	}
	for _, pid := range hubPids {
		rss, _, err := memory(pid)
		if err != nil {
			return nil, err
		}
		res.HubRSS += rss
	}
	var hubPidList []int
	for _, pid := range hubPids {
		hubPidList = append(hubPidList, pid)
	}
	hubCPU := func() (time.Duration, error) { return cpuTimes(hubPidList) }

	// The load.
	var consumers []string
	for _, v := range views {
		consumers = append(consumers, v.cluster)
		defer v.stop()
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	relay, err := g.newFanout(lctx, hubLoadNamespace, consumers, g.relayHopOf(modeHub))
	if err != nil {
		return nil, err
	}
	if err := relay.watchHop(lctx); err != nil {
		return nil, err
	}
	tr := newTracker()
	stop, err := g.observeViews(lctx, views, func(consumer string, s *discoveryv1.EndpointSlice, at time.Time) {
		if s.Name == relayDstName {
			tr.seen(pathFloor+"/"+consumer, relayService, s, at)
			return
		}
		if source := s.Labels[mcsv1beta1.LabelSourceCluster]; source != "" {
			tr.seen(pathMCS+"/"+consumer, s.Labels[mcsv1beta1.LabelServiceName]+"/"+source, s, at)
		}
	})
	if err != nil {
		return nil, err
	}
	defer stop()
	cpu0, err := hubCPU()
	if err != nil {
		return nil, err
	}
	where, err := startBreakdown(ctx, g.procs[importers[0].Name], importers[0].Name)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(1645, 4080))
	locks := make([]sync.Mutex, len(pubs))
	var floorMu sync.Mutex
	seq := make([]int, len(pubs))
	var hubSeq int
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var sendErr error
	fail := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		if sendErr == nil {
			sendErr = err
		}
	}
	var profiled sync.WaitGroup
	profiled.Add(1)
	go func() {
		defer profiled.Done()
		g.saveProfile(lctx, fmt.Sprintf("%sprofile?seconds=%d", pprof, max(1, int(f.hubDuration.Seconds()*2/3))), "importer-cpu.pprof")
	}()
	defer profiled.Wait()
	begin := time.Now()
	ticker := time.NewTicker(time.Duration(float64(time.Second) / f.hubRate))
	for tick := 0; time.Since(begin) < f.hubDuration; tick++ {
		if tick%floorEvery == floorEvery-1 {
			// The floor: the same change on the relay's object in the hub,
			// which the relay copies to every importer.
			wg.Add(1)
			go func() {
				defer wg.Done()
				// One floor change at a time, as one publication's: each
				// writes over the last (a loaded hub took longer than the
				// 200 ms between two, and the second one's update conflicted).
				floorMu.Lock()
				defer floorMu.Unlock()
				relay.mu.Lock()
				eps, address, ready := flip(relay.hopLast.Spec.Endpoints[0].Endpoints, hubSeq)
				hubSeq++
				t, text := triggerNow()
				for _, c := range consumers {
					tr.sent(pathFloor+"/"+c, relayService, change{trigger: t, address: address, ready: ready})
				}
				relay.mu.Unlock()
				if err := relay.toHop(lctx, eps, text); err != nil {
					fail(err)
				}
			}()
			res.Sent++
		} else {
			k := rng.IntN(len(pubs))
			wg.Add(1)
			go func() {
				defer wg.Done()
				locks[k].Lock()
				defer locks[k].Unlock()
				p := pubs[k].DeepCopy()
				eps, address, ready := flip(p.Spec.Endpoints[0].Endpoints, seq[k])
				seq[k]++
				p.Spec.Endpoints[0].Endpoints = eps
				t, text := triggerNow()
				p.Spec.LastChangeTriggerTime = text
				for _, c := range consumers {
					tr.sent(pathMCS+"/"+c, p.Spec.Name+"/"+p.Spec.Cluster, change{trigger: t, address: address, ready: ready})
				}
				if err := g.hub.Update(lctx, p); err != nil {
					fail(fmt.Errorf("change %s: %w", p.Name, err))
					return
				}
				pubs[k] = p
			}()
			res.Sent++
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ticker.C:
		}
	}
	ticker.Stop()
	wg.Wait()
	sent := time.Since(begin)
	if sendErr != nil {
		return nil, sendErr
	}
	// Those never seen are reported as lost.
	_, _ = waitFor(ctx, "the changes in flight", 30*time.Second, outstanding(tr))
	cpu1, err := hubCPU()
	if err != nil {
		return nil, err
	}
	if res.Breakdown, err = where.report(ctx, g.procs[importers[0].Name]); err != nil {
		return nil, err
	}
	res.HubCPU = float64(cpu1-cpu0) / float64(time.Since(begin))
	res.Load1 = loadAverage()
	tr.mu.Lock()
	for path, samples := range tr.samples {
		if strings.HasPrefix(path, pathFloor+"/") {
			res.Floor = append(res.Floor, samples...)
		} else {
			res.MCS = append(res.MCS, samples...)
		}
	}
	for _, n := range tr.wrong {
		res.Wrong += n
	}
	tr.mu.Unlock()
	res.Lost = tr.outstanding()
	g.logf("hub load: %d changes in %s (%.1f/s), %d lost", res.Sent, sent.Round(time.Millisecond), float64(res.Sent)/sent.Seconds(), res.Lost)
	cancel()

	// kubectl mcs status, once the changes are in: after the load, so that
	// its large reads take nothing from the load's figures.
	if res.Status, err = g.timeStatus(ctx, importers, sims); err != nil {
		return nil, err
	}

	// An importer's restart, nothing changing.
	first := importers[0]
	restartArgs := args[first.Name]
	if f.restartLogLevel > 0 {
		restartArgs = append(slices.Clone(restartArgs), fmt.Sprintf("--zap-log-level=%d", f.restartLogLevel))
	}
	r0, err := g.restart(ctx, first.Name, restartArgs)
	if err != nil {
		return nil, err
	}
	res.RestartReady = time.Since(r0)
	settled, err := g.settled(ctx, first.Name, r0)
	if err != nil {
		return nil, err
	}
	res.Restart = settled
	// What the importer holds after a restart: the imported slices its
	// cache lists before the Store has their exports cannot share them
	// (internal/imports/compact.go) until they are written again.
	if res.RestartRSS, _, err = memory(g.procs[first.Name].Pid()); err != nil {
		return nil, err
	}
	sleep(ctx, time.Second) // the last writes' audit events
	logs := []string{first.AuditLogPath, g.bed.Hub.AuditLogPath}
	end := time.Now()
	if res.RestartWrite, err = audit.CountWrites(logs, r0, end); err != nil {
		return nil, err
	}
	if res.RestartWrite.Total() > 0 {
		// What they were, from the audit logs the testbed's teardown deletes.
		listed, err := audit.ListWrites(logs, r0, end)
		if err != nil {
			return nil, err
		}
		g.logf("hub load: the restarted importer wrote %d times (its log: %s):\n  %s", len(listed), g.procs[first.Name].LogPath, strings.Join(listed, "\n  "))
	}
	res.ChangeInRestart, res.ChangeRestart, err = g.changeInRestart(ctx, first.Name, restartArgs, views[0], pubs[0])
	return res, err
}

// restart stops process name and starts it again with args; it returns
// when it was stopped, once the new one answers.
func (g *growth) restart(ctx context.Context, name string, args []string) (time.Time, error) {
	if err := g.procs[name].Stop(); err != nil {
		return time.Time{}, err
	}
	delete(g.procs, name)
	r0 := time.Now()
	return r0, g.startProcs(ctx, map[string][]string{name: args})
}

// changeInRestart restarts importer name again and, as soon as it
// answers (its first sync under way), changes one endpoint of pub in the
// hub: it returns how long the change took to reach the importer's
// cluster, and how long the restart took to its last reconcile
// (Submariner users report 8-10 minutes of staleness after a restart at
// 40 clusters: lighthouse#1706, #1957).
func (g *growth) changeInRestart(ctx context.Context, name string, args []string, view *importView, pub *v1alpha1.PublishedExport) (seen, sync time.Duration, err error) {
	if view.cluster != name {
		return 0, 0, fmt.Errorf("the view of %s is given for importer %s", view.cluster, name)
	}
	r0, err := g.restart(ctx, name, args)
	if err != nil {
		return 0, 0, err
	}
	p := pub.DeepCopy()
	eps, address, ready := flip(p.Spec.Endpoints[0].Endpoints, 0)
	p.Spec.Endpoints[0].Endpoints = eps
	_, p.Spec.LastChangeTriggerTime = triggerNow()
	if err := g.hub.Update(ctx, p); err != nil {
		return 0, 0, fmt.Errorf("change %s during the restart: %w", p.Name, err)
	}
	c0 := time.Now()
	if _, err = waitFor(ctx, "the change made during the restart", 5*time.Minute, func() (bool, string) {
		var list discoveryv1.EndpointSliceList
		if err := view.cache.List(ctx, &list, client.MatchingLabels{
			mcsv1beta1.LabelServiceName: p.Spec.Name, mcsv1beta1.LabelSourceCluster: p.Spec.Cluster}); err != nil {
			return false, err.Error()
		}
		for _, s := range list.Items {
			for _, ep := range s.Endpoints {
				if len(ep.Addresses) > 0 && ep.Addresses[0] == address && ptr.Deref(ep.Conditions.Ready, false) == ready {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("%s not yet ready=%v in %d slices", address, ready, len(list.Items))
	}); err != nil {
		return 0, 0, err
	}
	seen = time.Since(c0)
	last, err := g.settled(ctx, name, r0)
	return seen, last, err
}

// saveProfile saves the pprof profile at url in the state folder's
// profiles; a failure is logged, the benchmark goes on.
func (g *growth) saveProfile(ctx context.Context, url, name string) {
	err := func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		dir := filepath.Join(g.f.stateDir, "profiles")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		out, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, resp.Body); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	}()
	if err != nil {
		g.logf("profile %s not saved: %v", name, err)
		return
	}
	g.logf("profile saved: %s", filepath.Join(g.f.stateDir, "profiles", name))
}

// settled waits until process name's reconciles have stopped for a while
// and returns the time from t0 until its last reconcile.
func (g *growth) settled(ctx context.Context, name string, t0 time.Time) (time.Duration, error) {
	minWindow, quiet := settleWindows(g.quick)
	last, err := settle(ctx, g.procs[name], t0, minWindow, quiet, 15*time.Minute)
	return last.Sub(t0), err
}

// hubComplete reports whether a view holds the hub load's imports: every
// Service imported Ready from every simulated member, with all its
// endpoints ready; state counts them so far.
func (g *growth) hubComplete(ctx context.Context, v *importView, sims int) (done bool, state string) {
	var sis mcsv1beta1.ServiceImportList
	if err := v.cache.List(ctx, &sis, client.UnsafeDisableDeepCopy); err != nil {
		return false, err.Error()
	}
	complete := 0
	for i := range sis.Items {
		si := &sis.Items[i]
		if len(si.Status.Clusters) == sims && meta.IsStatusConditionTrue(si.Status.Conditions, "Ready") && len(si.Spec.IPs) > 0 {
			complete++
		}
	}
	var list discoveryv1.EndpointSliceList
	if err := v.cache.List(ctx, &list, client.UnsafeDisableDeepCopy, client.HasLabels{mcsv1beta1.LabelSourceCluster}); err != nil {
		return false, err.Error()
	}
	ready := 0
	for i := range list.Items {
		ready += workloads.CountReady(list.Items[i].Endpoints)
	}
	want := sims * g.f.exported * g.endpoints
	return complete >= g.f.exported && ready == want,
		fmt.Sprintf("%s: %d of %d ServiceImports Ready from %d members, %d of %d endpoints ready", v.cluster, complete, g.f.exported, sims, ready, want)
}
