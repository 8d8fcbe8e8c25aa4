package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"
)

// growthReport gathers the growth benchmark's results.
type growthReport struct {
	flags   *growthFlags
	began   time.Time
	elapsed time.Duration
	results []*growthResult
	// hubLoads are the hub loads, in the order they ran (hubLoads).
	hubLoads []*hubLoadResult
	// sizes and imports are the sizes phase's results.
	sizes   []*sizeResult
	imports []*importResult
}

// line is y = A + B*N, fitted by least squares.
type line struct{ A, B, R2 float64 }

func (l line) at(n float64) float64 { return l.A + l.B*n }

// fitLine fits y = A + B*x by least squares; with one point, B is 0.
func fitLine(xs, ys []float64) line {
	n := float64(len(xs))
	if len(xs) == 0 {
		return line{}
	}
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx, sy, sxx, sxy = sx+xs[i], sy+ys[i], sxx+xs[i]*xs[i], sxy+xs[i]*ys[i]
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return line{A: sy / n, R2: 1}
	}
	b := (n*sxy - sx*sy) / den
	a := (sy - b*sx) / n
	var ssRes, ssTot float64
	for i := range xs {
		ssRes += math.Pow(ys[i]-(a+b*xs[i]), 2)
		ssTot += math.Pow(ys[i]-sy/n, 2)
	}
	r2 := 1.0
	if ssTot > 0 {
		r2 = 1 - ssRes/ssTot
	}
	return line{A: a, B: b, R2: r2}
}

// processes is how many mcs-syncer processes a clusterset of n members
// runs in mode.
func processes(mode string, n float64) float64 {
	if mode == modeCentral {
		return 1
	}
	return n
}

// perProcess is one figure of a result, per process.
type perProcess struct {
	name string
	unit string
	of   func(r *growthResult) float64
}

// figures the report fits: each per process, as the model's unit of
// growth (a clusterset's sum is processes(N) times it).
var figures = []perProcess{
	{"watches on a member's API server", "", func(r *growthResult) float64 { return float64(r.MemberWatches) }},
	{"watches on the hub, per process", "", func(r *growthResult) float64 { return float64(r.HubWatches) / float64(r.Processes) }},
	{"RSS per process", "MiB", func(r *growthResult) float64 { return float64(r.RSSSum) / float64(r.Processes) / (1 << 20) }},
	{"idle CPU per process", "% of a core", func(r *growthResult) float64 { return 100 * r.IdleCPU / float64(r.Processes) }},
	{"convergence", "s", func(r *growthResult) float64 { return r.Converge.Seconds() }},
	{"change latency p50 to every member", "ms", func(r *growthResult) float64 { return float64(percentile(r.Latency, 50)) / 1e6 }},
}

// summed: the figures whose clusterset-wide sum is processes(N) times the
// per-process figure.
var summed = map[string]string{
	"RSS per process":                 "RSS summed",
	"idle CPU per process":            "idle CPU summed",
	"watches on the hub, per process": "watches on the hub",
}

func (r *growthReport) print(out io.Writer) {
	fmt.Fprintf(out, "\nmcs-syncer scale benchmark, %s; %d cores, %s; load average (1 min) at the end %s; whole run %s\n",
		r.began.UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), memTotal(), loadAverage(), r.elapsed.Round(time.Second))
	f := r.flags
	fmt.Fprintf(out, "%d Services x %d endpoints exported from each of 2 members; %d Services x %d endpoints not exported in every member\n\n",
		f.exported, f.endpoints, f.private, f.endpoints)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "N\tmode\tprocesses\twatches on a member\twatches on the hub\tRSS summed\tRSS largest\tidle CPU summed\tconverged\tchange p50/max ms\trelay floor p50 ms\tratio p50\tload\t")
	for _, g := range r.results {
		n := fmt.Sprint(g.N)
		if g.NoPrivate {
			n += " (nothing private)"
		}
		conv := g.Converge.Round(10 * time.Millisecond).String()
		if !g.Converged {
			fmt.Fprintf(w, "%s\t%s\t%d\t\t\t\t\t\tNOT after %s\t\t\t\t%s\t\n", n, g.Mode, g.Processes, conv, g.Load1)
			continue
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%s\t%s\t%.2f %%\t%s\t%s/%s\t%s\t%s\t%s\t\n", n, g.Mode, g.Processes,
			g.MemberWatches, g.HubWatches, mib(g.RSSSum), mib(g.RSSMax), 100*g.IdleCPU, conv,
			ms(percentile(g.Latency, 50)), ms(slices.Max(g.Latency)), ms(percentile(g.Floor, 50)),
			ratio(percentile(g.Latency, 50), percentile(g.Floor, 50)), g.Load1)
	}
	w.Flush()
	r.printFits(out)
	r.printSizes(out)
	for _, h := range r.hubLoads {
		r.printHubLoad(out, h)
	}
	r.printHubServers(out)
	r.printHubGrowth(out)
	r.printGoals(out)
}

