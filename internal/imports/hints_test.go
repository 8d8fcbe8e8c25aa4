package imports

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// zoned gives the harness export's endpoints zones, node names and the
// source's own hints (which must never reach a consumer), and its Service
// trafficDistribution td.
func zoned(es *clusterset.ExportedService, td *string, zones ...string) *clusterset.ExportedService {
	es.Spec.TrafficDistribution = td
	eps := slices.Clone(es.Endpoints[0].Endpoints)
	for i := range eps {
		eps[i].Zone = ptr.To(zones[i])
		eps[i].NodeName = ptr.To("worker")
		eps[i].Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "source-zone"}}, ForNodes: []discoveryv1.ForNode{{Name: "worker"}}}
	}
	es.Endpoints[0].Endpoints = eps
	return es
}

// importedHints returns, by address, the hints of the imported endpoints
// as "zones=...;nodes=...", "" for none.
func (h *harness) importedHints() map[string]string {
	h.t.Helper()
	var list discoveryv1.EndpointSliceList
	if err := h.client.List(h.t.Context(), &list, client.InNamespace("ns")); err != nil {
		h.t.Fatal(err)
	}
	out := map[string]string{}
	for _, s := range list.Items {
		for _, ep := range s.Endpoints {
			if ep.Hints == nil {
				out[ep.Addresses[0]] = ""
				continue
			}
			out[ep.Addresses[0]] = fmt.Sprintf("zones=%v;nodes=%v", ep.Hints.ForZones, ep.Hints.ForNodes)
		}
	}
	return out
}

// TestImportHints: the import's hints come from the ServiceImport's
// trafficDistribution over every cluster's endpoints, never from the
// sources' own hints; PreferSameNode gives zone hints only (node names do
// not cross clusters); a not-ready endpoint gets none.
func TestImportHints(t *testing.T) {
	zone := func(z string) string { return fmt.Sprintf("zones=[{%s}];nodes=[]", z) }
	for _, tc := range []struct {
		td   *string
		want map[string]string
	}{
		{nil, map[string]string{"10.1.0.1": "", "10.1.0.2": "", "10.2.0.1": ""}},
		{ptr.To("Unknown"), map[string]string{"10.1.0.1": "", "10.1.0.2": "", "10.2.0.1": ""}},
		{ptr.To(corev1.ServiceTrafficDistributionPreferClose), map[string]string{"10.1.0.1": zone("z1"), "10.1.0.2": zone("z2"), "10.2.0.1": zone("z1")}},
		{ptr.To(corev1.ServiceTrafficDistributionPreferSameZone), map[string]string{"10.1.0.1": zone("z1"), "10.1.0.2": zone("z2"), "10.2.0.1": zone("z1")}},
		{ptr.To(corev1.ServiceTrafficDistributionPreferSameNode), map[string]string{"10.1.0.1": zone("z1"), "10.1.0.2": zone("z2"), "10.2.0.1": zone("z1")}},
	} {
		t.Run(ptr.Deref(tc.td, "unset"), func(t *testing.T) {
			h := newHarness(t, Options{})
			h.put(zoned(h.export("east", 0, "10.1.0.1", "10.1.0.2"), tc.td, "z1", "z2"),
				zoned(h.export("west", 1, "10.2.0.1"), tc.td, "z1"))
			h.reconcile()
			if td := h.serviceImport().Spec.TrafficDistribution; ptr.Deref(td, "") != ptr.Deref(tc.td, "") {
				t.Errorf("ServiceImport trafficDistribution %v", ptr.Deref(td, "<unset>"))
			}
			got := h.importedHints()
			for addr, want := range tc.want {
				if got[addr] != want {
					t.Errorf("%s: hints %q, want %q", addr, got[addr], want)
				}
			}
		})
	}

	// An endpoint that is not ready is hinted for no zone, so that
	// kube-proxy falls back to every cluster once a zone has no ready one.
	h := newHarness(t, Options{})
	es := zoned(h.export("east", 0, "10.1.0.1", "10.1.0.2"), ptr.To(corev1.ServiceTrafficDistributionPreferClose), "z1", "z2")
	es.Endpoints[0].Endpoints[1].Conditions.Ready = ptr.To(false)
	h.put(es)
	h.reconcile()
	if got := h.importedHints(); got["10.1.0.1"] != zone("z1") || got["10.1.0.2"] != "" {
		t.Errorf("hints %v, want z1 for the ready endpoint and none for the other", got)
	}
}

// TestDerivedServiceNeverNodeLocal: internalTrafficPolicy Local is merged
// onto the ServiceImport but never applied to the derived Service, so a
// consumer's kube-proxy never takes an imported endpoint for node-local
// because its nodeName from another cluster equals the consumer node's.
func TestDerivedServiceNeverNodeLocal(t *testing.T) {
	h := newHarness(t, Options{})
	es := zoned(h.export("east", 0, "10.1.0.1"), nil, "z1")
	es.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
	h.put(es)
	h.reconcile()
	if itp := h.serviceImport().Spec.InternalTrafficPolicy; ptr.Deref(itp, "") != corev1.ServiceInternalTrafficPolicyLocal {
		t.Errorf("ServiceImport internalTrafficPolicy %v, want the export's Local", itp)
	}
	svc := &corev1.Service{}
	if err := h.client.Get(t.Context(), derivedKey(), svc); err != nil {
		t.Fatal(err)
	}
	if itp := ptr.Deref(svc.Spec.InternalTrafficPolicy, corev1.ServiceInternalTrafficPolicyCluster); itp != corev1.ServiceInternalTrafficPolicyCluster {
		t.Errorf("derived Service internalTrafficPolicy %s, want Cluster", itp)
	}
}
