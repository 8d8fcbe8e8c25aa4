package imports

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/plumbing"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

func ready(si *mcsv1beta1.ServiceImport) string {
	c := meta.FindStatusCondition(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))
	if c == nil {
		return "<none>"
	}
	return string(c.Status) + "/" + c.Reason
}

func derivedKey() types.NamespacedName {
	return types.NamespacedName{Namespace: "ns", Name: DerivedServiceName(key)}
}

// TestNewImport: a new import is the ServiceImport (created, then its ips,
// then its status), its derived Service and one slice: five writes, and a
// second reconcile writes nothing.
func TestNewImport(t *testing.T) {
	h := newHarness(t, Options{})
	h.put(h.export("east", 0, "10.1.0.1", "10.1.0.2"))
	h.reconcile()

	want := []string{
		"create EndpointSlice ns/web-", // generateName
		"create Service ns/" + DerivedServiceName(key),
		"create ServiceImport ns/web",
		"update ServiceImport ns/web",
		"update/status ServiceImport ns/web",
	}
	if got := h.takeWrites(); !slices.Equal(got, want) {
		t.Errorf("writes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	si := h.serviceImport()
	svc := &corev1.Service{}
	if err := h.client.Get(t.Context(), derivedKey(), svc); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(si.Spec.IPs, svc.Spec.ClusterIPs) || len(si.Spec.IPs) != 1 {
		t.Errorf("ips %v, derived Service's ClusterIPs %v", si.Spec.IPs, svc.Spec.ClusterIPs)
	}
	if !metav1.IsControlledBy(svc, si) || svc.Labels[ManagedByLabel] != "mcs" || svc.Spec.Selector != nil {
		t.Errorf("derived Service %+v", svc.ObjectMeta)
	}
	if si.Labels[ManagedByLabel] != "mcs" || si.Annotations[DerivedServiceAnnotation] != DerivedServiceName(key) {
		t.Errorf("ServiceImport metadata %v %v", si.Labels, si.Annotations)
	}
	if ready(si) != "True/Ready" || si.Status.EndpointSliceObjects != mcsv1beta1.EndpointSliceObjectsPresent ||
		len(si.Status.Clusters) != 1 || si.Status.Clusters[0].Cluster != "east" {
		t.Errorf("status %+v", si.Status)
	}
	if got := h.slicesBySource(); !slices.Equal(got["east"], []string{"10.1.0.1", "10.1.0.2"}) || len(got) != 1 {
		t.Errorf("slices %v", got)
	}

	h.reconcile()
	if got := h.takeWrites(); len(got) != 0 {
		t.Errorf("second reconcile wrote %v", got)
	}
}

// TestSliceLabelContract pins the labels of imported slices, which the
// consumers of our objects read: kube-proxy (kubernetes.io/service-name),
// CoreDNS's multicluster option and Gateway API implementations
// (multicluster.kubernetes.io/service-name, source-cluster), and anyone
// who selects by managed-by. They are exactly the labels the mcs-api
// reference controllers give a slice (sigs.k8s.io/mcs-api/controllers:
// its EndpointSlice controller sets kubernetes.io/service-name to the
// derived Service's name on every slice with the multicluster label,
// referenceDerivedName below); our Headless slices alone lack
// kubernetes.io/service-name, because no derived Service exists for them
// (the reference makes none either). Changing this set is a decision:
// docs/user-guide.md, "A ServiceImport as a Gateway API backend", says
// what depends on it.
func TestSliceLabelContract(t *testing.T) {
	// The reference's derived Service name of ns/web:
	// "derived-" + lower(base32hex, no padding, of sha256("ns/web")))[:10],
	// worked out apart from our code (Python: hashlib, base64).
	const referenceDerivedName = "derived-9jaau8dqeh"
	for _, typ := range []mcsv1beta1.ServiceImportType{mcsv1beta1.ClusterSetIP, mcsv1beta1.Headless} {
		t.Run(string(typ), func(t *testing.T) {
			h := newHarness(t, Options{})
			for i, c := range []string{"east", "west.fleet-b"} {
				es := h.export(c, i, fmt.Sprintf("10.1.0.%d", i+1))
				es.Spec.Type = typ
				h.put(es)
			}
			h.reconcile()
			var list discoveryv1.EndpointSliceList
			if err := h.client.List(t.Context(), &list); err != nil {
				t.Fatal(err)
			}
			if len(list.Items) != 2 {
				t.Fatalf("%d slices, want one per source", len(list.Items))
			}
			for _, s := range list.Items {
				source := s.Labels[mcsv1beta1.LabelSourceCluster]
				want := map[string]string{
					mcsv1beta1.LabelServiceName:   "web",
					mcsv1beta1.LabelSourceCluster: source,
					discoveryv1.LabelManagedBy:    "mcs",
				}
				if typ == mcsv1beta1.ClusterSetIP {
					want[discoveryv1.LabelServiceName] = referenceDerivedName
				}
				if (source != "east" && source != "west.fleet-b") || !maps.Equal(s.Labels, want) {
					t.Errorf("slice %s: labels %v, want %v", s.Name, s.Labels, want)
				}
			}
		})
	}
	if got := DerivedServiceName(key); got != referenceDerivedName {
		t.Errorf("DerivedServiceName(%s) = %s, the reference controller's is %s", key, got, referenceDerivedName)
	}
}

// TestTwoSources: each source gets slices of its own; status.clusters
// lists both; the ports are the union.
func TestTwoSources(t *testing.T) {
	h := newHarness(t, Options{})
	west := h.export("west", 1, "10.2.0.1")
	west.Spec.Ports = append(west.Spec.Ports, mcsv1beta1.ServicePort{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9090})
	h.put(h.export("east", 0, "10.1.0.1"), west)
	h.reconcile()
	got := h.slicesBySource()
	if !slices.Equal(got["east"], []string{"10.1.0.1"}) || !slices.Equal(got["west"], []string{"10.2.0.1"}) {
		t.Errorf("slices %v", got)
	}
	si := h.serviceImport()
	if len(si.Status.Clusters) != 2 || len(si.Spec.Ports) != 2 {
		t.Errorf("clusters %v ports %v", si.Status.Clusters, si.Spec.Ports)
	}
	svc := &corev1.Service{}
	if err := h.client.Get(t.Context(), derivedKey(), svc); err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.Ports) != 2 {
		t.Errorf("derived Service ports %v", svc.Spec.Ports)
	}

	// West stops exporting: its slices go, east's stay.
	h.store.Delete("west", key)
	h.reconcile()
	if got := h.slicesBySource(); len(got["west"]) != 0 || len(got["east"]) != 1 {
		t.Errorf("after west's withdrawal: %v", got)
	}
}

// TestGraceExpiry: an unreachable member's endpoints stay within the grace
// (and the reconcile asks to look again when it runs out), and leave after.
func TestGraceExpiry(t *testing.T) {
	h := newHarness(t, Options{UnreachableGrace: time.Minute})
	h.put(h.export("east", 0, "10.1.0.1"), h.export("west", 1, "10.2.0.1"))
	h.reconcile()

	h.members.down["west"] = time.Now().Add(-30 * time.Second)
	res := h.reconcile()
	if got := h.slicesBySource(); len(got["west"]) != 1 {
		t.Errorf("within the grace: %v", got)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > 30*time.Second {
		t.Errorf("requeue after %v, want when the grace runs out (≤30s)", res.RequeueAfter)
	}

	h.members.down["west"] = time.Now().Add(-2 * time.Minute)
	h.reconcile()
	if got := h.slicesBySource(); len(got["west"]) != 0 || len(got["east"]) != 1 {
		t.Errorf("past the grace: %v", got)
	}
	if si := h.serviceImport(); len(si.Status.Clusters) != 1 {
		t.Errorf("clusters %v", si.Status.Clusters)
	}
}

// TestNamespaceMissing: nothing is written into a namespace the consumer
// lacks; it is counted once.
func TestNamespaceMissing(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Options{Metrics: m})
	h.put(h.export("east", 0, "10.1.0.1"))
	if err := h.client.Delete(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}); err != nil {
		t.Fatal(err)
	}
	h.takeWrites()
	h.reconcile()
	h.reconcile()
	if got := h.takeWrites(); len(got) != 0 {
		t.Errorf("writes %v", got)
	}
	if got := testutil.ToFloat64(m.missing.WithLabelValues("north")); got != 1 {
		t.Errorf("namespace_missing_total %v, want 1", got)
	}
}

