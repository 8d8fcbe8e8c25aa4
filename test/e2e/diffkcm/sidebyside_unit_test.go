package diffkcm

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

func TestSliceWritesCountsByAgentAndService(t *testing.T) {
	const (
		kcmAgent  = "kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/$Format/endpointslice-controller"
		oursAgent = "endpointslice-example/endpointslice.example.com"
	)
	log := `{"verb":"create","userAgent":"` + kcmAgent + `","objectRef":{"resource":"endpointslices","namespace":"diff"},"responseStatus":{"code":201}}
{"verb":"update","userAgent":"` + kcmAgent + `","objectRef":{"resource":"endpointslices","namespace":"diff","name":"web-dual-abcde"},"responseStatus":{"code":200}}
{"verb":"update","userAgent":"` + oursAgent + `","objectRef":{"resource":"endpointslices","namespace":"diff","name":"web-dual-fghij"},"responseStatus":{"code":200}}
{"verb":"update","userAgent":"` + oursAgent + `","objectRef":{"resource":"endpointslices","namespace":"diff","name":"web-dual-fghij"},"responseStatus":{"code":409}}
{"verb":"delete","userAgent":"` + oursAgent + `","objectRef":{"resource":"endpointslices","namespace":"other","name":"web-xxxxx"},"responseStatus":{"code":200}}
not json
`
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	byAgent, byService, err := sliceWrites(path)
	if err != nil {
		t.Fatal(err)
	}
	wantAgent := map[string]map[string]int{
		kcmAgent:  {"create": 1, "update": 1},
		oursAgent: {"update": 1, "update refused": 1},
	}
	if !reflect.DeepEqual(byAgent, wantAgent) {
		t.Errorf("by agent %v, want %v", byAgent, wantAgent)
	}
	wantService := map[string]map[string]int{"web-dual": {"endpointslice-controller": 1, "endpointslice.example.com": 2}}
	if !reflect.DeepEqual(byService, wantService) {
		t.Errorf("by service %v, want %v", byService, wantService)
	}
	if got, want := pairsDiffer(byService["web-dual"]), "endpointslice.example.com 2, endpointslice-controller 1"; got != want {
		t.Errorf("pairsDiffer %q, want %q", got, want)
	}
	if got := pairsDiffer(map[string]int{"endpointslice.example.com": 3, "endpointslice-controller": 3}); got != "" {
		t.Errorf("pairsDiffer of equal counts %q, want none", got)
	}
}

func TestUpdateKind(t *testing.T) {
	ep := func(addr string) discoveryv1.Endpoint { return discoveryv1.Endpoint{Addresses: []string{addr}} }
	old := &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{ep("10.0.0.1"), ep("10.0.0.2")}}
	reordered := old.DeepCopy()
	reordered.Endpoints[0], reordered.Endpoints[1] = reordered.Endpoints[1], reordered.Endpoints[0]
	annotated := old.DeepCopy()
	annotated.Annotations = map[string]string{"endpoints.kubernetes.io/last-change-trigger-time": "now"}
	added := old.DeepCopy()
	added.Endpoints = append(added.Endpoints, ep("10.0.0.3"))
	relabelled := old.DeepCopy()
	relabelled.Labels = map[string]string{"a": "b"}
	for cur, want := range map[*discoveryv1.EndpointSlice]string{
		reordered:  "endpoint order only",
		annotated:  "nothing compared",
		added:      "endpoints, ports or labels",
		relabelled: "endpoints, ports or labels",
	} {
		if got := updateKind(old, cur); got != want {
			t.Errorf("updateKind(%+v) = %q, want %q", cur, got, want)
		}
	}
}

// hintedSlice is one IPv4 slice of ready endpoints 10.0.0.1, 10.0.0.2, ...
// hinted to the zones given, in order ("" for none).
func hintedSlice(zones ...string) []discoveryv1.EndpointSlice {
	s := discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4}
	for i, z := range zones {
		ep := discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.0.0.%d", i+1)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		}
		if z != "" {
			ep.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: z}}}
		}
		s.Endpoints = append(s.Endpoints, ep)
	}
	return []discoveryv1.EndpointSlice{s}
}