// fit fits one figure over the measured N of mode (with the non-exported
// Services, converged).
func (r *growthReport) fit(mode string, fig perProcess) (line, int) {
	var xs, ys []float64
	for _, g := range r.results {
		if g.Mode == mode && !g.NoPrivate && g.Converged && len(g.Latency) > 0 {
			xs, ys = append(xs, float64(g.N)), append(ys, fig.of(g))
		}
	}
	return fitLine(xs, ys), len(xs)
}

func (r *growthReport) printFits(out io.Writer) {
	fmt.Fprintln(out, "\nfits (least squares, y = a + b*N over the measured N) and extrapolation; sums are processes(N) x the per-process fit:")
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "mode\tfigure\ta\tb per member\tR²\tN=255\tN=1000\t")
	for _, mode := range r.flags.modes {
		for _, fig := range figures {
			l, points := r.fit(mode, fig)
			if points < 2 {
				continue
			}
			fmt.Fprintf(w, "%s\t%s (%s)\t%.3g\t%.3g\t%.3f\t%.4g\t%.4g\t\n", mode, fig.name, fig.unit, l.A, l.B, l.R2, l.at(255), l.at(1000))
			if sum, ok := summed[fig.name]; ok && mode != modeCentral {
				fmt.Fprintf(w, "%s\t%s (%s)\t\t\t\t%.4g\t%.4g\t\n", mode, sum, fig.unit, processes(mode, 255)*l.at(255), processes(mode, 1000)*l.at(1000))
			}
		}
	}
	w.Flush()
}

func (r *growthReport) printHubLoad(out io.Writer, h *hubLoadResult) {
	fmt.Fprintf(out, "\nhub load: %d members (%d simulated, %d real importers), %d publications of %d endpoints; the hub served by %s\n",
		h.Members, h.Simulated, h.Importers, h.Publications, r.flags.endpoints, h.Server)
	if !h.Converged {
		fmt.Fprintf(out, "  NOT converged after %s\n", h.Converge.Round(time.Second))
		return
	}
	fmt.Fprintf(out, "  published in %s; importers converged %s after their start; hub serves %d watches for them\n",
		h.Publish.Round(time.Second), h.Converge.Round(time.Second), h.HubWatches)
	perEndpoint := float64(slices.Max(h.ImporterRSS)) / float64(h.ImportedEndpoints)
	fmt.Fprintf(out, "  importer RSS %s (largest %s) = %.0f bytes per imported endpoint (%d each)\n",
		mibs(h.ImporterRSS), mib(slices.Max(h.ImporterRSS)), perEndpoint, h.ImportedEndpoints)
	fmt.Fprintf(out, "  hub (%s + etcd): RSS %s, CPU under load %.0f %% of a core\n", h.Server, mib(h.HubRSS), 100*h.HubCPU)
	if s := h.Status; s != nil {
		fmt.Fprintf(out, "  kubectl mcs status after the load: %d members reported, exit %d, median %s of %d runs (%s); its reads by one client alone %s (%s): ratio %s\n",
			s.Members, s.Exit, percentile(s.Runs, 50).Round(time.Millisecond), len(s.Runs), durations(s.Runs), percentile(s.Floor, 50).Round(time.Millisecond), durations(s.Floor),
			ratio(percentile(s.Runs, 50), percentile(s.Floor, 50)))
		if s.Problem != "" {
			fmt.Fprintf(out, "  kubectl mcs status says: %s\n", s.Problem)
		}
	}
	fmt.Fprintf(out, "  %d changes at %g/s (1 in %d the floor's), %d lost, %d seen without their condition; load %s\n",
		h.Sent, h.Rate, floorEvery, h.Lost, h.Wrong, h.Load1)
	fmt.Fprintf(out, "  latency to every importer: mcs-syncer p50/p99 %s/%s ms; relay floor (hub -> consumer) p50/p99 %s/%s ms; ratio p50 %s\n",
		ms(percentile(h.MCS, 50)), ms(percentile(h.MCS, 99)), ms(percentile(h.Floor, 50)), ms(percentile(h.Floor, 99)),
		ratio(percentile(h.MCS, 50), percentile(h.Floor, 50)))
	if h.Breakdown != "" {
		fmt.Fprintf(out, "  where the first importer's time went under the load: %s\n", h.Breakdown)
	}
	fmt.Fprintf(out, "  importer restart: ready after %s, last reconcile after %s, %d writes (%s); RSS then %s = %.0f bytes per imported endpoint\n",
		h.RestartReady.Round(10*time.Millisecond), h.Restart.Round(10*time.Millisecond), h.RestartWrite.Total(), h.RestartWrite,
		mib(h.RestartRSS), float64(h.RestartRSS)/float64(h.ImportedEndpoints))
	fmt.Fprintf(out, "  a change made as a restarted importer answers: in its cluster %s later; that restart's last reconcile after %s (ratio %s)\n",
		h.ChangeInRestart.Round(10*time.Millisecond), h.ChangeRestart.Round(10*time.Millisecond), ratio(h.ChangeInRestart, h.ChangeRestart))
}