// TestForeignDerivedService: a Service of the derived name that is not
// mcs-syncer's is never touched; the import says why it has no IP.
func TestForeignDerivedService(t *testing.T) {
	foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: DerivedServiceName(key), Labels: map[string]string{"mine": "yes"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 1}}}}
	h := newHarness(t, Options{}, foreign)
	h.put(h.export("east", 0, "10.1.0.1"))
	res := h.reconcile()
	for _, w := range h.takeWrites() {
		if strings.Contains(w, "Service ns/derived") {
			t.Errorf("wrote the foreign Service: %s", w)
		}
	}
	si := h.serviceImport()
	if ready(si) != "False/"+string(ReasonDerivedServiceNotOwned) || len(si.Spec.IPs) != 0 {
		t.Errorf("ready %s ips %v", ready(si), si.Spec.IPs)
	}
	if res.RequeueAfter != foreignServiceRecheck {
		t.Errorf("requeue after %v", res.RequeueAfter)
	}
	// Once it is gone, the import gets its Service and IP.
	if err := h.client.Delete(t.Context(), foreign); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if si := h.serviceImport(); ready(si) != "True/Ready" || len(si.Spec.IPs) != 1 {
		t.Errorf("after the foreign Service left: ready %s ips %v", ready(si), si.Spec.IPs)
	}
}

