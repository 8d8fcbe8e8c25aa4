package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	discoveryclient "k8s.io/client-go/kubernetes/typed/discovery/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/audit"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/controlplane"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/syncer"
)

// The modes the growth benchmark compares.
const (
	modeCentral = "central"
	modeDirect  = "direct"
	modeHub     = "hub"
)

// growthFlags configure `e2e growth` (make bench-scale).
type growthFlags struct {
	members                      []int
	modes                        []string
	exported, endpoints, private int
	changes                      int
	idle                         time.Duration
	hubMembers                   []hubSize
	importers                    int
	genericHub                   bool
	hubRate                      float64
	hubDuration                  time.Duration
	// sizes are the endpoints per Service of the sizes phase, sizeImport
	// those of its large import (0: none).
	sizes      []int
	sizeImport int
	quick      bool
	stateDir   string
	// restartLogLevel is the restarted importer's --zap-log-level (0:
	// the default): 2 logs every imported slice it writes, and why.
	restartLogLevel int
}

func parseGrowthFlags(args []string, stderr io.Writer) (*growthFlags, error) {
	f := &growthFlags{}
	fs := flag.NewFlagSet("bench-e2e growth", flag.ContinueOnError)
	fs.SetOutput(stderr)
	members := fs.String("members", "3,6,10", "clusterset sizes N to measure, comma-separated (each at least 3; the testbed has as many members as the largest)")
	modes := fs.String("modes", "central,direct,hub", "modes to measure, comma-separated")
	fs.IntVar(&f.exported, "exported", 100, "Services exported by each of the 2 exporting members")
	fs.IntVar(&f.endpoints, "endpoints", 10, "endpoints per Service, exported or not (1..1000)")
	fs.IntVar(&f.private, "private", 2000, "Services that are not exported, in every member")
	fs.IntVar(&f.changes, "changes", 10, "changes timed per N and mode, each to every consumer, interleaved with the relay floor's")
	fs.DurationVar(&f.idle, "idle", 20*time.Second, "window over which idle CPU is measured, per N and mode")
	hubMembers := fs.String("hub-members", "255,1000:1", "members of the simulated clusterset of each hub load, comma-separated, each with its real importers after a colon (default -importers; 0: no hub load)")
	fs.BoolVar(&f.genericHub, "generic-hub", true, "run the first hub load again with the hub served by the KEP-4080 generic control plane")
	fs.IntVar(&f.importers, "importers", 3, "real importers of a hub load that names none (testbed members running mcs-syncer in hub mode)")
	fs.Float64Var(&f.hubRate, "hub-rate", 50, "changes per second the hub load's simulated members publish, in all")
	fs.DurationVar(&f.hubDuration, "hub-duration", 30*time.Second, "how long the hub load publishes changes")
	fs.IntVar(&f.restartLogLevel, "restart-log-level", 2, "log level of the hub load's restarted importer (2: every imported slice it writes, with its source; 0: the default)")
	sizes := fs.String("sizes", "10,1000,10000,50000", "endpoints per Service of the sizes phase (the cost of one endpoint's change as its Service grows), at the smallest -members, comma-separated (empty: no sizes phase)")
	fs.IntVar(&f.sizeImport, "size-import", 50000, "endpoints of the sizes phase's large import, timed against a plain client writing the same slices (0: none)")
	fs.BoolVar(&f.quick, "quick", false, "everything small and short: a smoke test of the program")
	fs.StringVar(&f.stateDir, "state", "", "state folder (testbed, logs); it must not exist, be empty, or be one this benchmark made (default <repo>/.cache/bench-scale)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if f.quick {
		// Small and short, except where a flag says otherwise. The hub
		// load runs once: on the generic control plane it would prove
		// again what make e2e's generic-hub tests do, for a minute or more
		// of CI.
		set := map[string]bool{}
		fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
		for name, value := range map[string]string{"members": "3,4", "exported": "10", "private": "50", "changes": "3",
			"idle": "3s", "hub-members": "12", "hub-duration": "4s", "sizes": "10,300", "size-import": "2000", "generic-hub": "false"} {
			if !set[name] {
				if err := fs.Set(name, value); err != nil {
					return nil, err
				}
			}
		}
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, s := range strings.Split(*members, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 3 || n > 40 {
			return nil, fmt.Errorf("-members: %q is not a clusterset size in 3..40", s)
		}
		f.members = append(f.members, n)
	}
	slices.Sort(f.members)
	f.members = slices.Compact(f.members)
	for _, m := range strings.Split(*modes, ",") {
		if !slices.Contains([]string{modeCentral, modeDirect, modeHub}, m) {
			return nil, fmt.Errorf("-modes: unknown mode %q (known: central, direct, hub)", m)
		}
		f.modes = append(f.modes, m)
	}
	switch {
	case f.exported < 1 || f.exported > 1000:
		return nil, fmt.Errorf("-exported: %d is outside 1..1000", f.exported)
	case f.endpoints < 1 || f.endpoints > 1000:
		return nil, fmt.Errorf("-endpoints: %d is outside 1..1000", f.endpoints)
	case f.private < 0 || f.private*f.endpoints > 60000:
		return nil, fmt.Errorf("-private: %d Services of %d endpoints do not fit a member's address block (60,000 endpoints)", f.private, f.endpoints)
	case f.changes < 1:
		return nil, fmt.Errorf("-changes: %d is not positive", f.changes)
	case f.idle <= 0:
		return nil, fmt.Errorf("-idle: %s is not positive", f.idle)
	case f.importers < 1 || f.importers > f.members[len(f.members)-1]:
		return nil, fmt.Errorf("-importers: %d is outside 1..%d (the largest -members)", f.importers, f.members[len(f.members)-1])
	case !(f.hubRate > 0):
		return nil, fmt.Errorf("-hub-rate: %v is not positive", f.hubRate)
	case f.hubDuration <= 0:
		return nil, fmt.Errorf("-hub-duration: %s is not positive", f.hubDuration)
	}
	for _, v := range strings.Split(*sizes, ",") {
		if strings.TrimSpace(v) == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > 60000 {
			return nil, fmt.Errorf("-sizes: %q is not a number of endpoints in 1..60000", v)
		}
		f.sizes = append(f.sizes, n)
	}
	if f.sizeImport < 0 || f.sizeImport > 60000 {
		return nil, fmt.Errorf("-size-import: %d is outside 0..60000", f.sizeImport)
	}
	largest := f.members[len(f.members)-1]
	for _, s := range strings.Split(*hubMembers, ",") {
		size, err := parseHubSize(strings.TrimSpace(s), f.importers, largest)
		if err != nil {
			return nil, fmt.Errorf("-hub-members: %w", err)
		}
		if size.members > 0 {
			f.hubMembers = append(f.hubMembers, size)
		}
	}
	return f, nil
}

// growthNamespace holds the growth benchmark's Services in every member.
const growthNamespace = "scale"

// exporters of the growth benchmark: the first two members, bench owners
// 0 and 1 (benchIP).
const exporters = 2

// memberName is the i-th member of the growth testbed.
func memberName(i int) string { return fmt.Sprintf("m%02d", i) }

// privateIP is the j-th address of the i-th non-exported Service of
// member m: 10.(20+m).0.0 plus i*endpoints+j.
func privateIP(m, i, j, endpoints int) string {
	return formatIPv4(uint32(10)<<24 | uint32(20+m)<<16 + uint32(i*endpoints+j))
}

// growth is one run of the growth benchmark.
type growth struct {
	*bench
	f     *growthFlags
	hub   client.Client
	views map[string]*importView
	// procs are the mcs-syncer processes of the mode being measured.
	procs map[string]*syncer.Process
}

// growthResult is what one (N, mode) measured.
type growthResult struct {
	N    int
	Mode string
	// NoPrivate: measured before the members held Services that are not
	// exported.
	NoPrivate bool
	// Processes is how many mcs-syncer processes ran.
	Processes int
	// MemberWatches: the watches mcs-syncer held on one member's API server
	// (one that exports nothing); HubWatches on the hub.
	MemberWatches, HubWatches int
	// RSS: summed over the processes, and the largest one's.
	RSSSum, RSSMax int64
	// IdleCPU: CPU time per second of wall time, summed over the
	// processes, while nothing changed.
	IdleCPU   float64
	Converge  time.Duration
	Converged bool
	// Latency and Floor: per change, until every member held it.
	Latency, Floor []time.Duration
	Load1          string
}

func runGrowthBench(ctx context.Context, f *growthFlags) error {
	root, err := host.RepoRoot()
	if err != nil {
		return err
	}
	if f.stateDir == "" {
		f.stateDir = filepath.Join(root, ".cache", "bench-scale")
	}
	if err := prepareState(f.stateDir); err != nil {
		return err
	}
	g := &growth{
		bench: &bench{
			kube: map[string]kubernetes.Interface{}, ctrl: map[string]client.Client{},
			syncerBin: filepath.Join(f.stateDir, "mcs-syncer"), logDir: filepath.Join(f.stateDir, "logs"),
			endpoints: f.endpoints, quick: f.quick,
		},
		f: f, views: map[string]*importView{}, procs: map[string]*syncer.Process{},
	}
	began := time.Now()
	g.logf("building mcs-syncer")
	if err := syncer.Build(ctx, g.syncerBin); err != nil {
		return err
	}
	policy, err := audit.WritePolicy(f.stateDir)
	if err != nil {
		return err
	}
	var names []string
	for i := range f.members[len(f.members)-1] {
		names = append(names, memberName(i))
	}
	bed, err := testbed.Start(ctx, testbed.Options{
		Clusters: names, Zones: 1, Hub: true, AuditPolicy: policy,
		StateDir: filepath.Join(f.stateDir, "testbed"), TeardownOnExit: true, Log: os.Stderr,
	})
	if err != nil {
		return err
	}
	g.bed = bed
	defer func() {
		g.stopAll()
		if err := bed.Stop(context.Background()); err != nil {
			g.logf("%v", err)
		}
	}()
	for _, c := range bed.Clusters {
		rc := g.restConfig(c)
		if g.kube[c.Name], err = kubernetes.NewForConfig(rc); err != nil {
			return err
		}
		if g.ctrl[c.Name], err = client.New(rc, client.Options{Scheme: controlplane.Scheme()}); err != nil {
			return err
		}
	}
	hubRC := bed.Hub.RESTConfig()
	hubRC.QPS, hubRC.Burst, hubRC.UserAgent = -1, 0, "mcs-bench"
	if g.hub, err = client.New(hubRC, client.Options{Scheme: controlplane.Scheme()}); err != nil {
		return err
	}
	if g.kube[testbed.HubName], err = kubernetes.NewForConfig(hubRC); err != nil {
		return err
	}
	if err := g.populate(ctx, false); err != nil {
		return err
	}
	views, err := g.importViews(ctx, bed.Clusters, growthNamespace, names[:exporters])
	if err != nil {
		return err
	}
	for _, v := range views {
		g.views[v.cluster] = v
		defer v.stop()
	}
	rep := &growthReport{flags: f, began: began}
	// The reference for "independent of non-exported objects": the
	// smallest clusterset in the publishing modes before any member holds
	// a Service that is not exported.
	for _, mode := range f.modes {
		if mode == modeCentral {
			continue
		}
		g.logf("growth: N=%d, %s mode, no Service that is not exported", f.members[0], mode)
		r, err := g.measure(ctx, f.members[0], mode)
		if err != nil {
			return err
		}
		r.NoPrivate = true
		rep.results = append(rep.results, r)
	}
	if err := g.populate(ctx, true); err != nil {
		return err
	}
	for _, n := range f.members {
		for _, mode := range f.modes {
			g.logf("growth: N=%d, %s mode", n, mode)
			r, err := g.measure(ctx, n, mode)
			if err != nil {
				return err
			}
			rep.results = append(rep.results, r)
		}
	}
	if len(f.sizes) > 0 || f.sizeImport > 0 {
		g.logf("sizes: N=%d, Services of %v endpoints, an import of %d", f.members[0], f.sizes, f.sizeImport)
		if err := g.runSizes(ctx, rep); err != nil {
			rep.elapsed = time.Since(began)
			rep.print(os.Stdout)
			return err
		}
	}
	for i, load := range hubLoads(f) {
		err := func() error {
			if i > 0 {
				if err := g.resetHubLoad(ctx); err != nil {
					return err
				}
			}
			if err := g.bed.Hub.ServeGeneric(ctx, load.generic); err != nil {
				return err
			}
			g.logf("hub load: %d members (%d simulated) publishing %d Services x %d endpoints each, %g changes/s; %d real importers; the hub served by %s",
				load.members, load.members-load.importers, f.exported, f.endpoints, f.hubRate, load.importers, hubServer(load.generic))
			h, err := g.runHubLoad(ctx, load.hubSize)
			if err != nil {
				return err
			}
			h.Server = hubServer(load.generic)
			rep.hubLoads = append(rep.hubLoads, h)
			// Its figures in the log at once: the next load's reset (51,000
			// publications deleted) can take longer than a session has.
			g.logf("hub load done (%s): importer RSS %d B per imported endpoint, change p50 %s ms against the relay's %s ms, %d writes after a restart, a change during another restart in %s (its sync %s)",
				h.Server, slices.Max(append([]int64{0}, h.ImporterRSS...))/int64(max(1, h.ImportedEndpoints)),
				ms(percentile(h.MCS, 50)), ms(percentile(h.Floor, 50)), h.RestartWrite.Total(),
				h.ChangeInRestart.Round(10*time.Millisecond), h.ChangeRestart.Round(10*time.Millisecond))
			return nil
		}()
		if err != nil {
			// What was measured is printed all the same: a long run's
			// figures are not lost to a failure in its last part.
			rep.elapsed = time.Since(began)
			rep.print(os.Stdout)
			return fmt.Errorf("hub load, %d members, %s: %w", load.members, hubServer(load.generic), err)
		}
	}
	rep.elapsed = time.Since(began)
	rep.print(os.Stdout)
	if f.quick {
		return rep.smokeCheck()
	}
	return nil
}

// populate creates, with mcs-syncer stopped, in every member Services
// that are not exported (private) or the exporters' exported Services.
func (g *growth) populate(ctx context.Context, private bool) error {
	start := time.Now()
	if err := g.ensureNamespace(ctx, growthNamespace); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(g.bed.Clusters))
	for m, c := range g.bed.Clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch {
			case private:
				errs[m] = parallel(ctx, g.f.private, writers, func(ctx context.Context, i int) error {
					return g.createService(ctx, c.Name, growthNamespace, fmt.Sprintf("private-%04d", i), privateIP(m, i, 0, g.endpoints), g.endpoints)
				})
			case m < exporters:
				errs[m] = parallel(ctx, g.f.exported, writers, func(ctx context.Context, i int) error {
					return g.createExport(ctx, c.Name, m, growthNamespace, scaleName(i), i, g.endpoints)
				})
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if private {
		g.logf("growth: every one of %d members holds %d Services x %d endpoints that are not exported (%s)",
			len(g.bed.Clusters), g.f.private, g.endpoints, time.Since(start).Round(time.Second))
	} else {
		g.logf("growth: %s and %s export %d Services x %d endpoints (%s)",
			memberName(0), memberName(1), g.f.exported, g.endpoints, time.Since(start).Round(time.Second))
	}
	return nil
}

// configPath writes the clusterset config of a process of mode in a
// clusterset of the first n members (local: the member it runs in, ""
// in central mode) and returns its path.
func (g *growth) configPath(n int, mode, local string) (string, error) {
	conf := testbed.ClustersetConfig{Clusterset: "growth"}
	if mode == modeHub {
		conf.Hub = &testbed.HubSettings{Kubeconfig: filepath.Join(g.bed.StateDir, "hub", local+".kubeconfig")}
	}
	for _, c := range g.bed.Clusters[:n] {
		m := testbed.Member{ID: c.Name}
		if mode != modeHub || c.Name == local {
			m.Kubeconfig, m.Context = c.KubeconfigPath, c.Context
		}
		conf.Members = append(conf.Members, m)
	}
	return g.writeConfig(fmt.Sprintf("%s-%d-%s", mode, n, local), conf)
}

// writeConfig writes a clusterset config into the state folder.
func (g *growth) writeConfig(name string, conf testbed.ClustersetConfig) (string, error) {
	raw, err := yaml.Marshal(conf)
	if err != nil {
		return "", err
	}
	path := filepath.Join(g.f.stateDir, "configs", name+".yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, raw, 0o600)
}

// startProcs starts one mcs-syncer per entry of configs (process name ->
// its flags), all at once.
func (g *growth) startProcs(ctx context.Context, args map[string][]string) error {
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	for name, a := range args {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := syncer.Start(ctx, g.syncerBin, filepath.Join(g.logDir, fmt.Sprintf("%s-%d.log", name, time.Now().UnixNano())), a...)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				return
			}
			g.procs[name] = p
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (g *growth) stopAll() {
	for name, p := range g.procs {
		if err := p.Stop(); err != nil {
			g.logf("stop %s: %v", name, err)
		}
		delete(g.procs, name)
	}
}

// measure runs one clusterset size and mode, then cleans up after it.
func (g *growth) measure(ctx context.Context, n int, mode string) (*growthResult, error) {
	r, err := g.runOne(ctx, n, mode)
	if err != nil {
		return nil, fmt.Errorf("%s mode at N=%d: %w", mode, n, err)
	}
	if err := g.reset(ctx); err != nil {
		return nil, fmt.Errorf("%s mode at N=%d: clean up: %w", mode, n, err)
	}
	return r, nil
}

// runOne measures one clusterset size and mode.
func (g *growth) runOne(ctx context.Context, n int, mode string) (*growthResult, error) {
	res := &growthResult{N: n, Mode: mode}
	members := g.bed.Clusters[:n]
	// The member whose API server's watches are counted: one that exports
	// nothing, the same at every N.
	watched := memberName(exporters)
	args, err := g.procArgs(n, mode)
	if err != nil {
		return nil, err
	}
	res.Processes = len(args)
	w0, err := g.watches(ctx, watched)
	if err != nil {
		return nil, err
	}
	h0, err := g.watches(ctx, testbed.HubName)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := g.startProcs(ctx, args); err != nil {
		return nil, err
	}
	var views []*importView
	for _, c := range members {
		views = append(views, g.views[c.Name])
	}
	_, err = waitFor(ctx, "every import complete in every member", convergeStall, func() (bool, string) {
		return allComplete(views, func(v *importView) (bool, string) { return v.complete(ctx, g.f.exported, g.endpoints) })
	})
	res.Converged, res.Converge = err == nil, time.Since(t0)
	if err != nil {
		g.logf("growth: N=%d %s: NOT converged: %v", n, mode, err)
		return res, nil
	}
	// Watches and memory once converged; the watch counts are gauges.
	w1, err := g.watches(ctx, watched)
	if err != nil {
		return nil, err
	}
	h1, err := g.watches(ctx, testbed.HubName)
	if err != nil {
		return nil, err
	}
	res.MemberWatches, res.HubWatches = w1-w0, h1-h0
	cpu0, err := g.cpu()
	if err != nil {
		return nil, err
	}
	sleep(ctx, g.f.idle)
	cpu1, err := g.cpu()
	if err != nil {
		return nil, err
	}
	res.IdleCPU = float64(cpu1-cpu0) / float64(g.f.idle)
	for _, p := range g.procs {
		rss, _, err := memory(p.Pid())
		if err != nil {
			return nil, err
		}
		res.RSSSum += rss
		res.RSSMax = max(res.RSSMax, rss)
	}
	res.Load1 = loadAverage()
	target := changeTarget{ns: growthNamespace, service: scaleName(0), slice: scaleName(0) + "-src", views: views, relayEndpoints: g.endpoints}
	if res.Latency, res.Floor, err = g.timeChanges(ctx, members, g.relayHopOf(mode), target); err != nil {
		return nil, err
	}
	g.logf("growth: N=%d %s: converged in %s, watches %d on %s and %d on the hub, RSS %s (largest %s), idle CPU %.2f %%, change p50 %s ms (floor %s ms)",
		n, mode, res.Converge.Round(10*time.Millisecond), res.MemberWatches, watched, res.HubWatches, mib(res.RSSSum), mib(res.RSSMax),
		100*res.IdleCPU, ms(percentile(res.Latency, 50)), ms(percentile(res.Floor, 50)))
	return res, nil
}

// cpu is the CPU time of every running process, summed.
func (g *growth) cpu() (time.Duration, error) {
	var pids []int
	for _, p := range g.procs {
		pids = append(pids, p.Pid())
	}
	return cpuTimes(pids)
}

// watches returns the watches an API server serves now
// (apiserver_longrunning_requests{verb="WATCH"}, summed).
func (g *growth) watches(ctx context.Context, cluster string) (int, error) {
	raw, err := g.kube[cluster].CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("metrics of %s: %w", cluster, err)
	}
	families, err := syncer.ParseMetrics(string(raw))
	if err != nil {
		return 0, fmt.Errorf("metrics of %s: %w", cluster, err)
	}
	sum := 0.0
	for _, m := range families["apiserver_longrunning_requests"].GetMetric() {
		if syncer.Labels(m)["verb"] == "WATCH" {
			sum += m.GetGauge().GetValue()
		}
	}
	return int(sum), nil
}

// reset stops the processes and removes what they wrote: the imports (the
// garbage collector removes their derived Services and slices) and the
// publications, in every member and the hub, and waits until they are gone.
func (g *growth) reset(ctx context.Context) error {
	g.stopAll()
	for _, c := range g.bed.Clusters {
		cl := g.ctrl[c.Name]
		if err := cl.DeleteAllOf(ctx, &mcsv1beta1.ServiceImport{}, client.InNamespace(growthNamespace)); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err := cl.DeleteAllOf(ctx, &v1alpha1.PublishedExport{}, client.InNamespace(controlplane.SystemNamespace)); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if err := g.hub.DeleteAllOf(ctx, &v1alpha1.PublishedExport{}, client.InNamespace(controlplane.SystemNamespace)); err != nil {
		return err
	}
	_, err := waitFor(ctx, "the imports gone", 5*time.Minute, func() (bool, string) {
		left := 0
		for _, v := range g.views {
			var sis mcsv1beta1.ServiceImportList
			var slices discoveryv1.EndpointSliceList
			if err := cmp.Or(v.cache.List(ctx, &sis), v.cache.List(ctx, &slices, client.HasLabels{mcsv1beta1.LabelSourceCluster})); err != nil {
				return false, err.Error()
			}
			left += len(sis.Items) + len(slices.Items)
		}
		return left == 0, fmt.Sprintf("%d ServiceImports and imported slices left", left)
	})
	return err
}

// changeTarget is what timeChanges changes: a source slice of an export
// of the first member, whose imports views see, and where the relay floor
// runs.
type changeTarget struct {
	// ns and service name the export; slice is its source slice that
	// changes.
	ns, service, slice string
	views              []*importView
	// relayEndpoints are the endpoints of the relay's source slice: as
	// many as the changed slice holds.
	relayEndpoints int
}

// timeChanges sends changes one at a time, alternating mcs-syncer's path
// (an endpoint of target's slice flips readiness) and the relay floor's
// (the same on the first member's relay-src slice, copied into every
// member by the fan-out relay, through hop's API server if any), and returns,
// per change, the time until every member held it. The slice is restored
// when it ends.
func (g *growth) timeChanges(ctx context.Context, members []*testbed.Cluster, hop *relayHop, target changeTarget) (mcs, floor []time.Duration, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var consumers []string
	for _, c := range members {
		consumers = append(consumers, c.Name)
	}
	source := memberName(0)
	relay, err := g.newFanout(ctx, target.ns, consumers, hop)
	if err != nil {
		return nil, nil, err
	}
	if hop != nil {
		if err := relay.watchHop(ctx); err != nil {
			return nil, nil, err
		}
	}
	tr := newTracker()
	observed := target.service
	stop, err := g.observeViews(ctx, target.views, func(consumer string, s *discoveryv1.EndpointSlice, at time.Time) {
		switch {
		case s.Name == relayDstName:
			tr.seen(pathFloor+"/"+consumer, relayService, s, at)
		case s.Labels[mcsv1beta1.LabelSourceCluster] == source && s.Labels[mcsv1beta1.LabelServiceName] == observed:
			tr.seen(pathMCS+"/"+consumer, observed, s, at)
		}
	})
	if err != nil {
		return nil, nil, err
	}
	defer stop()
	// The relay's first hop: the source slice's changes, from an informer
	// on the first member.
	src := g.kube[source].DiscoveryV1().EndpointSlices(target.ns)
	if err := ensureRelaySource(ctx, src, endpointSlice(target.ns, relaySrcName, relayService, benchIP(9, 0, 0), target.relayEndpoints)); err != nil {
		return nil, nil, err
	}
	orig, err := src.Get(ctx, target.slice, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	// The export's endpoints back as they were, for the next mode's
	// convergence check.
	defer func() {
		s, gerr := src.Get(ctx, target.slice, metav1.GetOptions{})
		if gerr == nil {
			s.Endpoints = orig.Endpoints
			_, gerr = src.Update(ctx, s, metav1.UpdateOptions{})
		}
		if gerr != nil && err == nil {
			err = fmt.Errorf("restore the changed export: %w", gerr)
		}
	}()
	inf := sliceInformer(g.kube[source], target.ns)
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, obj any) {
			old, _ := oldObj.(*discoveryv1.EndpointSlice)
			s, ok := obj.(*discoveryv1.EndpointSlice)
			if !ok || old == nil || s.Name != relaySrcName {
				return
			}
			changed := changedAt(old.Endpoints, s.Endpoints)
			if changed < 0 {
				return
			}
			trigger := s.Annotations[corev1.EndpointsLastChangeTriggerTime]
			next := relay.toConsumers
			if relay.hop != nil {
				next = relay.toHop
			}
			if err := next(ctx, partOf(s.Endpoints, changed), trigger); err != nil && ctx.Err() == nil {
				g.logf("%v", err)
			}
		},
	}); err != nil {
		return nil, nil, err
	}
	go inf.Run(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, nil, ctx.Err()
	}
	for k := range 2 * g.f.changes {
		path, name := pathMCS, target.slice
		if k%2 == 1 {
			path, name = pathFloor, relaySrcName
		}
		s, err := src.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, err
		}
		var address string
		var ready bool
		s.Endpoints, address, ready = flip(s.Endpoints, k/2)
		t, text := triggerNow()
		s.Annotations[corev1.EndpointsLastChangeTriggerTime] = text
		key := observed
		if path == pathFloor {
			key = relayService
		}
		for _, c := range consumers {
			tr.sent(path+"/"+c, key, change{trigger: t, address: address, ready: ready})
		}
		if _, err := src.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return nil, nil, err
		}
		if _, err := waitFor(ctx, fmt.Sprintf("change %d on the %s path to reach every member", k, path), time.Minute, outstanding(tr)); err != nil {
			return nil, nil, err
		}
		var slowest time.Duration
		tr.mu.Lock()
		for _, c := range consumers {
			samples := tr.samples[path+"/"+c]
			slowest = max(slowest, samples[len(samples)-1])
		}
		tr.mu.Unlock()
		if path == pathMCS {
			mcs = append(mcs, slowest)
		} else {
			floor = append(floor, slowest)
		}
	}
	return mcs, floor, nil
}

