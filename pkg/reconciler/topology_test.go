package reconciler

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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

func hintedPerZone(rule func(*discoveryv1.Endpoint) *discoveryv1.EndpointHints, groups []EndpointGroup) map[string]int {
	got := map[string]int{}
	for _, ep := range groups[0].Endpoints {
		if h := rule(&ep); h != nil {
			got[h.ForZones[0].Name]++
		}
	}
	return got
}

// TestTopologyHintsProportionalToCPU: zones a and b have 4 times zone c's
// CPU; of 3 endpoints in each, c gives one hint to a and one to b.
func TestTopologyHintsProportionalToCPU(t *testing.T) {
	cpu := map[string]int64{"a": 32000, "b": 32000, "c": 8000}
	groups := zonedEndpoints(map[string]int{"a": 3, "b": 3, "c": 3})
	got := hintedPerZone(TopologyHints(cpu, groups), groups)
	if got["a"] != 4 || got["b"] != 4 || got["c"] != 1 {
		t.Errorf("hints per zone %v, want a:4 b:4 c:1", got)
	}
	// Balanced already: everyone keeps their own zone.
	groups = zonedEndpoints(map[string]int{"a": 4, "b": 4, "c": 1})
	rule := TopologyHints(cpu, groups)
	for _, ep := range groups[0].Endpoints {
		if h := rule(&ep); h == nil || h.ForZones[0].Name != *ep.Zone {
			t.Errorf("endpoint %s in %s hinted %+v, want its own zone", ep.Addresses[0], *ep.Zone, h)
		}
	}
}

// TestTopologyHintsGivenUp: no hints with fewer endpoints than zones, with
// a zone's minimum out of reach, with an endpoint without zone, or without
// node information.
func TestTopologyHintsGivenUp(t *testing.T) {
	cpu := map[string]int64{"a": 32000, "b": 32000, "c": 8000}
	noZone := zonedEndpoints(map[string]int{"a": 2, "b": 2, "c": 1})
	noZone[0].Endpoints[0].Zone = nil
	for name, tc := range map[string]struct {
		cpu    map[string]int64
		groups []EndpointGroup
	}{
		"fewer endpoints than zones": {cpu, zonedEndpoints(map[string]int{"a": 2})},
		"minimum out of reach":       {map[string]int64{"a": 1000, "b": 1000, "c": 1000, "d": 1000}, zonedEndpoints(map[string]int{"a": 5})},
		"endpoint without zone":      {cpu, noZone},
		"no node information":        {nil, zonedEndpoints(map[string]int{"a": 3, "b": 3})},
	} {
		if got := hintedPerZone(TopologyHints(tc.cpu, tc.groups), tc.groups); len(got) != 0 {
			t.Errorf("%s: hints %v, want none", name, got)
		}
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
