package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/audit"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/controlplane"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/syncer"
)

// stateMarker marks a state folder this benchmark made; it runs on no
// other.
const stateMarker = ".mcs-bench-e2e"

// allScenarios in the order they run.
var allScenarios = []string{"lat2", "lat10", "lat100", "churn10", "scale", "restart", "idle", "churn", "return"}

type flags struct {
	scenarios                    string
	services, endpoints          int
	duration, idle               time.Duration
	churnServices                int
	churnRate                    float64
	quick, writeFloor            bool
	stateDir, outDir, syncerArgs string
}

func parseFlags(args []string, stderr io.Writer) (*flags, error) {
	f := &flags{}
	fs := flag.NewFlagSet("bench-e2e", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.scenarios, "scenarios", strings.Join(allScenarios, ","), "scenarios to run, comma-separated (restart, idle and churn run on scale's imports)")
	fs.IntVar(&f.services, "services", 1000, "Services exported by each of east and west in the scale scenario")
	fs.IntVar(&f.endpoints, "endpoints", 10, "endpoints per exported Service (1..1000)")
	fs.DurationVar(&f.duration, "duration", 30*time.Second, "how long each latency scenario sends changes")
	fs.DurationVar(&f.idle, "idle", 2*time.Minute, "how long the idle scenario watches for writes")
	fs.IntVar(&f.churnServices, "churn-services", 100, "scale Services the churn scenario changes")
	fs.Float64Var(&f.churnRate, "churn-rate", 10, "changes per second of the churn scenario")
	fs.BoolVar(&f.writeFloor, "write-floor", true, "measure the scale scenario's write floor (false saves its time at large -services; then no ratio is printed)")
	fs.BoolVar(&f.quick, "quick", false, "every scenario small and short: a smoke test of the program (fails only if a scenario could not be measured)")
	fs.StringVar(&f.stateDir, "state", "", "state folder (testbed, logs); it must not exist, be empty, or be one this benchmark made (default <repo>/.cache/bench-e2e)")
	fs.StringVar(&f.outDir, "out", "", "folder for samples.csv and latency-cdf.png (default <repo>/.cache/bench-e2e-out)")
	fs.StringVar(&f.syncerArgs, "syncer-flags", "", "more flags for mcs-syncer, space-separated (e.g. \"--kube-api-qps=5 --kube-api-burst=10\" to see the old defaults)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if f.quick {
		f.services, f.duration, f.idle, f.churnServices = 20, 4*time.Second, 5*time.Second, 10
	}
	for _, s := range strings.Split(f.scenarios, ",") {
		if !slices.Contains(allScenarios, s) {
			return nil, fmt.Errorf("-scenarios: unknown scenario %q (known: %s)", s, strings.Join(allScenarios, ", "))
		}
	}
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case f.services < 1:
		return nil, fmt.Errorf("-services: %d is not positive", f.services)
	case f.endpoints < 1 || f.endpoints > 1000:
		return nil, fmt.Errorf("-endpoints: %d is outside 1..1000", f.endpoints)
	case f.duration <= 0:
		return nil, fmt.Errorf("-duration: %s is not positive", f.duration)
	case f.idle <= 0:
		return nil, fmt.Errorf("-idle: %s is not positive", f.idle)
	case f.churnServices < 1 || f.churnServices > f.services:
		return nil, fmt.Errorf("-churn-services: %d is outside 1..%d (-services)", f.churnServices, f.services)
	case !(f.churnRate > 0):
		return nil, fmt.Errorf("-churn-rate: %v is not positive", f.churnRate)
	}
	return f, nil
}

func (f *flags) has(s string) bool { return slices.Contains(strings.Split(f.scenarios, ","), s) }

func main() {
	if len(os.Args) > 1 && os.Args[1] == "growth" {
		growthMain(os.Args[2:])
		return
	}
	f, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-e2e:", err)
		os.Exit(2)
	}
	ctrllog.SetLogger(logr.Discard()) // the bench's caches have nothing to say
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, f); err != nil {
		fmt.Fprintln(os.Stderr, "bench-e2e:", err)
		os.Exit(1)
	}
}

// growthMain runs `e2e growth` (make bench-scale).
func growthMain(args []string) {
	f, err := parseGrowthFlags(args, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(2)
	}
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runGrowthBench(ctx, f); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(1)
	}
}

// bench is one run: the testbed, clients to it and the mcs-syncer under
// test.
type bench struct {
	bed        *testbed.Clusterset
	kube       map[string]kubernetes.Interface
	ctrl       map[string]client.Client
	syncer     *syncer.Process
	syncerBin  string
	syncerArgs []string
	logDir     string
	endpoints  int
	quick      bool
	restarts   int
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
}