// TestOthersMetadataKept: labels and annotations that others put on the
// ServiceImport survive syncs; the exported ones follow the exports, and
// one the exports drop is removed.
func TestOthersMetadataKept(t *testing.T) {
	h := newHarness(t, Options{})
	es := h.export("east", 0, "10.1.0.1")
	es.Spec.Labels = map[string]string{"tier": "web", "old": "x"}
	es.Spec.Annotations = map[string]string{"note": "exported"}
	h.put(es)
	h.reconcile()

	si := h.serviceImport()
	si.Labels["team"] = "payments"
	si.Annotations = map[string]string{"argocd.argoproj.io/tracking-id": "t", "note": si.Annotations["note"], DerivedServiceAnnotation: si.Annotations[DerivedServiceAnnotation], ExportedKeysAnnotation: si.Annotations[ExportedKeysAnnotation]}
	if err := h.client.Update(t.Context(), si); err != nil {
		t.Fatal(err)
	}
	h.takeWrites()
	h.reconcile()
	if got := h.takeWrites(); len(got) != 0 {
		t.Errorf("others' keys caused writes: %v", got)
	}

	changed := h.export("east", 0, "10.1.0.1")
	changed.Spec.Labels = map[string]string{"tier": "api"}
	h.put(changed)
	h.reconcile()
	si = h.serviceImport()
	if si.Labels["team"] != "payments" || si.Annotations["argocd.argoproj.io/tracking-id"] != "t" {
		t.Errorf("others' keys lost: %v %v", si.Labels, si.Annotations)
	}
	if si.Labels["tier"] != "api" || si.Labels["old"] != "" || si.Annotations["note"] != "" {
		t.Errorf("exported keys not followed: %v %v", si.Labels, si.Annotations)
	}
	if si.Labels[ManagedByLabel] != "mcs" || si.Annotations[DerivedServiceAnnotation] == "" {
		t.Errorf("own keys lost: %v %v", si.Labels, si.Annotations)
	}
}

