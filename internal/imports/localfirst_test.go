package imports

import (
	"context"
	"fmt"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// fixedZones is a zoneSource that knows zones, or nothing when nil.
type fixedZones []string

func (z fixedZones) Zones(context.Context) ([]string, bool) { return z, z != nil }

// localFirst returns the harness export of cluster, asking for the local
// cluster first.
func localFirst(es *clusterset.ExportedService) *clusterset.ExportedService {
	es.Spec.LocalClusterFirst = true
	return es
}

func zonesHint(zones ...string) string {
	var fz []discoveryv1.ForZone
	for _, z := range zones {
		fz = append(fz, discoveryv1.ForZone{Name: z})
	}
	return fmt.Sprintf("zones=%v;nodes=[]", fz)
}

// TestLocalClusterFirst: while north (the consumer) has a ready endpoint
// of its own, its own ready endpoints are hinted for every zone of its
// nodes and the others' for a zone no node has; once it has none, the
// import's hints are trafficDistribution's again (none here).
func TestLocalClusterFirst(t *testing.T) {
	h := newHarness(t, Options{})
	h.c.zones = fixedZones{"", "z1", "z2"}
	north := localFirst(h.export("north", 2, "10.3.0.1", "10.3.0.2"))
	north.Endpoints[0].Endpoints[1].Conditions.Ready = ptr.To(false)
	h.put(localFirst(h.export("east", 0, "10.1.0.1")), localFirst(h.export("west", 1, "10.2.0.1")), north)
	h.reconcile()
	if got := h.serviceImport().Annotations[clusterset.LocalClusterFirstAnnotation]; got != "true" {
		t.Errorf("ServiceImport annotation %s=%q, want true", clusterset.LocalClusterFirstAnnotation, got)
	}
	want := map[string]string{
		"10.3.0.1": zonesHint("", "z1", "z2"), "10.3.0.2": "",
		"10.1.0.1": zonesHint(otherClusterZone), "10.2.0.1": zonesHint(otherClusterZone),
	}
	if got := h.importedHints(); !maps.Equal(got, want) {
		t.Errorf("hints %v, want %v", got, want)
	}

	// north's last ready endpoint goes: every cluster, in one reconcile.
	north = localFirst(h.export("north", 2, "10.3.0.1", "10.3.0.2"))
	for i := range north.Endpoints[0].Endpoints {
		north.Endpoints[0].Endpoints[i].Conditions.Ready = ptr.To(false)
	}
	h.put(north)
	h.reconcile()
	want = map[string]string{"10.3.0.1": "", "10.3.0.2": "", "10.1.0.1": "", "10.2.0.1": ""}
	if got := h.importedHints(); !maps.Equal(got, want) {
		t.Errorf("with no ready local endpoint: hints %v, want none", got)
	}
}

// TestLocalClusterFirstDoesNotApply: the rule needs the opt-in, a ready
// local endpoint and known zones; otherwise trafficDistribution's hints
// apply across clusters. Beyond eight zones, the first eight are hinted
// (nodes of the others fall back to every cluster).
func TestLocalClusterFirstDoesNotApply(t *testing.T) {
	preferClose := ptr.To(corev1.ServiceTrafficDistributionPreferClose)
	for name, tc := range map[string]struct {
		zones    zoneSource
		optIn    bool
		northIPs []string
	}{
		"not asked":           {fixedZones{"z1"}, false, []string{"10.3.0.1"}},
		"no local endpoint":   {fixedZones{"z1"}, true, nil},
		"zones not known":     {fixedZones(nil), true, []string{"10.3.0.1"}},
		"no zone source":      {nil, true, []string{"10.3.0.1"}},
		"a consumer no nodes": {fixedZones{}, true, []string{"10.3.0.1"}},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.c.zones = tc.zones
			exports := []*clusterset.ExportedService{zoned(h.export("east", 0, "10.1.0.1"), preferClose, "z1")}
			if tc.northIPs != nil {
				exports = append(exports, zoned(h.export("north", 1, tc.northIPs...), preferClose, "z2"))
			}
			for _, es := range exports {
				es.Spec.LocalClusterFirst = tc.optIn
			}
			h.put(exports...)
			h.reconcile()
			for addr, hint := range h.importedHints() {
				if hint != zonesHint("z1") && hint != zonesHint("z2") {
					t.Errorf("%s: hints %q, want its own zone's (trafficDistribution)", addr, hint)
				}
			}
		})
	}

	h := newHarness(t, Options{})
	h.c.zones = fixedZones{"a", "b", "c", "d", "e", "f", "g", "h", "i"}
	h.put(localFirst(h.export("north", 0, "10.3.0.1")))
	h.reconcile()
	if got, want := h.importedHints()["10.3.0.1"], zonesHint("a", "b", "c", "d", "e", "f", "g", "h"); got != want {
		t.Errorf("nine zones: hints %q, want the first eight %q", got, want)
	}
}

