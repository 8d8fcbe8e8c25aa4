package diffkcm

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
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