// TestNotManagedServiceImport: a ServiceImport without mcs-syncer's label
// is left alone; an event on it and the Store (for the exporters'
// ServiceExports) say why the import is blocked; deleting it unblocks.
func TestNotManagedServiceImport(t *testing.T) {
	person := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, Ports: []mcsv1beta1.ServicePort{}}}
	h := newHarness(t, Options{}, person)
	h.put(h.export("east", 0, "10.1.0.1"))
	h.reconcile()
	h.reconcile()
	if got := h.takeWrites(); len(got) != 0 {
		t.Errorf("writes %v", got)
	}
	blocked := h.feedback.ImportBlocked(key)
	if !strings.Contains(blocked["north"], "ServiceImport ns/web in cluster north is not managed by mcs-syncer") {
		t.Errorf("blocked %v", blocked)
	}
	if ev := h.events(); len(ev) != 1 || !strings.Contains(ev[0], "NotManaged") {
		t.Errorf("events %v, want one NotManaged", ev)
	}

	if err := h.client.Delete(t.Context(), person); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if len(h.feedback.ImportBlocked(key)) != 0 || ready(h.serviceImport()) != "True/Ready" {
		t.Error("still blocked after the ServiceImport was deleted")
	}
}

// TestWithdrawal: when nobody exports any more, the ServiceImport goes
// (its derived Service and slices follow by garbage collection) — but not
// while a member's exports are not all known.
func TestWithdrawal(t *testing.T) {
	h := newHarness(t, Options{})
	h.put(h.export("east", 0, "10.1.0.1"))
	h.reconcile()
	h.store.Delete("east", key)

	h.store.BeginResync("west") // west reconnects: its exports are not all known
	h.reconcile()
	h.serviceImport() // still there
	h.syncAll()
	h.takeWrites()
	h.reconcile()
	if got := h.takeWrites(); !slices.Equal(got, []string{"delete ServiceImport ns/web"}) {
		t.Errorf("writes %v", got)
	}
}

// TestStuckMemberHoldsOnlyItsOwn: west was synced, then cannot be read
// (forbidden: its connection is rebuilt again and again, each time a new
// first pass that never ends). Its last complete view stands for its
// grace: its export of web stays imported, and east's withdrawal of api,
// which west never exported, is written at once. A member never synced
// (south) holds that withdrawal back, for its grace at most.
func TestStuckMemberHoldsOnlyItsOwn(t *testing.T) {
	h := newHarness(t, Options{UnreachableGrace: time.Minute})
	api := types.NamespacedName{Namespace: "ns", Name: "api"}
	h.put(h.export("east", 0, "10.1.0.1"), h.export("west", 1, "10.2.0.1"))
	eastAPI := h.export("east", 0, "10.1.0.2")
	eastAPI.Key = api
	h.store.Put(eastAPI)
	h.reconcile()
	if _, err := h.c.Reconcile(t.Context(), reconcile.Request{NamespacedName: api}); err != nil {
		t.Fatal(err)
	}
	h.takeWrites()

	h.store.BeginResync("west")
	h.members.mu.Lock()
	h.members.down["west"] = time.Now()
	h.members.mu.Unlock()
	h.store.Delete("east", api)
	h.store.Delete("east", key)
	if _, err := h.c.Reconcile(t.Context(), reconcile.Request{NamespacedName: api}); err != nil {
		t.Fatal(err)
	}
	if got := h.takeWrites(); !slices.Equal(got, []string{"delete ServiceImport ns/api"}) {
		t.Errorf("east's withdrawal of api while west is stuck: writes %v, want the ServiceImport deleted at once", got)
	}
	h.reconcile()
	// (The fake client collects no garbage: api's slice of east stays.)
	if got := h.slicesBySource(); !slices.Equal(got["west"], []string{"10.2.0.1"}) || !slices.Equal(got["east"], []string{"10.1.0.2"}) {
		t.Errorf("slices %v: want west's kept (its grace), east's of web withdrawn", got)
	}

	// South joins and is never synced: east's next withdrawal waits for
	// it, for its grace at most.
	h.members.mu.Lock()
	h.members.ids = append(h.members.ids, "south")
	h.members.down["south"] = time.Now()
	h.members.mu.Unlock()
	h.store.Put(eastAPI)
	if _, err := h.c.Reconcile(t.Context(), reconcile.Request{NamespacedName: api}); err != nil {
		t.Fatal(err)
	}
	h.store.Delete("east", api)
	h.takeWrites()
	res, err := h.c.Reconcile(t.Context(), reconcile.Request{NamespacedName: api})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.takeWrites(); len(got) != 0 || res.RequeueAfter <= 0 || res.RequeueAfter > time.Minute {
		t.Errorf("with south never synced: writes %v, look again after %v; want none until south's grace runs out", got, res.RequeueAfter)
	}
}

