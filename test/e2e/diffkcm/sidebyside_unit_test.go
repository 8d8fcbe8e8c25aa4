package diffkcm

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
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

// TestValidHints: 9 ready endpoints over the testbed's zones (CPU 4:4:1)
// allow 4/4/1 and no zone above its maximum, every ready endpoint hinted
// to exactly one zone, or no hints at all.
func TestValidHints(t *testing.T) {
	slice := func(perZone map[string]int, mutate func(*discoveryv1.Endpoint)) []discoveryv1.EndpointSlice {
		s := discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4}
		for _, z := range []string{"diff-a", "diff-b", "diff-c"} {
			for range perZone[z] {
				ep := discoveryv1.Endpoint{
					Addresses:  []string{fmt.Sprintf("10.0.0.%d", len(s.Endpoints)+1)},
					Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
					Hints:      &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: z}}},
				}
				if mutate != nil {
					mutate(&ep)
				}
				s.Endpoints = append(s.Endpoints, ep)
			}
		}
		return []discoveryv1.EndpointSlice{s}
	}
	balanced := map[string]int{"diff-a": 4, "diff-b": 4, "diff-c": 1}
	first := func(f func(*discoveryv1.Endpoint)) func(*discoveryv1.Endpoint) {
		done := false
		return func(ep *discoveryv1.Endpoint) {
			if !done {
				f(ep)
				done = true
			}
		}
	}
	for name, tc := range map[string]struct {
		slices []discoveryv1.EndpointSlice
		want   bool
	}{
		"4/4/1":                {slice(balanced, nil), true},
		"4/4/0 (c short)":      {slice(map[string]int{"diff-a": 5, "diff-b": 4}, nil), false},
		"no hints":             {slice(balanced, func(ep *discoveryv1.Endpoint) { ep.Hints = nil }), true},
		"one ready not hinted": {slice(balanced, first(func(ep *discoveryv1.Endpoint) { ep.Hints = nil })), false},
		"one hinted to 2 zones": {slice(balanced, first(func(ep *discoveryv1.Endpoint) {
			ep.Hints.ForZones = append(ep.Hints.ForZones, discoveryv1.ForZone{Name: "diff-b"})
		})), false},
		"not ready unhinted": {slice(balanced, first(func(ep *discoveryv1.Endpoint) { ep.Hints, ep.Conditions.Ready = nil, ptr.To(false) })), true},
	} {
		if got := validHints(tc.slices); got != tc.want {
			t.Errorf("%s: validHints %v, want %v", name, got, tc.want)
		}
	}
}
