package reconciler

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/reconcilertest"
)

func zonedEndpoints(perZone map[string]int) []EndpointGroup {
	g := EndpointGroup{AddressType: discoveryv1.AddressTypeIPv4}
	i := 0
	for _, zone := range slices.Sorted(maps.Keys(perZone)) {
		for range perZone[zone] {
			i++
			g.Endpoints = append(g.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{fmt.Sprintf("10.0.0.%d", i)},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
				Zone:       ptr.To(zone),
			})
		}
	}
	return []EndpointGroup{g}
}

// topologyInput is the Input of svc with desired endpoints and topology
// hints from cpu, over the slices the fake API server holds.
func topologyInput(t *testing.T, client *reconcilertest.Clientset, cpu map[string]int64, desired []EndpointGroup) Input {
	t.Helper()
	return Input{
		Owner: service(), OwnerGVK: serviceGVK,
		Desired: desired, AddressTypes: []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4},
		Existing: listSlices(t, client, "ns"),
		Labeler:  ServiceLabels{Service: service()},
		Topology: &Topology{ZoneCPU: cpu},
	}
}

// hintedPerZone counts the hints per zone of the slices the fake API
// server holds.
func hintedPerZone(t *testing.T, client *reconcilertest.Clientset) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, s := range listSlices(t, client, "ns") {
		for _, ep := range s.Endpoints {
			if ep.Hints != nil {
				got[ep.Hints.ForZones[0].Name]++
			}
		}
	}
	return got
}

func reconcileTopology(t *testing.T, r *Reconciler, client *reconcilertest.Clientset, cpu map[string]int64, desired []EndpointGroup) {
	t.Helper()
	if err := r.Reconcile(context.Background(), topologyInput(t, client, cpu, desired)); err != nil {
		t.Fatal(err)
	}
	plan, err := r.Plan(topologyInput(t, client, cpu, desired))
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Empty() {
		t.Errorf("a second plan over the same endpoints is not empty: %s", plan)
	}
}

var cpu32328 = map[string]int64{"a": 32000, "b": 32000, "c": 8000}

// TestTopologyHintsProportionalToCPU: zones a and b have 4 times zone c's
// CPU; of 3 endpoints in each, c gives one hint to a and one to b. Already
// balanced, every endpoint keeps its own zone.
func TestTopologyHintsProportionalToCPU(t *testing.T) {
	client := reconcilertest.NewClientset()
	r := newReconciler(t, client, WithTrafficDistribution(true))
	reconcileTopology(t, r, client, cpu32328, zonedEndpoints(map[string]int{"a": 3, "b": 3, "c": 3}))
	if got := hintedPerZone(t, client); got["a"] != 4 || got["b"] != 4 || got["c"] != 1 {
		t.Errorf("hints per zone %v, want a:4 b:4 c:1", got)
	}

	client = reconcilertest.NewClientset()
	r = newReconciler(t, client, WithTrafficDistribution(true))
	reconcileTopology(t, r, client, cpu32328, zonedEndpoints(map[string]int{"a": 4, "b": 4, "c": 1}))
	for _, ep := range listSlices(t, client, "ns")[0].Endpoints {
		if ep.Hints == nil || ep.Hints.ForZones[0].Name != *ep.Zone {
			t.Errorf("endpoint %s in %s hinted %+v, want its own zone", ep.Addresses[0], *ep.Zone, ep.Hints)
		}
	}
}

// TestTopologyHintsGivenUp: no hints with fewer endpoints than zones, with
// a zone's minimum out of reach, with an endpoint without zone, or without
// node information.
func TestTopologyHintsGivenUp(t *testing.T) {
	noZone := zonedEndpoints(map[string]int{"a": 2, "b": 2, "c": 1})
	noZone[0].Endpoints[0].Zone = nil
	for name, tc := range map[string]struct {
		cpu    map[string]int64
		groups []EndpointGroup
	}{
		"fewer endpoints than zones": {cpu32328, zonedEndpoints(map[string]int{"a": 2})},
		"minimum out of reach":       {map[string]int64{"a": 1000, "b": 1000, "c": 1000, "d": 1000}, zonedEndpoints(map[string]int{"a": 5})},
		"endpoint without zone":      {cpu32328, noZone},
		"no node information":        {nil, zonedEndpoints(map[string]int{"a": 3, "b": 3})},
	} {
		client := reconcilertest.NewClientset()
		r := newReconciler(t, client, WithTrafficDistribution(true))
		reconcileTopology(t, r, client, tc.cpu, tc.groups)
		if got := hintedPerZone(t, client); len(got) != 0 {
			t.Errorf("%s: hints %v, want none", name, got)
		}
	}
}