// restConfig is a cluster's admin config without client-side rate limit:
// the bench's clients must measure the servers.
func (b *bench) restConfig(c *testbed.Cluster) *rest.Config {
	rc := c.RESTConfig()
	rc.QPS, rc.Burst = -1, 0
	rc.UserAgent = "mcs-bench"
	return rc
}

func (b *bench) auditLogs() []string {
	var logs []string
	for _, c := range b.bed.Clusters {
		logs = append(logs, c.AuditLogPath)
	}
	return logs
}

func (b *bench) startSyncer(ctx context.Context) error {
	b.restarts++
	args := append([]string{"--clusterset-config", b.bed.ConfigPath}, b.syncerArgs...)
	s, err := syncer.Start(ctx, b.syncerBin, filepath.Join(b.logDir, fmt.Sprintf("mcs-syncer-%d.log", b.restarts)), args...)
	if err != nil {
		return err
	}
	b.syncer = s
	return nil
}

func (b *bench) stopSyncer() error {
	if b.syncer == nil {
		return nil
	}
	err := b.syncer.Stop()
	b.syncer = nil
	return err
}

// prepareState makes sure stateDir is one this benchmark may use.
func prepareState(stateDir string) error {
	entries, err := os.ReadDir(stateDir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	case len(entries) > 0:
		if _, err := os.Stat(filepath.Join(stateDir, stateMarker)); err != nil {
			return fmt.Errorf("-state: %s is not empty and was not made by this benchmark; refusing to use it", stateDir)
		}
	}
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(stateDir, stateMarker), nil, 0o644)
}

func run(ctx context.Context, f *flags) error {
	root, err := host.RepoRoot()
	if err != nil {
		return err
	}
	if f.stateDir == "" {
		f.stateDir = filepath.Join(root, ".cache", "bench-e2e")
	}
	if f.outDir == "" {
		f.outDir = filepath.Join(root, ".cache", "bench-e2e-out")
	}
	if err := prepareState(f.stateDir); err != nil {
		return err
	}
	if err := os.MkdirAll(f.outDir, 0o755); err != nil {
		return err
	}
	b := &bench{
		kube: map[string]kubernetes.Interface{}, ctrl: map[string]client.Client{},
		syncerBin: filepath.Join(f.stateDir, "mcs-syncer"), logDir: filepath.Join(f.stateDir, "logs"),
		syncerArgs: strings.Fields(f.syncerArgs), endpoints: f.endpoints, quick: f.quick,
	}
	began := time.Now()
	b.logf("building mcs-syncer")
	if err := syncer.Build(ctx, b.syncerBin); err != nil {
		return err
	}
	policy, err := audit.WritePolicy(f.stateDir)
	if err != nil {
		return err
	}
	bed, err := testbed.Start(ctx, testbed.Options{
		StateDir: filepath.Join(f.stateDir, "testbed"), AuditPolicy: policy, TeardownOnExit: true, Log: os.Stderr,
	})
	if err != nil {
		return err
	}
	b.bed = bed
	defer func() {
		_ = b.stopSyncer()
		if err := bed.Stop(context.Background()); err != nil {
			b.logf("%v", err)
		}
	}()
	for _, c := range bed.Clusters {
		rc := b.restConfig(c)
		if b.kube[c.Name], err = kubernetes.NewForConfig(rc); err != nil {
			return err
		}
		if b.ctrl[c.Name], err = client.New(rc, client.Options{Scheme: controlplane.Scheme()}); err != nil {
			return err
		}
	}
	if err := b.startSyncer(ctx); err != nil {
		return err
	}

	rep := &report{flags: f, began: began}
	for _, sc := range []latencyScenario{
		{Name: "1 service, 2 changes/s", Namespace: "lat2", Services: 1, Rate: 2, Duration: f.duration},
		{Name: "1 service, 10 changes/s", Namespace: "lat10", Services: 1, Rate: 10, Duration: f.duration},
		{Name: "10 services, 100 changes/s", Namespace: "lat100", Services: 10, Rate: 100, Duration: f.duration},
		// The churn scenario's rate on 10 services: its CPU per change is
		// the reference for the churn at scale.
		{Name: fmt.Sprintf("10 services, %g changes/s", f.churnRate), Namespace: "churn10", Services: 10, Rate: f.churnRate, Duration: f.duration, CPUReference: true},
	} {
		if !f.has(sc.Namespace) {
			continue
		}
		b.logf("latency: %s for %s", sc.Name, sc.Duration)
		r, err := b.runLatency(ctx, sc)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.Name, err)
		}
		rep.latency = append(rep.latency, r)
	}
	if f.has("scale") || f.has("restart") || f.has("idle") || f.has("churn") {
		b.logf("scale: %d services x %d endpoints from east and west into east, west and north", f.services, f.endpoints)
		if rep.scale, err = b.runScale(ctx, f.services, f.writeFloor); err != nil {
			return fmt.Errorf("scale: %w", err)
		}
		if f.has("restart") {
			minWindow, quiet := settleWindows(f.quick)
			b.logf("restart over %d imports", f.services)
			if rep.restart, err = b.runRestart(ctx, minWindow, quiet); err != nil {
				return fmt.Errorf("restart: %w", err)
			}
		}
		if f.has("idle") {
			b.logf("idle for %s", f.idle)
			if rep.idle, err = b.runIdle(ctx, f.idle); err != nil {
				return fmt.Errorf("idle: %w", err)
			}
		}
		if f.has("churn") {
			sc := latencyScenario{
				Name:      fmt.Sprintf("churn: %d services of %d, %g changes/s", f.churnServices, 2*f.services, f.churnRate),
				Namespace: scaleNamespace, Services: f.churnServices, Rate: f.churnRate, Duration: f.duration, Existing: true,
			}
			b.logf("latency: %s for %s", sc.Name, sc.Duration)
			r, err := b.runLatency(ctx, sc)
			if err != nil {
				return fmt.Errorf("churn: %w", err)
			}
			rep.latency = append(rep.latency, r)
		}
	}
	if f.has("return") {
		rounds := 3
		if f.quick {
			rounds = 1
		}
		b.logf("member return: west's API server down and back, %d times", rounds)
		if rep.memberReturn, err = b.runReturn(ctx, rounds); err != nil {
			return fmt.Errorf("return: %w", err)
		}
	}
	rep.elapsed = time.Since(began)
	rep.print(os.Stdout)
	if err := rep.writeCSV(filepath.Join(f.outDir, "samples.csv")); err != nil {
		return err
	}
	if err := plotCDF(filepath.Join(f.outDir, "latency-cdf.png"), rep.latency); err != nil {
		return err
	}
	if len(rep.latency) > 0 {
		fmt.Printf("\nsamples: %s\nCDF: %s\n", filepath.Join(f.outDir, "samples.csv"), filepath.Join(f.outDir, "latency-cdf.png"))
	}
	if f.quick {
		return rep.smokeCheck()
	}
	return nil
}