// TestPartialViewLeavesServiceImport: while a member's first pass is under
// way, an existing ServiceImport is not rewritten (a restart writes
// nothing), while a settled source's slices follow its export.
func TestPartialViewLeavesServiceImport(t *testing.T) {
	h := newHarness(t, Options{})
	h.put(h.export("east", 0, "10.1.0.1"), h.export("west", 1, "10.2.0.1"))
	h.reconcile()
	h.takeWrites()

	h.store.BeginResync("west")
	changed := h.export("east", 0, "10.1.0.1", "10.1.0.9")
	changed.Spec.Ports[0].Port = 8080
	h.store.Put(changed)
	res := h.reconcile()
	got := h.takeWrites()
	if len(got) != 1 || !strings.HasPrefix(got[0], "update EndpointSlice") {
		t.Errorf("writes %v, want east's slice only", got)
	}
	if h.serviceImport().Spec.Ports[0].Port != 80 {
		t.Error("the ServiceImport changed on a partial view")
	}
	if res.RequeueAfter != time.Second {
		t.Errorf("requeue after %v, want 1s while west's first pass is under way", res.RequeueAfter)
	}
}

// TestHeadless: no derived Service, no ips, slices without
// kubernetes.io/service-name.
func TestHeadless(t *testing.T) {
	h := newHarness(t, Options{})
	es := h.export("east", 0, "10.1.0.1")
	es.Spec.Type = mcsv1beta1.Headless
	h.put(es)
	h.reconcile()
	si := h.serviceImport()
	if len(si.Spec.IPs) != 0 || si.Annotations[DerivedServiceAnnotation] != "" {
		t.Errorf("headless import has ips %v annotations %v", si.Spec.IPs, si.Annotations)
	}
	if err := h.client.Get(t.Context(), derivedKey(), &corev1.Service{}); !apierrors.IsNotFound(err) {
		t.Errorf("derived Service of a headless import: %v", err)
	}
	var list discoveryv1.EndpointSliceList
	if err := h.client.List(t.Context(), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Labels[discoveryv1.LabelServiceName] != "" {
		t.Errorf("slices %+v", list.Items)
	}
}

// TestIPFamilyNotSupported: a consumer that refuses the exporters' IP
// family gets Ready=False/IPFamilyNotSupported, not an endless retry.
func TestIPFamilyNotSupported(t *testing.T) {
	h := newHarness(t, Options{})
	h.ipv4Only = true
	es := h.export("east", 0)
	es.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
	es.Endpoints = nil
	h.put(es)
	h.reconcile()
	si := h.serviceImport()
	if ready(si) != "False/IPFamilyNotSupported" || si.Status.EndpointSliceObjects != mcsv1beta1.EndpointSliceObjectsAbsent {
		t.Errorf("ready %s, endpointSliceObjects %s", ready(si), si.Status.EndpointSliceObjects)
	}
}

// TestUnimportableEndpoints: endpoints of an address type the import
// cannot carry are counted and reported, not dropped silently.
func TestUnimportableEndpoints(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Options{Metrics: m})
	es := h.export("east", 0, "10.1.0.1")
	es.Endpoints = append(es.Endpoints, reconciler.EndpointGroup{AddressType: discoveryv1.AddressTypeFQDN,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"db.example.com"}}}})
	h.put(es)
	h.reconcile()
	if got := testutil.ToFloat64(m.unimportable.vec.WithLabelValues("east", "north")); got != 1 {
		t.Errorf("unimportable_endpoints %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.imported.vec.WithLabelValues("east", "north")); got != 1 {
		t.Errorf("imported_endpoints %v, want 1", got)
	}
	if ev := h.events(); len(ev) != 1 || !strings.Contains(ev[0], "EndpointsNotImported") {
		t.Errorf("events %v", ev)
	}
	h.reconcile()
	if ev := h.events(); len(ev) != 0 {
		t.Errorf("reported again: %v", ev)
	}
}