// perZone returns a, b and c zone names, in that order, n of each.
func perZone(a, b, c int) []string {
	var out []string
	for z, n := range map[string]int{"diff-a": a, "diff-b": b, "diff-c": c} {
		for range n {
			out = append(out, z)
		}
	}
	slices.Sort(out)
	return out
}

// TestCompareHints: over the testbed's zones (CPU 4:4:1), 9 ready
// endpoints allow exactly 4/4/1 (minimum = maximum); 10 allow a and b 4 to
// 5, c 1 to 2. Other endpoints, a and b (of equal CPU) exchanged, and other
// numbers within those bounds are explained (kube-controller-manager's may
// be below a minimum, and ours too unless it runs WithZoneMinimums); a zone
// above its maximum, a ready endpoint without hints or with two zones are
// differences.
func TestCompareHints(t *testing.T) {
	reversed := func(zones []string) []discoveryv1.EndpointSlice {
		r := slices.Clone(zones)
		slices.Reverse(r)
		return hintedSlice(r...)
	}
	twoZones := hintedSlice(perZone(4, 4, 1)...)
	twoZones[0].Endpoints[0].Hints.ForZones = append(twoZones[0].Endpoints[0].Hints.ForZones, discoveryv1.ForZone{Name: "diff-c"})
	for name, tc := range map[string]struct {
		ours, theirs []discoveryv1.EndpointSlice
		want         string // the explanation, or "diff"
		zoneMinimums bool   // ours runs WithZoneMinimums
	}{
		"other endpoints, 4/4/1":                {hintedSlice(perZone(4, 4, 1)...), reversed(perZone(4, 4, 1)), explainedTopologyHints, false},
		"a and b exchanged, 5/4/1":              {hintedSlice(perZone(5, 4, 1)...), hintedSlice(perZone(4, 5, 1)...), explainedTopologyTie, false},
		"other numbers, 4/4/2 and 5/4/1":        {hintedSlice(perZone(4, 4, 2)...), hintedSlice(perZone(5, 4, 1)...), explainedTopologyHistory, false},
		"theirs below a minimum, 5/4/1, 5/5/0":  {hintedSlice(perZone(5, 4, 1)...), hintedSlice(perZone(5, 5, 0)...), explainedTopologyHistory, false},
		"ours below a minimum, 5/5/0 and 5/4/1": {hintedSlice(perZone(5, 5, 0)...), hintedSlice(perZone(5, 4, 1)...), explainedTopologyBelowMinimum, false},
		"ours below a minimum as theirs, 5/5/0": {hintedSlice(perZone(5, 5, 0)...), reversed(perZone(5, 5, 0)), explainedTopologyBelowMinimum, false},
		"ours below a minimum, zone minimums":   {hintedSlice(perZone(5, 5, 0)...), hintedSlice(perZone(5, 4, 1)...), "diff", true},
		"ours below, theirs too, zone minimums": {hintedSlice(perZone(5, 5, 0)...), reversed(perZone(5, 5, 0)), "diff", true},
		"other numbers, zone minimums":          {hintedSlice(perZone(4, 4, 2)...), hintedSlice(perZone(5, 4, 1)...), explainedTopologyHistory, true},
		"above a maximum on both, 5/4/0":        {hintedSlice(perZone(5, 4, 0)...), reversed(perZone(5, 4, 0)), "diff", false},
		"ours without hints":                    {hintedSlice(make([]string, 9)...), hintedSlice(perZone(4, 4, 1)...), "diff", false},
		"one ready endpoint without hint":       {hintedSlice(append(perZone(4, 4, 0), "")...), hintedSlice(perZone(4, 4, 1)...), "diff", false},
		"one endpoint hinted to 2 zones":        {twoZones, hintedSlice(perZone(4, 4, 1)...), "diff", false},
	} {
		explained, diff := compare(true, tc.zoneMinimums, tc.ours, tc.theirs)
		got := explained
		if diff != "" {
			got = "diff"
		}
		if got != tc.want {
			t.Errorf("%s: %q (%s), want %q", name, got, diff, tc.want)
		}
	}
}