// TestLocalClusterFirstConflict: exports that disagree raise
// LocalClusterFirstConflict and the oldest export's value wins.
func TestLocalClusterFirstConflict(t *testing.T) {
	h := newHarness(t, Options{})
	m := clusterset.Merge([]*clusterset.ExportedService{h.export("east", 0), localFirst(h.export("west", 1))})
	if m.Spec.LocalClusterFirst || m.Conflict == nil || m.Conflict.Reason() != string(clusterset.ReasonLocalClusterFirstConflict) {
		t.Fatalf("merged local-first %v, conflict %+v: want east's false and LocalClusterFirstConflict", m.Spec.LocalClusterFirst, m.Conflict)
	}
}

func node(name, zone string) *metav1.PartialObjectMetadata {
	n := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if zone != "-" {
		n.Labels = map[string]string{corev1.LabelTopologyZone: zone}
	}
	return n
}

// TestNodeZones: the zones follow the nodes' labels; changed is called
// only when a zone gains its first node or loses its last; a node without
// the label is in zone "".
func TestNodeZones(t *testing.T) {
	calls := 0
	z := newNodeZones(nil, func() { calls++ })
	z.started, z.synced = true, func() bool { return true }
	zones := func() []string { got, _ := z.Zones(t.Context()); return got }
	step := func(what string, do func(), wantZones []string, wantCalls int) {
		t.Helper()
		do()
		if got := zones(); fmt.Sprint(got) != fmt.Sprint(wantZones) || calls != wantCalls {
			t.Errorf("%s: zones %q after %d calls, want %q after %d", what, got, calls, wantZones, wantCalls)
		}
	}
	step("a node in z1", func() { z.set(node("a", "z1"), false) }, []string{"z1"}, 1)
	step("another in z1", func() { z.set(node("b", "z1"), false) }, []string{"z1"}, 1)
	step("the same again (resync)", func() { z.set(node("b", "z1"), false) }, []string{"z1"}, 1)
	step("b moves to z2", func() { z.set(node("b", "z2"), false) }, []string{"z1", "z2"}, 2)
	step("a node without the label", func() { z.set(node("c", "-"), false) }, []string{"", "z1", "z2"}, 3)
	step("a deleted (tombstone)", func() {
		z.set(toolscache.DeletedFinalStateUnknown{Key: "a", Obj: node("a", "z1")}, false)
	}, []string{"", "z2"}, 4)
	step("not an object", func() { z.set("nonsense", false) }, []string{"", "z2"}, 4)
	step("c deleted", func() { z.set(node("c", "-"), true) }, []string{"z2"}, 5)

	unsynced := newNodeZones(nil, nil)
	unsynced.started, unsynced.synced = true, func() bool { return false }
	if got, known := unsynced.Zones(t.Context()); known || got != nil {
		t.Errorf("before the informer has listed: %v, %v; want unknown", got, known)
	}
}
