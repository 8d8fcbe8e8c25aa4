package diffkcm

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// view is one controller's slices of one Service, normalised: what the
// issue compares (endpoints as sets with every field, ports, address
// types, labels), without what it sets aside (names, managed-by, owner
// UIDs, resourceVersions, the trigger-time annotation, and how endpoints
// are packed into slices).
type view struct {
	// Groups maps "<address type> <ports>" to the group's endpoints, each
	// as JSON, sorted; a placeholder is a group without endpoints.
	Groups map[string][]string
	// Labels are the slices' distinct label sets, managed-by aside.
	Labels []string
}

// normalise builds the view of slices; with hintsAside the endpoints'
// hints are left out (see explained).
func normalise(slices_ []discoveryv1.EndpointSlice, hintsAside bool) view {
	v := view{Groups: map[string][]string{}}
	labels := map[string]bool{}
	for _, s := range slices_ {
		ports := slices.Clone(s.Ports)
		slices.SortFunc(ports, func(a, b discoveryv1.EndpointPort) int {
			return strings.Compare(ptr.Deref(a.Name, ""), ptr.Deref(b.Name, ""))
		})
		key := string(s.AddressType) + " " + mustJSON(ports)
		if _, ok := v.Groups[key]; !ok {
			v.Groups[key] = []string{}
		}
		for _, ep := range s.Endpoints {
			if hintsAside {
				ep.Hints = nil
			}
			v.Groups[key] = append(v.Groups[key], mustJSON(ep))
		}
		l := maps.Clone(s.Labels)
		delete(l, discoveryv1.LabelManagedBy)
		labels[mustJSON(l)] = true
	}
	for k := range v.Groups {
		slices.Sort(v.Groups[k])
	}
	v.Labels = slices.Sorted(maps.Keys(labels))
	return v
}

// zoneCPU is the testbed's CPU per zone (main_test.go: 2 nodes of 32,
// 32 and 8 CPUs), in millicores.
var zoneCPU = map[string]float64{"diff-a": 64000, "diff-b": 64000, "diff-c": 16000}

// bounds returns each zone's minimum and maximum number of hints for n
// ready endpoints, as kube-controller-manager's topology cache computes
// them (getAllocations): the minimum is the zone's CPU share less the
// 20 % overload threshold, rounded up; the maximum, the minimum plus what
// the other minimums leave. ok is false when no allocation exists (fewer
// endpoints than zones, or minimums above n).
func bounds(n int) (minimum, maximum map[string]int, ok bool) {
	var total float64
	for _, c := range zoneCPU {
		total += c
	}
	minimum, maximum = map[string]int{}, map[string]int{}
	sum := 0
	for z, c := range zoneCPU {
		minimum[z] = int(math.Ceil(c / total * float64(n) / 1.2))
		sum += minimum[z]
	}
	if len(zoneCPU) > n || sum > n {
		return nil, nil, false
	}
	for z := range zoneCPU {
		maximum[z] = minimum[z] + n - sum
	}
	return minimum, maximum, true
}

// hintProblems lists, per address type, what makes slices' hints other
// than an allocation upstream can write: a ready endpoint hinted to other
// than one zone, some ready endpoints hinted and others not, hints where
// no allocation exists, or a zone above its maximum. belowMinimum lists
// the zones below their minimum, which upstream can write: it keeps the
// hints of slices it does not rewrite while no zone passes its maximum
// (getHintsByZone), and moves no hint when less than half an endpoint is
// to give (getGivingAndReceivingZones).
func hintProblems(slices_ []discoveryv1.EndpointSlice) (problems, belowMinimum []string) {
	ready, hinted, oneZoneEach := countHints(slices_)
	if !oneZoneEach {
		problems = append(problems, "a ready endpoint is hinted to other than one zone")
	}
	for _, typ := range slices.Sorted(maps.Keys(ready)) {
		n, count := ready[typ], 0
		for _, h := range hinted[typ] {
			count += h
		}
		if count == 0 {
			continue // this address type is not hinted at all
		}
		if count != n {
			problems = append(problems, fmt.Sprintf("%s: %d of %d ready endpoints hinted", typ, count, n))
		}
		minimum, maximum, ok := bounds(n)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: hints where %d endpoints allow no allocation", typ, n))
			continue
		}
		for _, z := range slices.Sorted(maps.Keys(zoneCPU)) {
			switch h := hinted[typ][z]; {
			case h > maximum[z]:
				problems = append(problems, fmt.Sprintf("%s: zone %s has %d hints, above its maximum %d", typ, z, h, maximum[z]))
			case h < minimum[z]:
				belowMinimum = append(belowMinimum, fmt.Sprintf("%s: zone %s has %d hints, below its minimum %d", typ, z, h, minimum[z]))
			}
		}
	}
	return problems, belowMinimum
}