// sleep waits d or until ctx ends. The bench measures over windows of
// time; these are its windows, not waits for something to settle.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (b *bench) idleWindow() time.Duration {
	if b.quick {
		return time.Second
	}
	return 5 * time.Second
}

// report gathers every scenario's result.
type report struct {
	flags   *flags
	began   time.Time
	elapsed time.Duration
	latency []*latencyResult
	scale   *scaleResult
	restart *restartResult
	idle    audit.Writes
	// memberReturn is the member-return scenario's result.
	memberReturn *returnResult
}

func (r *report) print(out io.Writer) {
	fmt.Fprintf(out, "\nmcs-syncer end-to-end benchmark, %s; %d cores, %s; load average (1 min) at the end %s; whole run %s\n\n",
		r.began.UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), memTotal(), loadAverage(), r.elapsed.Round(time.Second))
	r.printLatency(out)
	if s := r.scale; s != nil {
		fmt.Fprintf(out, "\nscale: %d services x %d endpoints from east and west, imported into %d consumers (%d imported endpoints)\n",
			s.Services, s.Endpoints, 3, s.ImportedEndpoints)
		conv := s.Converge.Round(10 * time.Millisecond).String()
		if !s.Converged {
			conv = "NOT converged after " + conv
		}
		floor := "not measured (-write-floor=false)"
		if s.Floor > 0 {
			floor = fmt.Sprintf("(plain client, %d in flight per cluster, %d writes) %s; ratio %s",
				writers, s.FloorWrites, s.Floor.Round(10*time.Millisecond), ratio(s.Converge, s.Floor))
		}
		fmt.Fprintf(out, "  mcs-syncer: converged %s after its start; write floor %s\n", conv, floor)
		fmt.Fprintf(out, "  writes: %d (%.2f per import per consumer): %s\n", s.Writes.Total(), float64(s.Writes.Total())/float64(3*s.Services), s.Writes)
		fmt.Fprintf(out, "  memory: RSS %s, peak %s = %.0f bytes per imported endpoint; CPU %s; load %s\n",
			mib(s.RSS), mib(s.PeakRSS), float64(s.PeakRSS)/float64(s.ImportedEndpoints), s.CPU.Round(10*time.Millisecond), s.Load1)
	}
	if r.restart != nil {
		fmt.Fprintf(out, "restart over the scale imports: %d writes in %s (%s)\n", r.restart.Writes.Total(), r.restart.Window.Round(time.Second), r.restart.Writes)
	}
	if r.idle != nil {
		fmt.Fprintf(out, "idle %s: %d writes (%s)\n", r.flags.idle, r.idle.Total(), r.idle)
	}
	if m := r.memberReturn; m != nil {
		fmt.Fprintf(out, "member return (west's API server answers again -> a change made in west then imported into north): %s; outage seen after %s\n",
			durations(m.Times), durations(m.Detect))
	}
	r.printGoals(out)
}

