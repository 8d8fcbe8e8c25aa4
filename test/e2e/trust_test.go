package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/publish"
	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/workloads"
)

// The tests of docs/security.md's threat model that need a testbed.

// TestForgedPrecedenceInTheHub (hub mode): east exports web with port 80,
// west later with 8080; east's is the oldest export. With west's
// mcs-syncer stopped, west's own hub identity rewrites its head with
// exportCreated in 1970 (the admission policy lets it: the field is the
// member's to write), with a port "extra" besides, and publishes
// kube-system/kube-dns. Once north and east have read the forged head
// (north's ServiceImport has port extra, east's Conflict names it), port
// http is still east's 80 with east's endpoints, east is still the oldest
// export, and the kube-system publication is refused and counted. With a per-member
// list of namespaces in the hub's admission, west's identity may no
// longer publish from another namespace. Then west's
// mcs-syncer returns: it rewrites the forged head and its export gets a
// PublicationRewritten Warning, and its Conflict condition still names
// east the oldest export. Then the hub is wiped: every member republishes,
// and no conflict winner flips meanwhile (north's ServiceImport never says
// another port).
func TestForgedPrecedenceInTheHub(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	exclusive(t)
	ns := "trust-forged"
	bed.Namespace(ctx, t, ns)
	procs := startHubMode(ctx, t)
	defer func() { stopAll(t, procs) }()
	t.Cleanup(func() { clearHub(t) })
	east, west, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "west"), bed.ClientOf(t, "north")

	eastApp := workloads.CreateApp(ctx, t, east, ns, 2, 80, true, nil)
	eventually(ctx, t, "east's export to be Ready for over a second", func() error {
		c, err := workloads.ExportCondition(ctx, east, ns, "web", mcsv1beta1.ServiceExportConditionReady)
		if err != nil {
			return err
		}
		if c.Status != metav1.ConditionTrue || time.Since(c.LastTransitionTime.Time) < 1100*time.Millisecond {
			return fmt.Errorf("Ready=%s since %s", c.Status, c.LastTransitionTime)
		}
		return nil
	})
	workloads.CreateApp(ctx, t, west, ns, 2, 8080, true, nil)
	eventually(ctx, t, "north to import port 80 and east's endpoints only", importsPort80From(ctx, north, ns, 2, true))
	portConflictOn(ctx, t, ns, map[string]client.Client{"east": east, "west": west}, "east (oldest export)")

	// West's mcs-syncer stopped, its hub identity forges.
	at := memberAt("west")
	if err := procs[at].stop(); err != nil {
		t.Fatal(err)
	}
	hubWest := hubClient(t, "west")
	key := types.NamespacedName{Namespace: ns, Name: "web"}
	head := &v1alpha1.PublishedExport{}
	if err := hubWest.Get(ctx, types.NamespacedName{Namespace: testbed.HubNamespace, Name: publish.ObjectName("west", key)}, head); err != nil {
		t.Fatal(err)
	}
	// The forged head also defines a port of its own, "extra": a port
	// that no other export defines is imported from whoever defines it,
	// so its arrival in north's ServiceImport (and in east's Conflict
	// message) says that the forged head was read there.
	head.Spec.ExportCreated = metav1.NewTime(time.Unix(0, 0).UTC())
	head.Spec.Ports = append(head.Spec.Ports, mcsv1beta1.ServicePort{Name: "extra", Protocol: corev1.ProtocolTCP, Port: 9090})
	if err := hubWest.Update(ctx, head); err != nil {
		t.Fatalf("west's identity could not rewrite its own head (the test's premise): %v", err)
	}
	dns := publish.EncodeHead(&clusterset.ExportedService{
		Cluster: "west", Key: types.NamespacedName{Namespace: "kube-system", Name: "kube-dns"}, ExportCreated: metav1.Now(),
		Spec: clusterset.ExportedSpec{Type: mcsv1beta1.ClusterSetIP, Ports: []mcsv1beta1.ServicePort{{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}}},
	}, testbed.HubNamespace)
	if err := hubWest.Create(ctx, dns); err != nil {
		t.Fatalf("west's identity could not publish kube-system/kube-dns into the hub (the test's premise): %v", err)
	}
	refused := `mcs_syncer_publications_refused_total{source="west"}`
	northAt := memberAt("north")

	eventually(ctx, t, "north's ServiceImport to have the forged head's port extra", func() error {
		si, err := getImport(ctx, north, ns)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(si.Spec.Ports, func(p mcsv1beta1.ServicePort) bool { return p.Name == "extra" }) {
			return fmt.Errorf("ports %v", si.Spec.Ports)
		}
		return nil
	})
	if err := importsPort80From(ctx, north, ns, 2, false)(); err != nil {
		t.Errorf("north, once it read the forged head: %v", err)
	}
	eventually(ctx, t, "east's Conflict condition to name the forged head's port extra", func() error {
		c, err := workloads.ExportCondition(ctx, east, ns, "web", mcsv1beta1.ServiceExportConditionConflict)
		if err != nil {
			return err
		}
		if !strings.Contains(c.Message, `"extra"`) {
			return fmt.Errorf("message %q", c.Message)
		}
		return nil
	})
	if c, err := workloads.ExportCondition(ctx, east, ns, "web", mcsv1beta1.ServiceExportConditionConflict); err != nil || !strings.Contains(c.Message, "east (oldest export)") {
		t.Errorf("east's Conflict condition once it read the forged head: %v %v", c, err)
	}
	eventually(ctx, t, "north to count the kube-system publication refused", func() error {
		if v, err := procs[northAt].metric(ctx, refused); err != nil || v < 1 {
			return fmt.Errorf("%s = %v (%v)", refused, v, err)
		}
		return nil
	})
	if err := north.Get(ctx, types.NamespacedName{Namespace: "kube-system", Name: "kube-dns"}, &mcsv1beta1.ServiceImport{}); !apierrors.IsNotFound(err) {
		t.Errorf("north imported kube-system/kube-dns published by west's identity: %v", err)
	}

	// A per-member list in the hub's admission: west may publish from its
	// namespace only; a head elsewhere is refused, its own still passes.
	limits := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "mcs-system", Name: "mcs-syncer-member-namespaces"},
		Data: map[string]string{"west": "other-ns, " + ns}}
	if err := hubClient(t, "").Create(ctx, limits); err != nil {
		t.Fatal(err)
	}
	unlimit := func() {
		if err := hubClient(t, "").Delete(context.Background(), limits); client.IgnoreNotFound(err) != nil {
			t.Error(err)
		}
	}
	defer unlimit()
	elsewhere := publish.EncodeHead(&clusterset.ExportedService{
		Cluster: "west", Key: types.NamespacedName{Namespace: "elsewhere", Name: "web"}, ExportCreated: metav1.Now(),
		Spec: clusterset.ExportedSpec{Type: mcsv1beta1.ClusterSetIP, Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}, testbed.HubNamespace)
	eventually(ctx, t, "the hub's admission to refuse west's head of elsewhere/web", func() error {
		err := hubWest.Create(ctx, elsewhere.DeepCopy())
		if err == nil {
			_ = hubClient(t, "").Delete(ctx, elsewhere.DeepCopy())
			return fmt.Errorf("created")
		}
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "may publish only from namespaces") {
			return fmt.Errorf("not the policy's refusal: %w", err)
		}
		return nil
	})
	own := &v1alpha1.PublishedExport{}
	if err := hubWest.Get(ctx, types.NamespacedName{Namespace: testbed.HubNamespace, Name: publish.ObjectName("west", key)}, own); err != nil {
		t.Fatal(err)
	}
	own.Spec.ExportCreated = metav1.NewTime(time.Unix(1, 0).UTC())
	if err := hubWest.Update(ctx, own); err != nil {
		t.Errorf("west's identity could not update its head of %s, a namespace its list names: %v", ns, err)
	}
	// Gone before west's mcs-syncer returns: it still exports from the
	// namespaces of earlier tests, which the list leaves out, and a member
	// refused one export by the hub's admission writes no marker
	// (docs/configuration.md, "Hub mode").
	unlimit()

	// West back (its honest head replaces the forged one), then the hub
	// wiped: north's ServiceImport never says another port meanwhile.
	next, err := startMemberSyncer(ctx, bed.HubConfigPath("west"), "west")
	if err != nil {
		t.Fatal(err)
	}
	procs[at] = next
	if err := hubClient(t, "").Delete(ctx, dns); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "north's import on port 80 alone, once west's own head replaced the forged one", importsPort80From(ctx, north, ns, 2, true))
	// West's export says what its mcs-syncer found and why it lost.
	eventually(ctx, t, "west's export to be warned of the backdated head it rewrote", warningEvent(ctx, west, ns, "web", publish.ReasonPublicationRewritten))
	portConflictOn(ctx, t, ns, map[string]client.Client{"west": west}, "east (oldest export)")
	flips := watchPorts(ctx, t, north, ns)
	clearHub(t)
	eventually(ctx, t, "every head and marker back in the hub", func() error {
		got, err := hubPublications(ctx, t)
		if err != nil {
			return err
		}
		for _, want := range []string{"east", "west", "north", "east." + ns + ".web", "west." + ns + ".web"} {
			if !slices.Contains(got, want) {
				return fmt.Errorf("publications %v lack %s", got, want)
			}
		}
		return nil
	})
	scale(ctx, t, east, eastApp, 3)
	eventually(ctx, t, "north to import east's third endpoint, on port 80", importsPort80From(ctx, north, ns, 3, true))
	portConflictOn(ctx, t, ns, map[string]client.Client{"east": east, "west": west}, "east (oldest export)")
	if got := flips(); len(got) > 0 {
		t.Errorf("north's ServiceImport said other ports while the hub was wiped and republished: %v", got)
	}
}

