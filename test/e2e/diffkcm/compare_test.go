package diffkcm

import (
	"encoding/json"
	"fmt"
	"maps"
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

// hintCounts counts, per address type, the ready endpoints of each zone
// hinted to each zone ("IPv4 a->b": 2).
func hintCounts(slices_ []discoveryv1.EndpointSlice) map[string]int {
	counts := map[string]int{}
	for _, s := range slices_ {
		for _, ep := range s.Endpoints {
			if ep.Hints == nil {
				continue
			}
			for _, z := range ep.Hints.ForZones {
				counts[fmt.Sprintf("%s %s->%s", s.AddressType, ptr.Deref(ep.Zone, ""), z.Name)]++
			}
		}
	}
	return counts
}

// hintedPerZone counts the hints per hinted zone and address type.
func hintedPerZone(slices_ []discoveryv1.EndpointSlice) map[string]int {
	counts := map[string]int{}
	for k, n := range hintCounts(slices_) {
		typ, arrow, _ := strings.Cut(k, " ")
		_, to, _ := strings.Cut(arrow, "->")
		counts[typ+" "+to] += n
	}
	return counts
}

// explainedTopologyHints is the one known difference: for a Service with
// topology-mode Auto, kube-controller-manager keeps the hints of slices it
// does not rewrite and moves hints between zones in the order of its
// slices, the library in the order of the addresses, so the two may hint
// different endpoints of a zone to another zone. Both give every zone the
// same number of hints; that is what is compared for such Services.
const explainedTopologyHints = "topology-hints-which-endpoints"

// compare returns "" when ours matches theirs, the name of the explained
// difference when only that differs, or the diff.
func compare(topology bool, ours, theirs []discoveryv1.EndpointSlice) (explained, diff string) {
	o, t := normalise(ours, false), normalise(theirs, false)
	if reflect.DeepEqual(o, t) {
		return "", ""
	}
	if topology && reflect.DeepEqual(normalise(ours, true), normalise(theirs, true)) &&
		reflect.DeepEqual(hintedPerZone(ours), hintedPerZone(theirs)) {
		return explainedTopologyHints, ""
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