// printLatency prints the latency scenarios' table, if any ran.
func (r *report) printLatency(out io.Writer) {
	if len(r.latency) == 0 {
		return
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "latency scenario\tfloor p50/p90/p99 ms\tmcs-syncer p50/p90/p99 ms\tratio p50\tratio p99\thistogram p50 ms\tchanges (lost)\twrites/change/consumer\tCPU ms/change\tload\t")
	for _, l := range r.latency {
		fp := []time.Duration{percentile(l.Floor, 50), percentile(l.Floor, 90), percentile(l.Floor, 99)}
		mp := []time.Duration{percentile(l.MCS, 50), percentile(l.MCS, 90), percentile(l.MCS, 99)}
		sent := l.Sent[pathMCS]
		writes := float64(l.Writes.Total()) / float64(max(sent, 1)) / 3
		cpu := float64(l.CPU) / float64(time.Millisecond) / float64(max(sent, 1))
		fmt.Fprintf(w, "%s\t%s/%s/%s\t%s/%s/%s\t%s\t%s\t%s (%d obs)\t%d (%d)\t%.2f\t%.2f\t%s-%s\t\n",
			l.Scenario.Name, ms(fp[0]), ms(fp[1]), ms(fp[2]), ms(mp[0]), ms(mp[1]), ms(mp[2]),
			ratio(mp[0], fp[0]), ratio(mp[2], fp[2]), ms(l.Hist.quantile(0.5)), int(l.Hist.count()),
			sent, sent-len(l.MCS), writes, cpu, l.Load1Begin, l.Load1End)
	}
	w.Flush()
}

// goals prints the goals' heading and returns what prints one goal, met
// or not.
func goals(out io.Writer) func(met bool, format string, args ...any) {
	fmt.Fprintln(out, "\ngoals:")
	return func(met bool, format string, args ...any) {
		mark := "met    "
		if !met {
			mark = "NOT met"
		}
		fmt.Fprintf(out, "  [%s] %s\n", mark, fmt.Sprintf(format, args...))
	}
}

func (r *report) printGoals(out io.Writer) {
	goal := goals(out)
	var cpuSmall, cpuLarge float64
	for _, l := range r.latency {
		p50, f50 := percentile(l.MCS, 50), percentile(l.Floor, 50)
		p99, f99 := percentile(l.MCS, 99), percentile(l.Floor, 99)
		cpu := float64(l.CPU) / float64(max(l.Sent[pathMCS], 1))
		switch {
		case l.Scenario.Existing:
			cpuLarge = cpu
			goal(p50 <= 3*f50, "%s: p50 %s ms <= 3x floor %s ms", l.Scenario.Name, ms(p50), ms(f50))
		case l.Scenario.Rate <= 10 && !l.Scenario.CPUReference:
			// The steady rates a clusterset sees: within 20 % of the relay.
			goal(float64(p50) <= 1.2*float64(f50), "%s: p50 %s ms <= 1.2x relay floor %s ms (%s)", l.Scenario.Name, ms(p50), ms(f50), ratio(p50, f50))
		default:
			goal(p50*2 <= f50*3, "%s: p50 %s ms <= 1.5x relay floor %s ms", l.Scenario.Name, ms(p50), ms(f50))
		}
		if l.Scenario.CPUReference {
			cpuSmall = cpu
		}
		if !l.Scenario.Existing {
			goal(p99 <= 3*f99, "%s: p99 %s ms <= 3x floor %s ms", l.Scenario.Name, ms(p99), ms(f99))
		}
		goal(l.Wrong[pathMCS] == 0 && l.Wrong[pathFloor] == 0, "%s: every change arrived with its condition (wrong: mcs-syncer %d, floor %d)",
			l.Scenario.Name, l.Wrong[pathMCS], l.Wrong[pathFloor])
		h := l.Hist.quantile(0.5)
		goal(p50 > 0 && h > 0 && float64(h) <= 1.2*float64(p50) && float64(h) >= 0.8*float64(p50),
			"%s: histogram p50 %s ms within 20%% of measured %s ms", l.Scenario.Name, ms(h), ms(p50))
	}
	if cpuSmall > 0 && cpuLarge > 0 {
		goal(cpuLarge <= 1.5*cpuSmall, "CPU per change at %d services %.2f ms <= 1.5x that at 10 services %.2f ms (both %g changes/s)",
			2*r.flags.services, cpuLarge/1e6, cpuSmall/1e6, r.flags.churnRate)
	}
	if s := r.scale; s != nil {
		goal(s.Converged && s.Converge <= 30*time.Second, "scale: converged in %s <= 30 s", s.Converge.Round(10*time.Millisecond))
		if s.Floor > 0 {
			goal(s.Converged && float64(s.Converge) <= 1.2*float64(s.Floor), "scale: converged in %s <= 1.2x write floor %s (%s)",
				s.Converge.Round(10*time.Millisecond), s.Floor.Round(10*time.Millisecond), ratio(s.Converge, s.Floor))
		}
		perEndpoint := float64(s.PeakRSS) / float64(s.ImportedEndpoints)
		goal(perEndpoint <= 1500, "memory: %.0f bytes of peak RSS per imported endpoint <= 1.5 KB", perEndpoint)
	}
	if r.restart != nil {
		goal(r.restart.Writes.Total() == 0, "restart: %d writes == 0", r.restart.Writes.Total())
	}
	if r.idle != nil {
		goal(r.idle.Total() == 0, "idle %s: %d writes == 0", r.flags.idle, r.idle.Total())
	}
	if m := r.memberReturn; m != nil {
		worst := slices.Max(m.Times)
		goal(worst <= 10*time.Second, "member return: slowest %s <= 10 s", worst.Round(10*time.Millisecond))
	}
}