// sameCounts reports whether two sides hint the same number of endpoints
// to each zone, per address type; with equalZonesExchanged, counts may
// also be exchanged between zones of the same CPU.
func sameCounts(ours, theirs []discoveryv1.EndpointSlice, equalZonesExchanged bool) bool {
	_, o, _ := countHints(ours)
	_, t, _ := countHints(theirs)
	byCPU := func(hinted map[string]int) map[float64][]int {
		out := map[float64][]int{}
		for z, c := range zoneCPU {
			out[c] = append(out[c], hinted[z])
		}
		for c := range out {
			slices.Sort(out[c])
		}
		return out
	}
	for _, typ := range slices.Sorted(maps.Keys(merge(o, t))) {
		if maps.Equal(o[typ], t[typ]) {
			continue
		}
		if !equalZonesExchanged {
			return false
		}
		ob, tb := byCPU(o[typ]), byCPU(t[typ])
		for c := range ob {
			if !slices.Equal(ob[c], tb[c]) {
				return false
			}
		}
	}
	return true
}

// The explained differences of topology-aware hints (Services with
// topology-mode Auto) where everything but the hints is the same. The
// library computes hints as kube-controller-manager does: it keeps the
// valid hints of slices it does not otherwise write and rebalances only
// the slices written, so the numbers per zone depend on history on both
// sides. What may differ:
const (
	// explainedTopologyHints: which endpoints carry the hints, the
	// numbers per zone the same. Upstream moves hints in the order its
	// lister gives the slices; the library in the slices' name order.
	explainedTopologyHints = "topology-hints-which-endpoints"
	// explainedTopologyTie: the numbers of two zones of the same CPU
	// exchanged. Upstream picks among zones equally far from their share
	// at random (getMost over a map); the library the first by name.
	explainedTopologyTie = "topology-hints-equal-zones-exchanged"
	// explainedTopologyHistory: other numbers per zone, each side an
	// allocation (see compareHints). After a tie or another order of
	// slices, the two sides keep different hints in the slices they do
	// not rewrite, and a later sync that rewrites few slices cannot even
	// them out: seed 20261124, step 296, 16 ready endpoints, ours 8/6/2
	// and kube-controller-manager's 7/7/2, after two ties.
	explainedTopologyHistory = "topology-hints-other-numbers-from-history"
	// explainedTopologyBelowMinimum: ours leaves a zone below its minimum,
	// as upstream does when the hints kept in slices it does not rewrite
	// leave a zone short (getHintsByZone checks maximums only). The
	// library's default; with WithZoneMinimums (DIFFKCM_ZONE_MINIMUMS=1)
	// it is a difference.
	explainedTopologyBelowMinimum = "topology-hints-below-a-minimum-as-upstream"
)

// compareHints explains a topology Service's difference in hints alone,
// or says why it is a difference. Both sides must be allocations upstream
// can write: each ready endpoint hinted to one zone, or none of a type
// hinted (on both sides), and no zone above its maximum. With
// zoneMinimums (ours runs WithZoneMinimums) ours must besides keep every
// zone at its minimum, which upstream may not (see hintProblems).
func compareHints(ours, theirs []discoveryv1.EndpointSlice, zoneMinimums bool) (explained, diff string) {
	oursProblems, oursShort := hintProblems(ours)
	theirProblems, _ := hintProblems(theirs)
	switch {
	case len(oursProblems) > 0 || len(theirProblems) > 0:
		return "", fmt.Sprintf("hints that are no allocation: ours %v, kube-controller-manager's %v", oursProblems, theirProblems)
	case zoneMinimums && len(oursShort) > 0:
		return "", fmt.Sprintf("ours below a minimum: %v", oursShort)
	case !maps.Equal(hintedTypes(ours), hintedTypes(theirs)):
		return "", "one side hints an address type the other does not (whether hints are given depends on the endpoints and the zones' CPU alone)"
	case len(oursShort) > 0:
		return explainedTopologyBelowMinimum, ""
	case sameCounts(ours, theirs, false):
		return explainedTopologyHints, ""
	case sameCounts(ours, theirs, true):
		return explainedTopologyTie, ""
	}
	return explainedTopologyHistory, ""
}

// hintedTypes returns, per address type, whether any ready endpoint has
// hints.
func hintedTypes(slices_ []discoveryv1.EndpointSlice) map[discoveryv1.AddressType]bool {
	_, hinted, _ := countHints(slices_)
	out := map[discoveryv1.AddressType]bool{}
	for typ, byZone := range hinted {
		out[typ] = len(byZone) > 0
	}
	return out
}

// compare returns "" when ours matches theirs, the name of the explained
// difference when only that differs, or the diff. topology says the
// Service has topology-aware hints, zoneMinimums that ours runs
// WithZoneMinimums.
func compare(topology, zoneMinimums bool, ours, theirs []discoveryv1.EndpointSlice) (explained, diff string) {
	o, t := normalise(ours, false), normalise(theirs, false)
	if reflect.DeepEqual(o, t) {
		return "", ""
	}
	if topology && reflect.DeepEqual(normalise(ours, true), normalise(theirs, true)) {
		explained, why := compareHints(ours, theirs, zoneMinimums)
		if why == "" {
			return explained, ""
		}
		return "", fmt.Sprintf("topology hints: %s; ours %s, kube-controller-manager's %s\n%s",
			why, hintCounts(ours), hintCounts(theirs), diffViews(o, t))
	}
	return "", diffViews(o, t)
}