func mibs(bs []int64) string {
	s := ""
	for i, b := range bs {
		if i > 0 {
			s += ", "
		}
		s += mib(b)
	}
	return s
}

func (r *growthReport) printGoals(out io.Writer) {
	goal := goals(out)
	var hubWatches []int
	for _, g := range r.results {
		if g.Mode == modeHub && !g.NoPrivate && g.Converged {
			hubWatches = append(hubWatches, g.MemberWatches)
		}
	}
	if len(hubWatches) > 1 {
		goal(slices.Max(hubWatches)-slices.Min(hubWatches) <= 1, "hub mode: watches on a member's API server constant in N: %v", hubWatches)
	}
	for _, mode := range []string{modeHub, modeDirect} {
		var without, with *growthResult
		for _, g := range r.results {
			if g.Mode == mode && g.N == r.flags.members[0] && g.Converged {
				if g.NoPrivate {
					without = g
				} else {
					with = g
				}
			}
		}
		if without != nil && with != nil {
			// Each process reads its own cluster fully (as
			// kube-controller-manager does): the private Services of its own
			// cluster are the part of the difference that is by design.
			grow := float64(with.RSSMax)/float64(without.RSSMax) - 1
			goal(grow <= 0.10, "%s mode: largest RSS with %d private Services per member %s vs without %s: %+.1f %% (<= 10 %%)",
				mode, r.flags.private, mib(with.RSSMax), mib(without.RSSMax), 100*grow)
		}
	}
	r.sizeGoals(goal)
	for _, h := range r.hubLoads {
		if !h.Converged {
			goal(false, "hub load, %d members, %s: converged", h.Members, h.Server)
			continue
		}
		perEndpoint := float64(slices.Max(h.ImporterRSS)) / float64(h.ImportedEndpoints)
		goal(perEndpoint <= 1536, "hub load, %d members, %s: %.0f bytes of importer RSS per imported endpoint <= 1.5 KB", h.Members, h.Server, perEndpoint)
		p50, f50 := percentile(h.MCS, 50), percentile(h.Floor, 50)
		goal(p50 > 0 && p50 <= 2*f50, "hub load, %d members, %s: change latency p50 %s ms <= 2x relay floor %s ms (%s)",
			h.Members, h.Server, ms(p50), ms(f50), ratio(p50, f50))
		goal(h.Lost == 0 && h.Wrong == 0, "hub load, %d members, %s: every change arrived with its condition (lost %d, wrong %d)", h.Members, h.Server, h.Lost, h.Wrong)
		goal(h.RestartWrite.Total() == 0, "hub load, %d members, %s: importer restart writes %d == 0", h.Members, h.Server, h.RestartWrite.Total())
		goal(h.ChangeInRestart > 0 && h.ChangeInRestart <= 2*h.ChangeRestart, "hub load, %d members, %s: a change made during an importer's restart arrived %s after it, <= 2x the restart's sync %s",
			h.Members, h.Server, h.ChangeInRestart.Round(10*time.Millisecond), h.ChangeRestart.Round(10*time.Millisecond))
	}
}