// ensureRelaySource creates the relay's source slice rs, or gives the one
// left from a smaller Service rs's endpoints: the floor's source must be
// as large as the measured one's (the sizes phase timed a source slice of
// 1,000 endpoints against the 10 of the first size's relay source).
func ensureRelaySource(ctx context.Context, src discoveryclient.EndpointSliceInterface, rs *discoveryv1.EndpointSlice) error {
	_, err := src.Create(ctx, rs, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	held, err := src.Get(ctx, rs.Name, metav1.GetOptions{})
	if err != nil || len(held.Endpoints) == len(rs.Endpoints) {
		return err
	}
	held.Endpoints = rs.Endpoints
	_, err = src.Update(ctx, held, metav1.UpdateOptions{})
	return err
}

// observeViews calls seen for every slice that the views see added or
// changed, until the returned stop is called.
func (g *growth) observeViews(ctx context.Context, views []*importView, seen func(consumer string, s *discoveryv1.EndpointSlice, at time.Time)) (stop func(), err error) {
	var undo []func()
	stop = func() {
		for _, u := range undo {
			u()
		}
	}
	for _, v := range views {
		c := v.cluster
		inf, err := v.cache.GetInformer(ctx, &discoveryv1.EndpointSlice{})
		if err != nil {
			stop()
			return nil, err
		}
		on := func(obj any) {
			if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
				seen(c, s, time.Now())
			}
		}
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: on, UpdateFunc: func(_, obj any) { on(obj) }})
		if err != nil {
			stop()
			return nil, err
		}
		undo = append(undo, func() { _ = inf.RemoveEventHandler(reg) })
	}
	return stop, nil
}