// TestTopologyHintsOfUnchangedSlicesKept: as kube-controller-manager's
// topology cache, a slice the plan does not otherwise write keeps valid
// hints; one whose hints would pass a zone's maximum is rewritten; hints
// go when topology can no longer be used, in every slice that has some.
func TestTopologyHintsOfUnchangedSlicesKept(t *testing.T) {
	client := reconcilertest.NewClientset()
	r := newReconciler(t, client, WithTrafficDistribution(true), WithMaxEndpointsPerSlice(3))
	// 9 endpoints in three slices: a a a | b b b | c c c (address order).
	nine := zonedEndpoints(map[string]int{"a": 3, "b": 3, "c": 3})
	reconcileTopology(t, r, client, cpu32328, nine)
	before := listSlices(t, client, "ns")

	// A tenth endpoint, in zone c: 10 ready, a and b desired 4.44 (maximum
	// 5), c 1.11 (minimum 1, maximum 2). The three slices' hints (4/4/1)
	// stay valid, so only the new endpoint's slice is written.
	ten := zonedEndpoints(map[string]int{"a": 3, "b": 3, "c": 4})
	client.ClearActions()
	reconcileTopology(t, r, client, cpu32328, ten)
	if w := writes(client); w["update"] != 0 {
		t.Errorf("writes %v: a slice was updated for hints that are still valid", w)
	}
	after := map[string]*discoveryv1.EndpointSlice{}
	for _, s := range listSlices(t, client, "ns") {
		after[s.Name] = s
	}
	for _, s := range before {
		if !equality.Semantic.DeepEqual(after[s.Name].Endpoints, s.Endpoints) {
			t.Errorf("slice %s changed: %+v, was %+v", s.Name, after[s.Name].Endpoints, s.Endpoints)
		}
	}
	if got := hintedPerZone(t, client); got["a"]+got["b"]+got["c"] != 10 {
		t.Errorf("hints per zone %v, want all 10 ready endpoints hinted", got)
	}

	// Zone c's CPU now 4 times a's and b's: of 10 endpoints, a and b may
	// have 2 hints at most (desired 1.67, minimum 2), c 6 (desired 6.67).
	// The slices of a's and b's endpoints (hinted to their own zones) pass
	// that and are rewritten; c's slice (hinted a, b, c since the first
	// reconcile) is valid and kept; the rewritten ones give to c.
	client.ClearActions()
	reconcileTopology(t, r, client, map[string]int64{"a": 8000, "b": 8000, "c": 32000}, ten)
	if got := hintedPerZone(t, client); got["a"] != 2 || got["b"] != 2 || got["c"] != 6 {
		t.Errorf("hints per zone %v, want a:2 b:2 c:6", got)
	}
	if w := writes(client); w["update"] != 2 {
		t.Errorf("writes %v, want the 2 slices whose hints passed a maximum updated", w)
	}

	// No node information: every slice with hints loses them.
	client.ClearActions()
	reconcileTopology(t, r, client, nil, ten)
	if got := hintedPerZone(t, client); len(got) != 0 {
		t.Errorf("hints %v left without node information", got)
	}
	if w := writes(client); w["update"] != len(listSlices(t, client, "ns")) {
		t.Errorf("writes %v, want every slice updated once", w)
	}
}

// TestZoneCPU: ready worker nodes count; a counted node without zone means
// no information; one zone is not enough.
func TestZoneCPU(t *testing.T) {
	node := func(name, zone, cpu string, ready bool, labels ...string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
		if zone != "" {
			n.Labels[corev1.LabelTopologyZone] = zone
		}
		for _, l := range labels {
			n.Labels[l] = ""
		}
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
		return n
	}
	got := ZoneCPU([]*corev1.Node{
		node("1", "a", "4", true), node("2", "a", "500m", true), node("3", "b", "8", true),
		node("4", "b", "8", false), node("5", "", "8", true, "node-role.kubernetes.io/control-plane"),
	})
	if len(got) != 2 || got["a"] != 4500 || got["b"] != 8000 {
		t.Errorf("ZoneCPU %v, want a:4500 b:8000", got)
	}
	if got := ZoneCPU([]*corev1.Node{node("1", "a", "4", true), node("2", "", "4", true)}); got != nil {
		t.Errorf("a node without zone: %v, want nil", got)
	}
	if got := ZoneCPU([]*corev1.Node{node("1", "a", "4", true), node("2", "a", "4", true)}); got != nil {
		t.Errorf("one zone: %v, want nil", got)
	}
	if !TopologyModeAuto(map[string]string{corev1.AnnotationTopologyMode: "Auto"}) ||
		TopologyModeAuto(map[string]string{corev1.AnnotationTopologyMode: "Auto", corev1.DeprecatedAnnotationTopologyAwareHints: "disabled"}) {
		t.Error("TopologyModeAuto: the deprecated annotation must win when both are set")
	}
}