// smokeCheck fails a -quick run that could not measure something.
func (r *growthReport) smokeCheck() error {
	var errs []error
	for _, g := range r.results {
		if !g.Converged || len(g.Latency) == 0 || len(g.Floor) == 0 {
			errs = append(errs, fmt.Errorf("%[2]s mode at N=%[1]d: converged %[3]v, %d changes and %d floor changes timed", g.N, g.Mode, g.Converged, len(g.Latency), len(g.Floor)))
		}
	}
	for _, z := range r.sizes {
		if len(z.Latency) == 0 || len(z.Floor) == 0 || (z.Mode == modeHub && !(z.HubBytes > 0)) {
			errs = append(errs, fmt.Errorf("sizes, %s mode, %d endpoints: %d changes and %d floor changes timed, %.0f hub bytes per change", z.Mode, z.Endpoints, len(z.Latency), len(z.Floor), z.HubBytes))
		}
	}
	for _, i := range r.imports {
		if i.Import <= 0 || i.Floor <= 0 {
			errs = append(errs, fmt.Errorf("sizes, %s mode: import of %d endpoints %s, floor %s", i.Mode, i.Endpoints, i.Import, i.Floor))
		}
	}
	for _, h := range r.hubLoads {
		if !h.Converged || len(h.MCS) == 0 || len(h.Floor) == 0 || h.ChangeInRestart <= 0 {
			errs = append(errs, fmt.Errorf("hub load, %d members, %s: converged %v, %d changes and %d floor changes timed, the change during a restart in %s",
				h.Members, h.Server, h.Converged, len(h.MCS), len(h.Floor), h.ChangeInRestart))
		}
	}
	for _, err := range errs {
		fmt.Println("smoke check failed:", err)
	}
	fmt.Printf("\nsmoke: %d results, %d failed\n", len(r.results), len(errs))
	return errors.Join(errs...)
}

// printHubServers puts the hub's figures under kube-apiserver and under
// the generic control plane side by side, for each size both served.
func (r *growthReport) printHubServers(out io.Writer) {
	for _, g := range r.hubLoads {
		if g.Server != hubServer(true) || !g.Converged {
			continue
		}
		for _, k := range r.hubLoads {
			if k.Server != hubServer(false) || k.Members != g.Members || !k.Converged {
				continue
			}
			fmt.Fprintf(out, "\nthe hub at %d members, the same load: kube-apiserver RSS %s, CPU under load %.0f %% of a core; the generic control plane RSS %s (%s), CPU %.0f %% (%s); latency p50 %s vs %s ms\n",
				g.Members, mib(k.HubRSS), 100*k.HubCPU, mib(g.HubRSS), ratioOf(float64(g.HubRSS), float64(k.HubRSS)),
				100*g.HubCPU, ratioOf(g.HubCPU, k.HubCPU), ms(percentile(k.MCS, 50)), ms(percentile(g.MCS, 50)))
		}
	}
}

