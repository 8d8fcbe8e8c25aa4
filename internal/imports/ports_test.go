package imports

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// withPorts gives an export of the harness the Service ports ports (each
// "name proto/port", targeting the same number) and its endpoints the
// matching slice ports.
func withPorts(es *clusterset.ExportedService, ports ...string) *clusterset.ExportedService {
	es.Spec.Ports = nil
	var eps []discoveryv1.EndpointPort
	for _, p := range ports {
		var name, proto string
		var port int32
		if _, err := fmt.Sscanf(strings.Replace(p, "/", " ", 1), "%s %s %d", &name, &proto, &port); err != nil {
			panic(p)
		}
		protocol := corev1.Protocol(strings.ToUpper(proto))
		es.Spec.Ports = append(es.Spec.Ports, mcsv1beta1.ServicePort{Name: name, Protocol: protocol, Port: port})
		eps = append(eps, discoveryv1.EndpointPort{Name: ptr.To(name), Protocol: ptr.To(protocol), Port: ptr.To(port)})
	}
	es.Endpoints[0].Ports = eps
	return es
}

// portsBySource returns, per source cluster, the port names of its
// imported slices and how many endpoints carry each.
func (h *harness) portsBySource() map[string]map[string]int {
	h.t.Helper()
	var list discoveryv1.EndpointSliceList
	if err := h.client.List(h.t.Context(), &list, client.InNamespace("ns")); err != nil {
		h.t.Fatal(err)
	}
	out := map[string]map[string]int{}
	for _, s := range list.Items {
		source := s.Labels[mcsv1beta1.LabelSourceCluster]
		if out[source] == nil {
			out[source] = map[string]int{}
		}
		for _, p := range s.Ports {
			out[source][ptr.Deref(p.Name, "")] += len(s.Endpoints)
		}
	}
	return out
}

// TestPortsImportedOnlyWhereExposed: KEP-1645, "Service Port": "network
// traffic to a conflicting port should only be directed to endpoints from
// constituent services that actually expose the port." east (oldest)
// defines "tcp" as 42, west as 4242 and adds "extra": west's endpoints are
// imported under "extra" only, east's under "tcp" only.
func TestPortsImportedOnlyWhereExposed(t *testing.T) {
	h := newHarness(t, Options{})
	h.put(withPorts(h.export("east", 0, "10.1.0.1"), "tcp tcp/42"),
		withPorts(h.export("west", 1, "10.2.0.1", "10.2.0.2"), "tcp tcp/4242", "extra tcp/9"))
	h.reconcile()

	si := h.serviceImport()
	var names []string
	for _, p := range si.Spec.Ports {
		names = append(names, fmt.Sprintf("%s %d", p.Name, p.Port))
	}
	if !slices.Equal(names, []string{"tcp 42", "extra 9"}) {
		t.Errorf("ServiceImport ports %v, want the union with east's tcp", names)
	}
	got := h.portsBySource()
	want := map[string]map[string]int{"east": {"tcp": 1}, "west": {"extra": 2}}
	if !maps.EqualFunc(got, want, maps.Equal) {
		t.Errorf("imported ports by source %v, want %v", got, want)
	}

	// West defines "tcp" as east does: its endpoints serve both ports.
	h.put(withPorts(h.export("west", 1, "10.2.0.1", "10.2.0.2"), "tcp tcp/42", "extra tcp/9"))
	h.reconcile()
	if got, want := h.portsBySource(), (map[string]map[string]int{"east": {"tcp": 1}, "west": {"tcp": 2, "extra": 2}}); !maps.EqualFunc(got, want, maps.Equal) {
		t.Errorf("after west matched: %v, want %v", got, want)
	}
}

// TestClusterWithNoExposedPortContributesNothing: west defines the one port
// as UDP: it contributes no endpoints (an EndpointSlice without ports would
// route nothing, and with them it would route the wrong protocol).
func TestClusterWithNoExposedPortContributesNothing(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Options{Metrics: m})
	h.put(withPorts(h.export("east", 0, "10.1.0.1"), "dns tcp/53"),
		withPorts(h.export("west", 1, "10.2.0.1"), "dns udp/53"))
	h.reconcile()
	if got := h.slicesBySource(); len(got) != 1 || len(got["east"]) != 1 {
		t.Errorf("slices %v, want east's only", got)
	}
	if got := testutil.ToFloat64(m.imported.vec.WithLabelValues("west", "north")); got != 0 {
		t.Errorf("imported endpoints gauge for west %v, want 0", got)
	}
}