// durations formats durations as a list.
func durations(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.Round(10 * time.Millisecond).String()
	}
	return strings.Join(parts, ", ")
}

// smokeCheck fails a -quick run whose scenarios could not be measured:
// no samples on a path, changes never seen, a histogram that observed
// nothing, or imports never complete. It ends with a "N passed, N failed"
// line, one check per scenario.
func (r *report) smokeCheck() error {
	var errs []error
	passed := 0
	check := func(problems ...error) {
		if err := errors.Join(problems...); err != nil {
			errs = append(errs, err)
			return
		}
		passed++
	}
	for _, l := range r.latency {
		var problems []error
		if len(l.MCS) == 0 || len(l.Floor) == 0 {
			problems = append(problems, fmt.Errorf("%s: %d mcs-syncer and %d floor samples", l.Scenario.Name, len(l.MCS), len(l.Floor)))
		}
		if lost := l.Sent[pathMCS] - len(l.MCS); lost > 0 {
			problems = append(problems, fmt.Errorf("%s: %d changes never reached the consumer", l.Scenario.Name, lost))
		}
		if l.Hist.count() == 0 {
			problems = append(problems, fmt.Errorf("%s: the propagation histogram observed nothing", l.Scenario.Name))
		}
		if l.Wrong[pathMCS] > 0 || l.Wrong[pathFloor] > 0 {
			problems = append(problems, fmt.Errorf("%s: slices carried a change's trigger time without its condition (mcs-syncer %d, floor %d)",
				l.Scenario.Name, l.Wrong[pathMCS], l.Wrong[pathFloor]))
		}
		check(problems...)
	}
	if r.scale != nil {
		if !r.scale.Converged {
			check(errors.New("scale: the imports never completed"))
		} else {
			check()
		}
	}
	if r.restart != nil {
		check()
	}
	if r.idle != nil {
		check()
	}
	if r.memberReturn != nil {
		check()
	}
	for _, err := range errs {
		fmt.Println("smoke check failed:", err)
	}
	fmt.Printf("\nsmoke: %d passed, %d failed\n", passed, len(errs))
	return errors.Join(errs...)
}

func (r *report) writeCSV(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"scenario", "path", "latency_ms"})
	for _, l := range r.latency {
		for _, p := range []struct {
			name    string
			samples []time.Duration
		}{{pathFloor, l.Floor}, {pathMCS, l.MCS}} {
			for _, s := range p.samples {
				_ = w.Write([]string{l.Scenario.Name, p.name, strconv.FormatFloat(float64(s)/1e6, 'f', 3, 64)})
			}
		}
	}
	w.Flush()
	return errors.Join(w.Error(), f.Close())
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// memTotal returns the machine's memory, from /proc/meminfo.
func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "? memory"
	}
	var kb int64
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
}