// TestTopologyHintsZoneMinimums: kept hints that leave a zone below its
// minimum. 8 ready endpoints over CPU 4:4:1: a and b 3 to 4 hints, c 1 to
// 2. Slice s1 holds a, a, a and c's one endpoint, all hinted a (valid: a's
// maximum is 4); s2 holds four of b hinted b; s3 a fifth of b, which goes.
// By default the library keeps s1 and s2 (4/4/0), as upstream does
// (getHintsByZone checks maximums only); WithZoneMinimums rewrites s1 and
// hints c's endpoint to c.
func TestTopologyHintsZoneMinimums(t *testing.T) {
	eps := zonedEndpoints(map[string]int{"a": 3, "b": 5, "c": 1})[0].Endpoints // addresses 1-3 a, 4-8 b, 9 c
	s1 := existingSlice("s1", service(), nil, []discoveryv1.Endpoint{hinted(eps[0], "a"), hinted(eps[1], "a"), hinted(eps[2], "a"), hinted(eps[8], "a")})
	s2 := existingSlice("s2", service(), nil, []discoveryv1.Endpoint{hinted(eps[3], "b"), hinted(eps[4], "b"), hinted(eps[5], "b"), hinted(eps[6], "b")})
	s3 := existingSlice("s3", service(), nil, []discoveryv1.Endpoint{hinted(eps[7], "b")})
	desired := []EndpointGroup{{AddressType: discoveryv1.AddressTypeIPv4, Endpoints: slices.Concat(eps[:7], eps[8:])}}
	for _, tc := range []struct {
		zoneMinimums bool
		updated      []string
		perZone      map[string]int
	}{
		{false, nil, map[string]int{"a": 4, "b": 4}},
		{true, []string{"s1"}, map[string]int{"a": 3, "b": 4, "c": 1}},
	} {
		t.Run(fmt.Sprintf("WithZoneMinimums(%v)", tc.zoneMinimums), func(t *testing.T) {
			r := newReconciler(t, reconcilertest.NewClientset(), WithTrafficDistribution(true), WithMaxEndpointsPerSlice(4), WithZoneMinimums(tc.zoneMinimums))
			plan, err := r.Plan(Input{
				Owner: service(), OwnerGVK: serviceGVK,
				Desired: desired, AddressTypes: []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4},
				Existing: []*discoveryv1.EndpointSlice{s1, s2, s3},
				Labeler:  ServiceLabels{Service: service()},
				Topology: &Topology{ZoneCPU: cpu32328},
			})
			if err != nil {
				t.Fatal(err)
			}
			if names := sliceNames(plan.Update); !slices.Equal(names, tc.updated) || len(plan.Delete) != 1 || plan.Delete[0].Name != "s3" || len(plan.Create) != 0 {
				t.Fatalf("plan %s (updates %v), want updates %v and s3 deleted", plan, names, tc.updated)
			}
			written := map[string]*discoveryv1.EndpointSlice{}
			for _, s := range plan.Update {
				written[s.Name] = s
			}
			got := map[string]int{}
			for _, s := range []*discoveryv1.EndpointSlice{s1, s2} {
				if w, ok := written[s.Name]; ok {
					s = w
				}
				for _, ep := range s.Endpoints {
					got[ep.Hints.ForZones[0].Name]++
				}
			}
			if !maps.Equal(got, tc.perZone) {
				t.Errorf("hints per zone %v, want %v", got, tc.perZone)
			}
		})
	}
}

// hinted returns ep hinted to zone.
func hinted(ep discoveryv1.Endpoint, zone string) discoveryv1.Endpoint {
	ep.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}}
	return ep
}

func sliceNames(s []*discoveryv1.EndpointSlice) []string {
	var out []string
	for _, x := range s {
		out = append(out, x.Name)
	}
	return out
}