// TestIncompletePublicationIsReported: an export some of whose parts its
// reader left out for the member's limit is imported with what was read,
// its ServiceImport's Ready message says so first, and one Warning event
// tells of it; a count that follows the flood rewrites nothing, and the
// note leaves once the export is whole.
func TestIncompletePublicationIsReported(t *testing.T) {
	h := newHarness(t, Options{})
	h.put(h.export("east", 0, "10.1.0.1"))
	flooded := h.export("west", 1, "10.2.0.1")
	flooded.PartsLeftOut = 3
	h.put(flooded)
	h.reconcile()
	si := h.serviceImport()
	want := incompleteNote([]clusterset.ClusterID{"west"})
	if ready(si) != "True/Ready" || !strings.HasPrefix(readyMessage(si.Status), want+"; imported from [east west]") {
		t.Errorf("Ready %s %q, want True and the note first", ready(si), readyMessage(si.Status))
	}
	if got := h.slicesBySource(); len(got["west"]) == 0 || len(got["east"]) == 0 {
		t.Errorf("slices by source %v: what was read of each is imported", got)
	}
	if ev := h.events(); len(ev) != 1 || !strings.Contains(ev[0], ReasonPublicationIncomplete) || !strings.Contains(ev[0], "[west]") {
		t.Errorf("events %v, want one %s naming west", ev, ReasonPublicationIncomplete)
	}
	h.takeWrites()
	flooded.PartsLeftOut = 7
	h.put(flooded)
	h.reconcile()
	if w := h.takeWrites(); len(w) != 0 {
		t.Errorf("more parts left out of the same source wrote %v", w)
	}
	if ev := h.events(); len(ev) != 0 {
		t.Errorf("reported again: %v", ev)
	}
	flooded.PartsLeftOut = 0
	h.put(flooded)
	h.reconcile()
	if msg := readyMessage(h.serviceImport().Status); msg != "imported from [east west]" {
		t.Errorf("Ready %q once west's export is whole", msg)
	}
}

// TestConflictIsRetriedQuietly: a write that loses a race is no error;
// the import is requeued shortly.
func TestConflictIsRetriedQuietly(t *testing.T) {
	h := newHarness(t, Options{})
	h.put(h.export("east", 0, "10.1.0.1"))
	h.reconcile()
	h.put(h.export("east", 0, "10.1.0.1", "10.1.0.2"))
	h.fail = func(verb string, obj client.Object) error {
		if _, ok := obj.(*discoveryv1.EndpointSlice); ok && verb == "update" {
			return apierrors.NewConflict(discoveryv1.Resource("endpointslices"), obj.GetName(), nil)
		}
		return nil
	}
	res, err := h.c.Reconcile(t.Context(), reconcile.Request{NamespacedName: key})
	if err != nil || res.RequeueAfter != plumbing.ConflictRetry {
		t.Errorf("reconcile: %v, %+v; want a quiet requeue", err, res)
	}

	// A shutdown is not an error either.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	h.fail = func(string, client.Object) error { return context.Canceled }
	if _, err := h.c.Reconcile(ctx, reconcile.Request{NamespacedName: key}); err != nil {
		t.Errorf("reconcile during a shutdown: %v", err)
	}
}

// TestMetricsForgetWithdrawnImport: the imported gauge loses an import's
// share when it is withdrawn.
func TestMetricsForgetWithdrawnImport(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Options{Metrics: m})
	h.put(h.export("east", 0, "10.1.0.1", "10.1.0.2"))
	h.reconcile()
	if got := testutil.ToFloat64(m.imported.vec.WithLabelValues("east", "north")); got != 2 {
		t.Errorf("imported %v", got)
	}
	h.store.Delete("east", key)
	h.reconcile()
	if got := testutil.ToFloat64(m.imported.vec.WithLabelValues("east", "north")); got != 0 {
		t.Errorf("imported after withdrawal %v", got)
	}
}

