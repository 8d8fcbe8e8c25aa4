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

// validHints reports whether slices carry a topology-aware allocation
// that upstream's rules allow, per address type: no hints at all, or every
// ready endpoint hinted to one zone and no zone hinted above its maximum
// (its minimum, its CPU share less the 20 % overload threshold rounded up,
// plus what the other minimums leave). A zone may fall short of its
// minimum: upstream moves no hint when less than half an endpoint is to
// give (getGivingAndReceivingZones), and keeps the hints of slices it does
// not rewrite as long as no zone passes its maximum (getHintsByZone); seed
// 7, step 120 leaves it 4/4/0 over the zones where ours is 4/3/1.
func validHints(slices_ []discoveryv1.EndpointSlice) bool {
	ready, hinted, oneZoneEach := countHints(slices_)
	if !oneZoneEach {
		return false
	}
	var total float64
	for _, c := range zoneCPU {
		total += c
	}
	for typ, n := range ready {
		if len(hinted[typ]) == 0 {
			continue // this address type is not hinted at all
		}
		minimum, sum := map[string]int{}, 0
		for z, c := range zoneCPU {
			minimum[z] = int(math.Ceil(c / total * float64(n) / 1.2))
			sum += minimum[z]
		}
		count := 0
		for z := range zoneCPU {
			h := hinted[typ][z]
			count += h
			if h > minimum[z]+n-sum {
				return false
			}
		}
		if count != n {
			return false
		}
	}
	return true
}

// explainedTopologyHints is the one known difference: for a Service with
// topology-mode Auto, kube-controller-manager keeps the hints of slices it
// does not rewrite, moves hints in the order of its slices and picks among
// equally short zones in map order (at random); the library computes them
// from the desired endpoints alone, in address and name order. The two may
// then hint different endpoints, or different numbers per zone. For such
// Services everything but the hints is compared exactly, and both sides'
// hints must be valid allocations by upstream's rules (validHints), both
// or neither hinting.
const explainedTopologyHints = "topology-hints-which-endpoints"

// compare returns "" when ours matches theirs, the name of the explained
// difference when only that differs, or the diff.
func compare(topology bool, ours, theirs []discoveryv1.EndpointSlice) (explained, diff string) {
	o, t := normalise(ours, false), normalise(theirs, false)
	if reflect.DeepEqual(o, t) {
		return "", ""
	}
	if topology && reflect.DeepEqual(normalise(ours, true), normalise(theirs, true)) {
		if validHints(ours) && validHints(theirs) && hasHints(ours) == hasHints(theirs) {
			return explainedTopologyHints, ""
		}
		return "", fmt.Sprintf("topology hints: ours %s (valid %v), kube-controller-manager's %s (valid %v)\n%s",
			hintCounts(ours), validHints(ours), hintCounts(theirs), validHints(theirs), diffViews(o, t))
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

func merge(a, b map[string][]string) map[string][]string {
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

func hasHints(slices_ []discoveryv1.EndpointSlice) bool {
	for _, s := range slices_ {
		for _, ep := range s.Endpoints {
			if ep.Hints != nil {
				return true
			}
		}
	}
	return false
}

// explainedMirroringRecycle is an upstream bug of kube-controller-manager's
// endpointslicemirroring-controller (v1.36.3, reconciler_helpers.go,
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