// importsPort80From returns a check that north's import of ns/web has
// port http on 80 (with no other port, alone) with n of east's endpoints
// and none of west's.
func importsPort80From(ctx context.Context, north client.Client, ns string, n int, alone bool) func() error {
	return func() error {
		if err := readyImported(ctx, north, ns, map[string]int{"east": n, "west": 0})(); err != nil {
			return err
		}
		si, err := getImport(ctx, north, ns)
		if err != nil {
			return err
		}
		http := slices.IndexFunc(si.Spec.Ports, func(p mcsv1beta1.ServicePort) bool { return p.Name == "http" })
		switch {
		case http < 0 || si.Spec.Ports[http].Port != 80:
			return fmt.Errorf("ports %v, want east's http 80", si.Spec.Ports)
		case alone && len(si.Spec.Ports) != 1:
			return fmt.Errorf("ports %v, want east's http 80 alone", si.Spec.Ports)
		}
		return nil
	}
}

// watchPorts samples cl's ServiceImport ns/web every 50 ms until ctx ends
// and returns what it saw other than port 80 (a missing import included).
func watchPorts(ctx context.Context, t *testing.T, cl client.Client, ns string) func() []string {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			si, err := getImport(ctx, cl, ns)
			what := ""
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				what = err.Error()
			case len(si.Spec.Ports) != 1 || si.Spec.Ports[0].Port != 80:
				what = fmt.Sprint(si.Spec.Ports)
			}
			if what != "" {
				mu.Lock()
				seen = append(seen, what)
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

// TestRestrictedNamespaceIsNotExported (central mode): a ServiceExport in
// kube-system is Valid=False RestrictedNamespace and imported nowhere;
// one in an application namespace is imported.
func TestRestrictedNamespaceIsNotExported(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	east := bed.ClientOf(t, "east")
	ns := "trust-allowed"
	bed.Namespace(ctx, t, ns)
	objs := []client.Object{
		workloads.Deployment("kube-system", "mcs-probe", 1), workloads.Service("kube-system", "mcs-probe", 80),
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "mcs-probe"}},
	}
	for _, o := range objs {
		if err := east.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, o := range objs {
			if err := east.Delete(context.Background(), o); client.IgnoreNotFound(err) != nil {
				t.Errorf("delete %s: %v", o.GetName(), err)
			}
		}
	})
	workloads.CreateApp(ctx, t, east, ns, 1, 80, true, nil)

	eventually(ctx, t, "kube-system/mcs-probe's ServiceExport to be Valid=False RestrictedNamespace", func() error {
		c, err := workloads.ExportCondition(ctx, east, "kube-system", "mcs-probe", mcsv1beta1.ServiceExportConditionValid)
		if err != nil {
			return err
		}
		if c.Status != metav1.ConditionFalse || c.Reason != clusterset.ReasonRestrictedNamespace {
			return fmt.Errorf("Valid=%s/%s: %s", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	// The application's import is there once the central mcs-syncer has
	// been through both exports of east (one worker pass each).
	for _, consumer := range []string{"west", "north"} {
		eventually(ctx, t, consumer+": the import of "+ns+"/web", readyImported(ctx, bed.ClientOf(t, consumer), ns, map[string]int{"east": 1}))
	}
	for _, consumer := range []string{"east", "west", "north"} {
		err := bed.ClientOf(t, consumer).Get(ctx, types.NamespacedName{Namespace: "kube-system", Name: "mcs-probe"}, &mcsv1beta1.ServiceImport{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s: kube-system/mcs-probe imported (%v)", consumer, err)
		}
	}
}

// TestAddressOutsideItsRangesIsLeftOut (central mode): east's entry in the
// clusterset config gives it one address range, a /32 of one of its three
// endpoints. North imports that endpoint alone, counts the other two
// (mcs_syncer_unimportable_endpoints) and says why in an
// EndpointsNotImported event.
func TestAddressOutsideItsRangesIsLeftOut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	exclusive(t)
	ns := "trust-ranges"
	bed.Namespace(ctx, t, ns)
	east, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "north")
	workloads.CreateApp(ctx, t, east, ns, 3, 80, true, nil)
	var ips []string
	eventually(ctx, t, "east's EndpointSlice controller to hold 3 ready endpoints of web", func() error {
		var list discoveryv1.EndpointSliceList
		if err := east.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{
			discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}); err != nil {
			return err
		}
		ips = nil
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				if ptr.Deref(e.Conditions.Ready, false) {
					ips = append(ips, e.Addresses[0])
				}
			}
		}
		if len(ips) != 3 {
			return fmt.Errorf("ready %v", ips)
		}
		return nil
	})

	var members []testbed.Member
	for _, c := range bed.Clusters {
		m := testbed.Member{ID: c.Name, Kubeconfig: c.KubeconfigPath, Context: c.Context}
		if c.Name == "east" {
			m.AddressRanges = []string{ips[0] + "/32"}
		}
		members = append(members, m)
	}
	path := filepath.Join(t.TempDir(), "clusterset.yaml")
	writeMembers(t, path, members...)
	s := ownSyncer(ctx, t, path)

	eventually(ctx, t, "north to import "+ips[0]+" alone of east's endpoints", func() error {
		bySource, err := importedSlices(ctx, north, ns)
		if err != nil {
			return err
		}
		var got []string
		for _, sl := range bySource["east"] {
			for _, e := range sl.Endpoints {
				got = append(got, e.Addresses[0])
			}
		}
		if !slices.Equal(got, ips[:1]) {
			return fmt.Errorf("imported %v", got)
		}
		return nil
	})
	sample := `mcs_syncer_unimportable_endpoints{consumer_cluster="north",source_cluster="east"}`
	eventually(ctx, t, sample+" = 2", func() error {
		if v, err := s.metric(ctx, sample); err != nil || v != 2 {
			return fmt.Errorf("%v (%v)", v, err)
		}
		return nil
	})
	eventually(ctx, t, "an EndpointsNotImported event on north's ServiceImport", warningEvent(ctx, north, ns, "web", "EndpointsNotImported"))
}