// TestSettledSources: a source whose export, slices and import-wide inputs
// are as when its slices were last found up to date is not planned again;
// anything of those that changes is: a change of one source's export, a
// slice changed by someone else, the import's type (which every source's
// slices' labels follow).
func TestSettledSources(t *testing.T) {
	h := newHarness(t, Options{})
	h.put(h.export("east", 0, "10.1.0.1"), h.export("west", 1, "10.2.0.1"))
	h.reconcile()
	h.reconcile() // finds both up to date
	h.takeWrites()

	h.put(h.export("east", 0, "10.1.0.1", "10.1.0.2"))
	h.reconcile()
	if got := h.slicesBySource(); !slices.Equal(got["east"], []string{"10.1.0.1", "10.1.0.2"}) || !slices.Equal(got["west"], []string{"10.2.0.1"}) {
		t.Errorf("after east's change: %v", got)
	}

	// Someone empties west's slice: it is put back.
	var list discoveryv1.EndpointSliceList
	if err := h.client.List(t.Context(), &list, client.MatchingLabels{mcsv1beta1.LabelSourceCluster: "west"}); err != nil || len(list.Items) != 1 {
		t.Fatalf("west's slices: %v %v", list.Items, err)
	}
	tampered := list.Items[0].DeepCopy()
	tampered.Endpoints = nil
	if err := h.client.Update(t.Context(), tampered); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if got := h.slicesBySource(); !slices.Equal(got["west"], []string{"10.2.0.1"}) {
		t.Errorf("west's slice emptied by someone else stays %v", got["west"])
	}
	h.reconcile() // finds west up to date again

	// East (the oldest: its type wins) turns headless: west's export is
	// the same, but its slices lose the derived Service's name.
	headless := h.export("east", 0, "10.1.0.1", "10.1.0.2")
	headless.Spec.Type = mcsv1beta1.Headless
	h.put(headless)
	h.reconcile()
	if err := h.client.List(t.Context(), &list, client.MatchingLabels{mcsv1beta1.LabelSourceCluster: "west"}); err != nil || len(list.Items) != 1 {
		t.Fatalf("west's slices: %v %v", list.Items, err)
	}
	if name, ok := list.Items[0].Labels[discoveryv1.LabelServiceName]; ok {
		t.Errorf("west's slice of a headless import keeps %s=%s", discoveryv1.LabelServiceName, name)
	}
}

func TestClusterListIsFmtsList(t *testing.T) {
	for _, ids := range [][]clusterset.ClusterID{nil, {"east"}, {"east", "west.fleet-a", "north"}} {
		if got, want := clusterList(ids), fmt.Sprintf("%v", ids); got != want {
			t.Errorf("clusterList(%q) = %q, want %q (the Ready message's format)", ids, got, want)
		}
	}
}

// TestHeldSlicesIgnoresOrder: the informer's index gives an import's
// slices in no particular order, so the held slices' identity must not
// depend on it (else a source of several slices is planned again on
// every reconcile); a new resourceVersion or another slice changes it.
func TestHeldSlicesIgnoresOrder(t *testing.T) {
	slice := func(name, rv string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
	}
	a, b, c := slice("web-a", "10"), slice("web-b", "11"), slice("web-c", "12")
	if heldSlices([]*discoveryv1.EndpointSlice{a, b, c}) != heldSlices([]*discoveryv1.EndpointSlice{c, a, b}) {
		t.Error("the same slices in another order are held slices of another identity")
	}
	for _, other := range [][]*discoveryv1.EndpointSlice{
		{a, b, slice("web-c", "13")}, // c changed
		{a, b},                       // c deleted
		{a, b, c, slice("web-d", "14")},
		{slice("web-a", "11"), slice("web-b", "10"), c}, // versions swapped between names
	} {
		if heldSlices(other) == heldSlices([]*discoveryv1.EndpointSlice{a, b, c}) {
			t.Errorf("%v: same identity as a, b, c", other)
		}
	}
}