// diffViews lists what only one side has.
func diffViews(ours, theirs view) string {
	var b strings.Builder
	if !slices.Equal(ours.Labels, theirs.Labels) {
		fmt.Fprintf(&b, "labels: ours %v, kube-controller-manager's %v\n", ours.Labels, theirs.Labels)
	}
	for _, k := range slices.Sorted(maps.Keys(merge(ours.Groups, theirs.Groups))) {
		o, okO := ours.Groups[k]
		t, okT := theirs.Groups[k]
		switch {
		case !okO:
			fmt.Fprintf(&b, "group %s: only kube-controller-manager has it (%d endpoints)\n", k, len(t))
		case !okT:
			fmt.Fprintf(&b, "group %s: only ours has it (%d endpoints)\n", k, len(o))
		}
		for _, ep := range o {
			if !slices.Contains(t, ep) {
				fmt.Fprintf(&b, "  %s: only ours: %s\n", k, ep)
			}
		}
		for _, ep := range t {
			if !slices.Contains(o, ep) {
				fmt.Fprintf(&b, "  %s: only kube-controller-manager's: %s\n", k, ep)
			}
		}
	}
	return b.String()
}

// merge returns a map with the keys of both (b's values where both have one).
func merge[K comparable, V any](a, b map[K]V) map[K]V {
	m := maps.Clone(a)
	maps.Copy(m, b)
	return m
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// hintCounts describes a Service's hints: per address type, the ready
// endpoints and how many are hinted to each zone.
func hintCounts(slices_ []discoveryv1.EndpointSlice) string {
	ready, hinted, _ := countHints(slices_)
	var b strings.Builder
	for _, typ := range slices.Sorted(maps.Keys(ready)) {
		fmt.Fprintf(&b, "%s: %d ready, hinted %v; ", typ, ready[typ], hinted[typ])
	}
	return b.String()
}

// countHints counts, per address type, the ready endpoints of slices and
// their hints per zone (an endpoint hinted to several zones counts in
// each); oneZoneEach is false if a ready endpoint's hints name other than
// one zone.
func countHints(slices_ []discoveryv1.EndpointSlice) (ready map[discoveryv1.AddressType]int, hinted map[discoveryv1.AddressType]map[string]int, oneZoneEach bool) {
	ready, hinted, oneZoneEach = map[discoveryv1.AddressType]int{}, map[discoveryv1.AddressType]map[string]int{}, true
	for _, s := range slices_ {
		for _, ep := range s.Endpoints {
			if !ptr.Deref(ep.Conditions.Ready, false) {
				continue
			}
			ready[s.AddressType]++
			if hinted[s.AddressType] == nil {
				hinted[s.AddressType] = map[string]int{}
			}
			if ep.Hints == nil {
				continue
			}
			if len(ep.Hints.ForZones) != 1 {
				oneZoneEach = false
			}
			for _, z := range ep.Hints.ForZones {
				hinted[s.AddressType][z.Name]++
			}
		}
	}
	return ready, hinted, oneZoneEach
}

// explainedMirroringRecycle is an upstream bug of kube-controller-manager's
// endpointslicemirroring-controller (v1.36.3,
// pkg/controller/endpointslicemirroring/reconciler_helpers.go,
// recycleSlices): when one sync both creates and deletes slices of an
// address type, it turns creates into updates of the slices it would
// delete, but takes them out of the creates by name (removeSlice), and a
// slice to create has no name yet. It can then take out another slice to
// create (of another address type or port set) and still create the one it
// renamed, which the API server refuses: "... already exists, the server
// was not able to generate a unique name for the object". The sync fails
// before any update and, depending on map order, on every retry, and
// kube-controller-manager's slices keep the state before. While its last
// sync of a Service failed so, that Service's mirroring pair is not
// compared (mirroringStuck).
const explainedMirroringRecycle = "mirroring-recycled-slice-created"

// mirroringStuck reports whether kube-controller-manager's last finished
// sync of the Endpoints key failed on the recycleSlices bug, by its log
// (the mirroring controller at verbosity 4 logs each sync's start, and
// every failure is logged with the key). A log that cannot be read
// explains nothing.
func mirroringStuck(kcmLog, key string) bool {
	b, err := os.ReadFile(kcmLog)
	if err != nil {
		return false
	}
	stuck := false
	for line := range strings.Lines(string(b)) {
		if !strings.Contains(line, "endpointslicemirroring_controller.go") || !strings.Contains(line, ` key="`+key+`"`) {
			continue
		}
		switch {
		case strings.Contains(line, `"syncEndpoints"`):
			stuck = false
		case strings.Contains(line, " err="):
			stuck = strings.Contains(line, "already exists, the server was not able to generate a unique name for the object")
		}
	}
	return stuck
}