// TestTopologyHintsMinimumRestoredWithFewestWrites: WithZoneMinimums, when
// kept hints leave a zone below its minimum, the kept slices are rewritten from the last, one
// at a time, until none is: here rewriting the last alone gives zone c its
// hint, and the first slice keeps the hint it had moved to zone b (a
// rewrite of every slice would have hinted it back to its own zone: two
// updates where one does).
func TestTopologyHintsMinimumRestoredWithFewestWrites(t *testing.T) {
	client := reconcilertest.NewClientset()
	r := newReconciler(t, client, WithTrafficDistribution(true), WithMaxEndpointsPerSlice(4), WithZoneMinimums(true))
	eps := zonedEndpoints(map[string]int{"a": 5, "b": 4, "c": 1})[0].Endpoints // addresses 1-5 a, 6-9 b, 10 c
	// 10 ready endpoints over CPU 32:32:8: minimums 4/4/1, maximums 5/5/2.
	// Kept: a 5, b 5, c 0, each slice valid on its own.
	s1 := existingSlice("s1", service(), nil, []discoveryv1.Endpoint{hinted(eps[0], "a"), hinted(eps[1], "a"), hinted(eps[2], "a"), hinted(eps[3], "b")})
	s2 := existingSlice("s2", service(), nil, []discoveryv1.Endpoint{hinted(eps[5], "b"), hinted(eps[6], "b"), hinted(eps[7], "b"), hinted(eps[8], "b")})
	s3 := existingSlice("s3", service(), nil, []discoveryv1.Endpoint{hinted(eps[4], "a"), hinted(eps[9], "a")})
	plan, err := r.Plan(Input{
		Owner: service(), OwnerGVK: serviceGVK,
		Desired: []EndpointGroup{{AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps}}, AddressTypes: []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4},
		Existing: []*discoveryv1.EndpointSlice{s1, s2, s3},
		Labeler:  ServiceLabels{Service: service()},
		Topology: &Topology{ZoneCPU: cpu32328},
	})
	if err != nil {
		t.Fatal(err)
	}
	if names := sliceNames(plan.Update); !slices.Equal(names, []string{"s3"}) || len(plan.Create)+len(plan.Delete) != 0 {
		t.Fatalf("plan %s (updates %v), want s3 updated alone", plan, names)
	}
	got := map[string]int{}
	for _, s := range []*discoveryv1.EndpointSlice{s1, s2, plan.Update[0]} {
		for _, ep := range s.Endpoints {
			got[ep.Hints.ForZones[0].Name]++
		}
	}
	if want := map[string]int{"a": 4, "b": 5, "c": 1}; !maps.Equal(got, want) {
		t.Errorf("hints per zone %v, want %v", got, want)
	}
}

// TestTopologyHintsKeepMostSlices: where the unchanged slices' hints cannot
// all be kept, the largest set that fits is kept, not the first slices
// that fit in order. 9 ready endpoints over CPU 4:4:1 allow exactly a 4,
// b 4, c 1. s1 holds three hinted a; s2 and s3 two each, hinted a; s4 two
// hinted b. In order, s1 fits and s2 and s3 then pass a's maximum: two
// rewrites. Keeping s2, s3 and s4 rewrites s1 alone, and its three
// endpoints are hinted to b, b and c.
func TestTopologyHintsKeepMostSlices(t *testing.T) {
	r := newReconciler(t, reconcilertest.NewClientset(), WithTrafficDistribution(true), WithMaxEndpointsPerSlice(4))
	eps := zonedEndpoints(map[string]int{"a": 4, "b": 4, "c": 1})[0].Endpoints // addresses 1-4 a, 5-8 b, 9 c
	s1 := existingSlice("s1", service(), nil, []discoveryv1.Endpoint{hinted(eps[0], "a"), hinted(eps[1], "a"), hinted(eps[2], "a")})
	s2 := existingSlice("s2", service(), nil, []discoveryv1.Endpoint{hinted(eps[3], "a"), hinted(eps[8], "a")})
	s3 := existingSlice("s3", service(), nil, []discoveryv1.Endpoint{hinted(eps[4], "a"), hinted(eps[5], "a")})
	s4 := existingSlice("s4", service(), nil, []discoveryv1.Endpoint{hinted(eps[6], "b"), hinted(eps[7], "b")})
	plan, err := r.Plan(Input{
		Owner: service(), OwnerGVK: serviceGVK,
		Desired: []EndpointGroup{{AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps}}, AddressTypes: []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4},
		Existing: []*discoveryv1.EndpointSlice{s1, s2, s3, s4},
		Labeler:  ServiceLabels{Service: service()},
		Topology: &Topology{ZoneCPU: cpu32328},
	})
	if err != nil {
		t.Fatal(err)
	}
	if names := sliceNames(plan.Update); !slices.Equal(names, []string{"s1"}) || len(plan.Create)+len(plan.Delete) != 0 {
		t.Fatalf("plan %s (updates %v), want s1 updated alone", plan, names)
	}
	got := map[string]int{}
	for _, s := range []*discoveryv1.EndpointSlice{plan.Update[0], s2, s3, s4} {
		for _, ep := range s.Endpoints {
			got[ep.Hints.ForZones[0].Name]++
		}
	}
	if want := map[string]int{"a": 4, "b": 4, "c": 1}; !maps.Equal(got, want) {
		t.Errorf("hints per zone %v, want %v", got, want)
	}
}
