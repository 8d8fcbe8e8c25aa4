package diffkcm

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
)

// auditPolicy logs every write to EndpointSlices, and nothing else: the
// writes of each controller, told apart by user agent.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
  resources:
  - group: "discovery.k8s.io"
    resources: ["endpointslices"]
- level: None
`

// sideBySide measures both controllers of each pair in the same run: their
// EndpointSlice writes (from the audit log), their CPU, and the time from a
// pod's readiness change (the barrier's) to the slice that carries it.
type sideBySide struct {
	cpuStart map[string]time.Duration
	pids     map[string]int

	mu sync.Mutex
	// seen[managed-by] are the barrier's readiness values as each
	// controller's slice carried them, with when they were first seen.
	seen      map[string][]readiness
	flippedAt time.Time
	latencies map[string][]time.Duration
	// updates[managed-by] are the updates of each controller's slices,
	// by what they changed (updateKind).
	updates map[string]map[string]int
	// stepUpdates[managed-by] are the updates of the step under way;
	// byStep[kind of step] sums them per kind of step, and steps counts
	// the steps of each kind.
	stepUpdates map[string]int
	byStep      map[string]map[string]int
	steps       map[string]int
	// stepWrites[managed-by] describe the updates of the step under way
	// (hintsChange); differing lists, for the first steps where ours and
	// kube-controller-manager's counts differ, both sides' descriptions:
	// where the extra writes come from. step numbers the steps settled.
	stepWrites map[string][]string
	differing  []string
	step       int
	// slices is the informer's store; stepServices are the Services
	// whose slices changed in the step under way, and history[Service]
	// its last steps: what each did and both sides' slices after it
	// (serviceHints), so that a differing step shows where the two
	// histories parted.
	slices       cache.Store
	stepServices map[string]bool
	history      map[string][]string
}

// maxDiffering bounds the steps described in the report, maxHistory the
// steps of a Service's history each describes.
const (
	maxDiffering = 20
	maxHistory   = 12
)

type readiness struct {
	ready bool
	at    time.Time
}

// watchSlices records, from one informer over the namespace's slices,
// when each controller's barrier slice changes and what each update of any
// slice changed.
func (s *sideBySide) watchSlices(ctx context.Context, kube kubernetes.Interface) error {
	s.seen, s.latencies, s.updates = map[string][]readiness{}, map[string][]time.Duration{}, map[string]map[string]int{}
	s.stepUpdates, s.byStep, s.steps = map[string]int{}, map[string]map[string]int{}, map[string]int{}
	s.stepWrites, s.stepServices, s.history = map[string][]string{}, map[string]bool{}, map[string][]string{}
	touched := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		slice, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok || slice.Labels[discoveryv1.LabelServiceName] == barrier {
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.stepServices[slice.Labels[discoveryv1.LabelServiceName]] = true
	}
	recordBarrier := func(slice *discoveryv1.EndpointSlice) {
		if slice.Labels[discoveryv1.LabelServiceName] != barrier || len(slice.Endpoints) == 0 {
			return
		}
		now, m := time.Now(), slice.Labels[discoveryv1.LabelManagedBy]
		s.mu.Lock()
		defer s.mu.Unlock()
		s.seen[m] = append(s.seen[m], readiness{ptr.Deref(slice.Endpoints[0].Conditions.Ready, false), now})
	}
	f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(namespace))
	informer := f.Discovery().V1().EndpointSlices().Informer()
	s.slices = informer.GetStore()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			touched(obj)
			if slice, ok := obj.(*discoveryv1.EndpointSlice); ok {
				recordBarrier(slice)
			}
		},
		DeleteFunc: touched,
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*discoveryv1.EndpointSlice)
			c, ok2 := cur.(*discoveryv1.EndpointSlice)
			if !ok1 || !ok2 {
				return
			}
			recordBarrier(c)
			if o.ResourceVersion == c.ResourceVersion {
				return
			}
			touched(c)
			m := c.Labels[discoveryv1.LabelManagedBy]
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.updates[m] == nil {
				s.updates[m] = map[string]int{}
			}
			s.updates[m][updateKind(o, c)]++
			s.stepUpdates[m]++
			s.stepWrites[m] = append(s.stepWrites[m], hintsChange(o, c)+endpointChanges(o, c))
		},
	}); err != nil {
		return err
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return nil
}

func (s *sideBySide) flipping() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flippedAt = time.Now()
}

// settled notes, per controller, how long after the flip its slice first
// carried the new readiness, and the updates of the step that settled
// (what describes it) under its kind.
func (s *sideBySide) settled(ready bool, what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kind := stepKind(what)
	s.steps[kind]++
	if s.byStep[kind] == nil {
		s.byStep[kind] = map[string]int{}
	}
	for m, n := range s.stepUpdates {
		s.byStep[kind][m] += n
	}
	s.recordHistory(what)
	s.step++
	if s.stepUpdates[ours] != s.stepUpdates[kcm] && len(s.differing) < maxDiffering {
		d := fmt.Sprintf("step %d, %s (%d against %d):\n        %s: %s\n        %s: %s", s.step, what,
			s.stepUpdates[ours], s.stepUpdates[kcm], ours, strings.Join(s.stepWrites[ours], "; "), kcm, strings.Join(s.stepWrites[kcm], "; "))
		for _, svc := range slices.Sorted(maps.Keys(s.stepServices)) {
			d += fmt.Sprintf("\n        history of %s, oldest first (step: each side's slices after it):\n          %s", svc, strings.Join(s.history[svc], "\n          "))
		}
		s.differing = append(s.differing, d)
	}
	clear(s.stepUpdates)
	clear(s.stepWrites)
	clear(s.stepServices)
	for _, m := range []string{ours, kcm} {
		for _, r := range s.seen[m] {
			if r.ready == ready && !r.at.Before(s.flippedAt) {
				s.latencies[m] = append(s.latencies[m], r.at.Sub(s.flippedAt))
				break
			}
		}
		s.seen[m] = nil
	}
}

// recordHistory adds the step to the history of each Service it changed
// or names (a change of a Service that no controller wrote still shapes
// the next steps).
func (s *sideBySide) recordHistory(what string) {
	named := map[string]bool{}
	maps.Copy(named, s.stepServices)
	if svc, ok := strings.CutPrefix(what, "service "); ok {
		named[strings.SplitN(svc, ":", 2)[0]] = true
	}
	if len(named) == 0 {
		return
	}
	objs := s.slices.List()
	for svc := range named {
		h := append(s.history[svc], fmt.Sprintf("%s: ours %s; kube-controller-manager %s",
			what, serviceHints(objs, svc, ours), serviceHints(objs, svc, kcm)))
		s.history[svc] = h[max(0, len(h)-maxHistory):]
	}
}

// serviceHints describes one controller's slices of a Service: each
// slice's ready endpoints and their hints per zone (zoneHints), sorted,
// e.g. "[IPv4 1 ready: none | IPv4 3 ready: a:2 b:1]".
func serviceHints(objs []any, svc, managedBy string) string {
	var out []string
	for _, obj := range objs {
		slice, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok || slice.Labels[discoveryv1.LabelServiceName] != svc || slice.Labels[discoveryv1.LabelManagedBy] != managedBy {
			continue
		}
		out = append(out, fmt.Sprintf("%s %d ready: %s", slice.AddressType, readyCount(slice), zoneHints(slice)))
	}
	slices.Sort(out)
	return "[" + strings.Join(out, " | ") + "]"
}

// startCPU notes the CPU the processes compared have used so far.
func (s *sideBySide) startCPU(pids map[string]int) error {
	s.pids, s.cpuStart = pids, map[string]time.Duration{}
	for name, pid := range pids {
		t, err := host.CPUTime(pid)
		if err != nil {
			return fmt.Errorf("CPU of %s: %w", name, err)
		}
		s.cpuStart[name] = t
	}
	return nil
}

// report prints the figures docs/benchmarks.md quotes.
func (s *sideBySide) report(t *testing.T, auditLog string, steps int) {
	writes, byService, err := sliceWrites(auditLog)
	if err != nil {
		t.Errorf("audit log: %v", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "side by side over %d steps:\n  EndpointSlice writes by user agent:\n", steps)
	for _, ua := range slices.Sorted(maps.Keys(writes)) {
		fmt.Fprintf(&b, "    %-70s %v\n", ua, writes[ua])
	}
	fmt.Fprintf(&b, "  updates and deletes by Service, where the controllers of a pair differ:\n")
	for _, svc := range slices.Sorted(maps.Keys(byService)) {
		if line := pairsDiffer(byService[svc]); line != "" {
			fmt.Fprintf(&b, "    %-20s %s\n", svc, line)
		}
	}
	fmt.Fprintf(&b, "  CPU over the workload:\n")
	for _, name := range slices.Sorted(maps.Keys(s.pids)) {
		if end, err := host.CPUTime(s.pids[name]); err == nil {
			fmt.Fprintf(&b, "    %-40s %.1f s\n", name, (end - s.cpuStart[name]).Seconds())
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(&b, "  slice updates by what they changed (watched):\n")
	for _, m := range slices.Sorted(maps.Keys(s.updates)) {
		fmt.Fprintf(&b, "    %-40s %v\n", m, s.updates[m])
	}
	fmt.Fprintf(&b, "  slice updates by kind of step (watched; the barrier's flip included), where a pair differs:\n")
	for _, kind := range slices.Sorted(maps.Keys(s.byStep)) {
		u := s.byStep[kind]
		for _, pair := range pairs {
			if u[pair[0]] != u[pair[1]] {
				fmt.Fprintf(&b, "    %-50s %4d steps: %s %d, %s %d\n", kind, s.steps[kind], pair[0], u[pair[0]], pair[1], u[pair[1]])
			}
		}
	}
	if len(s.differing) > 0 {
		fmt.Fprintf(&b, "  steps where %s and %s wrote a different number of updates (slice: ready endpoints' hints per zone before -> after):\n", ours, kcm)
		for _, d := range s.differing {
			fmt.Fprintf(&b, "    %s\n", d)
		}
	}
	fmt.Fprintf(&b, "  pod readiness -> slice (the barrier, once per step):\n")
	for _, m := range []string{ours, kcm} {
		l := slices.Sorted(slices.Values(s.latencies[m]))
		if len(l) == 0 {
			continue
		}
		fmt.Fprintf(&b, "    %-40s p50 %v, p90 %v, p99 %v (%d changes)\n", m,
			l[len(l)/2].Round(time.Millisecond), l[len(l)*9/10].Round(time.Millisecond), l[len(l)*99/100].Round(time.Millisecond), len(l))
	}
	t.Log(b.String())
}

// podName matches the workload's pod names (p1, p2, ...) and the node a
// pod is created on.
var podName = regexp.MustCompile(` p[0-9]+\b| on \S+$`)

// stepKind is a step's description without the pod and node it names, so
// that steps of one kind add up.
func stepKind(what string) string {
	return podName.ReplaceAllString(what, "")
}

// pairsDiffer says, for one Service's writes by controller (the user
// agent's last part), how many each controller of a pair wrote, for the
// pairs whose two counts differ; "" if none does.
func pairsDiffer(writes map[string]int) string {
	var out []string
	for _, pair := range [][2]string{{"endpointslice.example.com", "endpointslice-controller"}, {"mirroring.example.com", "endpointslicemirroring-controller"}} {
		if writes[pair[0]] != writes[pair[1]] {
			out = append(out, fmt.Sprintf("%s %d, %s %d", pair[0], writes[pair[0]], pair[1], writes[pair[1]]))
		}
	}
	return strings.Join(out, "; ")
}

// hintsChange describes an update of a slice by its Service, its ready
// endpoints and their hints per zone before and after, e.g.
// "plain-x7k2p (3 ready): a:2 b:1 -> a:1 b:1 c:1" ("none" without hints).
func hintsChange(old, cur *discoveryv1.EndpointSlice) string {
	return fmt.Sprintf("%s (%d ready): %s -> %s", cur.Name, readyCount(cur), zoneHints(old), zoneHints(cur))
}

// endpointChanges lists what an update did to a slice's endpoints, by
// first address: " [+10.0.0.7 -10.0.0.9 10.0.0.3 ready:false]" (conditions
// as ready, serving, terminating), "" when it changed none.
func endpointChanges(old, cur *discoveryv1.EndpointSlice) string {
	conditions := func(ep discoveryv1.Endpoint) string {
		c := ep.Conditions
		return fmt.Sprintf("ready:%v serving:%v terminating:%v", ptr.Deref(c.Ready, false), ptr.Deref(c.Serving, false), ptr.Deref(c.Terminating, false))
	}
	byAddress := func(s *discoveryv1.EndpointSlice) map[string]discoveryv1.Endpoint {
		out := map[string]discoveryv1.Endpoint{}
		for _, ep := range s.Endpoints {
			if len(ep.Addresses) > 0 {
				out[ep.Addresses[0]] = ep
			}
		}
		return out
	}
	before, after := byAddress(old), byAddress(cur)
	var changes []string
	for _, a := range slices.Sorted(maps.Keys(after)) {
		b, ok := before[a]
		switch {
		case !ok:
			changes = append(changes, "+"+a)
		case conditions(b) != conditions(after[a]):
			changes = append(changes, a+" "+conditions(after[a]))
		case !reflect.DeepEqual(b, after[a]):
			changes = append(changes, a+" changed")
		}
	}
	for _, a := range slices.Sorted(maps.Keys(before)) {
		if _, ok := after[a]; !ok {
			changes = append(changes, "-"+a)
		}
	}
	if len(changes) == 0 {
		return ""
	}
	return " [" + strings.Join(changes, " ") + "]"
}

// zoneHints counts a slice's ready endpoints' hints per zone (countHints),
// "a:2 b:1" ("none" without hints), "+nodes" after it where they also name
// nodes.
func zoneHints(s *discoveryv1.EndpointSlice) string {
	_, hinted, _ := countHints([]discoveryv1.EndpointSlice{*s})
	byZone := hinted[s.AddressType]
	var parts []string
	for _, z := range slices.Sorted(maps.Keys(byZone)) {
		parts = append(parts, fmt.Sprintf("%s:%d", z, byZone[z]))
	}
	if len(parts) == 0 {
		parts = []string{"none"}
	}
	if slices.ContainsFunc(s.Endpoints, func(ep discoveryv1.Endpoint) bool {
		return ptr.Deref(ep.Conditions.Ready, false) && ep.Hints != nil && len(ep.Hints.ForNodes) > 0
	}) {
		parts = append(parts, "+nodes")
	}
	return strings.Join(parts, " ")
}

// readyCount counts a slice's ready endpoints (countHints).
func readyCount(s *discoveryv1.EndpointSlice) int {
	ready, _, _ := countHints([]discoveryv1.EndpointSlice{*s})
	return ready[s.AddressType]
}

// updateKind says what an update of a slice changed: "endpoints, ports or
// labels" (what the differential test compares, endpoints as a set),
// "endpoint order only", or "nothing compared" (annotations, owners).
func updateKind(old, cur *discoveryv1.EndpointSlice) string {
	switch {
	case !reflect.DeepEqual(normalise([]discoveryv1.EndpointSlice{*old}, false), normalise([]discoveryv1.EndpointSlice{*cur}, false)):
		return "endpoints, ports or labels"
	case !reflect.DeepEqual(old.Endpoints, cur.Endpoints):
		return "endpoint order only"
	default:
		return "nothing compared"
	}
}

// sliceWrites counts the EndpointSlice writes in namespace diff by user
// agent and verb (a write the API server refused counted apart), and the
// updates and deletes by Service (the slice's name less its generated
// suffix; a create has no name yet) and controller (the user agent's last
// part).
func sliceWrites(path string) (byAgent map[string]map[string]int, byService map[string]map[string]int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	byAgent, byService = map[string]map[string]int{}, map[string]map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Verb      string `json:"verb"`
			UserAgent string `json:"userAgent"`
			ObjectRef *struct {
				Resource  string `json:"resource"`
				Namespace string `json:"namespace"`
				Name      string `json:"name"`
			} `json:"objectRef"`
			ResponseStatus *struct {
				Code int `json:"code"`
			} `json:"responseStatus"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.ObjectRef == nil || ev.ObjectRef.Namespace != namespace {
			continue
		}
		if byAgent[ev.UserAgent] == nil {
			byAgent[ev.UserAgent] = map[string]int{}
		}
		verb := ev.Verb
		if ev.ResponseStatus != nil && ev.ResponseStatus.Code >= 400 {
			verb += " refused" // by the API server: a conflict, an invalid or existing object
		}
		byAgent[ev.UserAgent][verb]++
		if i := strings.LastIndexByte(ev.ObjectRef.Name, '-'); i > 0 {
			svc := ev.ObjectRef.Name[:i]
			if byService[svc] == nil {
				byService[svc] = map[string]int{}
			}
			byService[svc][ev.UserAgent[strings.LastIndexByte(ev.UserAgent, '/')+1:]]++
		}
	}
	return byAgent, byService, sc.Err()
}