// printHubGrowth fits the kube-apiserver hub loads' figures to the
// clusterset's size (y = a + b*members, least squares over the sizes run)
// and extrapolates: the simulated members each publish the same Services,
// so every figure that grows with the endpoints held grows linearly.
func (r *growthReport) printHubGrowth(out io.Writer) {
	var runs []*hubLoadResult
	for _, h := range r.hubLoads {
		if h.Server == hubServer(false) && h.Converged {
			runs = append(runs, h)
		}
	}
	if len(runs) < 2 {
		return
	}
	// byImporters: figures that grow with the real importers too (their
	// watches and writes on the hub, their share of the machine), fitted
	// only when every size ran with the same number of them.
	figures := []struct {
		name, unit  string
		byImporters bool
		value       func(*hubLoadResult) float64
	}{
		{"importers converged", "s", true, func(h *hubLoadResult) float64 { return h.Converge.Seconds() }},
		{"importer RSS (largest)", "MiB", false, func(h *hubLoadResult) float64 { return float64(slices.Max(h.ImporterRSS)) / (1 << 20) }},
		{"importer RSS per imported endpoint", "B", false, func(h *hubLoadResult) float64 {
			return float64(slices.Max(h.ImporterRSS)) / float64(h.ImportedEndpoints)
		}},
		{"hub RSS", "MiB", false, func(h *hubLoadResult) float64 { return float64(h.HubRSS) / (1 << 20) }},
		{"hub CPU under load", "% of a core", true, func(h *hubLoadResult) float64 { return 100 * h.HubCPU }},
		{"change latency p50", "ms", true, func(h *hubLoadResult) float64 { return float64(percentile(h.MCS, 50)) / float64(time.Millisecond) }},
		{"relay floor p50", "ms", true, func(h *hubLoadResult) float64 { return float64(percentile(h.Floor, 50)) / float64(time.Millisecond) }},
	}
	mixed := slices.ContainsFunc(runs, func(h *hubLoadResult) bool { return h.Importers != runs[0].Importers })
	fmt.Fprintf(out, "\nhub load by clusterset size (kube-apiserver; y = a + b*members over the sizes run):\n")
	if mixed {
		fmt.Fprintf(out, "(the sizes ran with different numbers of real importers: what depends on them too is not fitted, \"-\")\n")
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(w, "figure\tunit\t")
	for _, h := range runs {
		fmt.Fprintf(w, "%d members, %d importers\t", h.Members, h.Importers)
	}
	fmt.Fprint(w, "a\tb per member\tR²\t2,000 members\t5,000 members\t\n")
	for _, fig := range figures {
		var xs, ys []float64
		fmt.Fprintf(w, "%s\t%s\t", fig.name, fig.unit)
		for _, h := range runs {
			xs, ys = append(xs, float64(h.Members)), append(ys, fig.value(h))
			fmt.Fprintf(w, "%.4g\t", fig.value(h))
		}
		if mixed && fig.byImporters {
			fmt.Fprint(w, "-\t-\t-\t-\t-\t\n")
			continue
		}
		l := fitLine(xs, ys)
		fmt.Fprintf(w, "%.4g\t%.4g\t%.3f\t%.4g\t%.4g\t\n", l.A, l.B, l.R2, l.A+2000*l.B, l.A+5000*l.B)
	}
	w.Flush()
}

// ratioOf formats a/b as a ratio, or "-".
func ratioOf(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// printSizes prints the sizes phase: per mode and Service size, the import
// and the changes against the relay floor, and the hub's bytes per change;
// then the large import against its floor.
func (r *growthReport) printSizes(out io.Writer) {
	if len(r.sizes) == 0 && len(r.imports) == 0 {
		return
	}
	fmt.Fprintf(out, "\nsizes: one endpoint's change as its Service grows, N=%d (relay floor: one part-sized object per hop)\n", r.flags.members[0])
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "endpoints\tmode\timported in\tchange p50 ms\tp99 ms\tfloor p50 ms\tfloor p99 ms\tratio p50\thub bytes per change\tper watcher\tone part\t")
	for _, z := range r.sizes {
		bytes, per, part := "", "", ""
		if z.Mode == modeHub {
			bytes, per, part = fmt.Sprintf("%.0f", z.HubBytes), fmt.Sprintf("%.0f", z.HubBytes/float64(z.Watchers)), fmt.Sprint(z.PartBytes)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", z.Endpoints, z.Mode, z.Import.Round(10*time.Millisecond),
			ms(percentile(z.Latency, 50)), ms(percentile(z.Latency, 99)), ms(percentile(z.Floor, 50)), ms(percentile(z.Floor, 99)),
			ratio(percentile(z.Latency, 50), percentile(z.Floor, 50)), bytes, per, part)
	}
	w.Flush()
	if len(r.imports) > 0 {
		fmt.Fprintln(out)
		w = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(w, "import of\tmode\tinto every member in\twrite floor\tratio\t")
		for _, i := range r.imports {
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t\n", i.Endpoints, i.Mode, i.Import.Round(10*time.Millisecond), i.Floor.Round(10*time.Millisecond), ratio(i.Import, i.Floor))
		}
		w.Flush()
	}
}

// sizeGoals reports issue 45's goals: a change costs the hub at most 2x
// one part's bytes per watcher, whatever the size; hub mode's change p50
// at most 1.5x central mode's from 1,000 endpoints on; the large import at
// most 2x its write floor in every mode.
func (r *growthReport) sizeGoals(goal func(bool, string, ...any)) {
	central := map[int]*sizeResult{}
	for _, z := range r.sizes {
		if z.Mode == modeCentral {
			central[z.Endpoints] = z
		}
	}
	for _, z := range r.sizes {
		if z.Mode != modeHub {
			continue
		}
		per := z.HubBytes / float64(z.Watchers)
		goal(per <= 2*float64(z.PartBytes), "sizes, %d endpoints: the hub sent %.0f bytes per change per watcher <= 2x one part (%d bytes)", z.Endpoints, per, z.PartBytes)
		if c := central[z.Endpoints]; c != nil && z.Endpoints >= 1000 {
			h50, c50 := percentile(z.Latency, 50), percentile(c.Latency, 50)
			goal(h50 <= c50*3/2, "sizes, %d endpoints: hub mode's change p50 %s ms <= 1.5x central mode's %s ms (%s)", z.Endpoints, ms(h50), ms(c50), ratio(h50, c50))
		}
	}
	for _, i := range r.imports {
		goal(i.Import <= 2*i.Floor, "sizes, %s mode: the import of %d endpoints in %s <= 2x its write floor %s (%s)",
			i.Mode, i.Endpoints, i.Import.Round(10*time.Millisecond), i.Floor.Round(10*time.Millisecond), ratio(i.Import, i.Floor))
	}
}