// TestStepKind: a step's kind leaves out the pod and the node it names.
func TestStepKind(t *testing.T) {
	for what, want := range map[string]string{
		"create pod p12 app=a on diff-worker-3": "create pod app=a",
		"pod p3 ready=true":                     "pod ready=true",
		"delete pod p107 (terminating)":         "delete pod (terminating)",
		"service plain: label tier=front":       "service plain: label tier=front",
	} {
		if got := stepKind(what); got != want {
			t.Errorf("stepKind(%q) = %q, want %q", what, got, want)
		}
	}
}

// TestHintsChange: an update is described by its slice, its ready
// endpoints and their hints per zone before and after.
func TestHintsChange(t *testing.T) {
	ep := func(ready bool, zones ...string) discoveryv1.Endpoint {
		e := discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}
		if len(zones) > 0 {
			e.Hints = &discoveryv1.EndpointHints{}
			for _, z := range zones {
				e.Hints.ForZones = append(e.Hints.ForZones, discoveryv1.ForZone{Name: z})
			}
		}
		return e
	}
	old := &discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{ep(true), ep(true), ep(false)}}
	cur := &discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{ep(true, "b"), ep(true, "a"), ep(false, "c")}}
	cur.Name = "plain-x7k2p"
	if got, want := hintsChange(old, cur), "plain-x7k2p (2 ready): none -> a:1 b:1"; got != want {
		t.Errorf("hintsChange: %q, want %q", got, want)
	}
}

// TestServiceHints: one controller's slices of one Service, each by its
// ready endpoints and their hints per zone, node hints named.
func TestServiceHints(t *testing.T) {
	slice := func(svc, managedBy string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps}
		s.Labels = map[string]string{discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: managedBy}
		return s
	}
	hinted := func(zone string, nodes bool) discoveryv1.Endpoint {
		e := discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			Hints: &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}}}
		if nodes {
			e.Hints.ForNodes = []discoveryv1.ForNode{{Name: "n1"}}
		}
		return e
	}
	objs := []any{
		slice("plain", ours, hinted("b", false), hinted("a", false)),
		slice("plain", ours, discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}}),
		slice("plain", kcm, hinted("a", true)),
		slice("other", ours, hinted("c", false)),
	}
	if got, want := serviceHints(objs, "plain", ours), "[IPv4 0 ready: none | IPv4 2 ready: a:1 b:1]"; got != want {
		t.Errorf("ours: %q, want %q", got, want)
	}
	if got, want := serviceHints(objs, "plain", kcm), "[IPv4 1 ready: a:1 +nodes]"; got != want {
		t.Errorf("kube-controller-manager's: %q, want %q", got, want)
	}
}

// TestEndpointChanges: an update's endpoints added, removed and changed,
// by first address.
func TestEndpointChanges(t *testing.T) {
	ep := func(address string, ready bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{address}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(ready)}}
	}
	hostnamed := ep("10.0.0.2", true)
	hostnamed.Hostname = ptr.To("p2")
	old := &discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{ep("10.0.0.1", true), ep("10.0.0.2", true), ep("10.0.0.3", true)}}
	cur := &discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{ep("10.0.0.1", false), hostnamed, ep("10.0.0.4", true)}}
	if got, want := endpointChanges(old, cur), " [10.0.0.1 ready:false serving:false terminating:false 10.0.0.2 changed +10.0.0.4 -10.0.0.3]"; got != want {
		t.Errorf("endpointChanges: %q, want %q", got, want)
	}
	if got := endpointChanges(old, old); got != "" {
		t.Errorf("endpointChanges of no change: %q, want \"\"", got)
	}
}
