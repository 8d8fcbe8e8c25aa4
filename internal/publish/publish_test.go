package publish

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	sigsjson "sigs.k8s.io/json"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// Unit tests: a fake client in place of the publication server. What
// depends on a real API server (the CRD's schema, label-selected watches,
// the hub's admission) is in test/e2e.

var webKey = types.NamespacedName{Namespace: "ns", Name: "web"}

// export is east's export of ns/web with two endpoints, one of them
// terminating, every field set.
func export() *clusterset.ExportedService {
	td := "PreferClose"
	return &clusterset.ExportedService{
		Cluster: "east", Key: webKey, ExportCreated: metav1.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Spec: clusterset.ExportedSpec{
			Type:                  mcsv1beta1.ClusterSetIP,
			Ports:                 []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, AppProtocol: ptr.To("http")}},
			SessionAffinity:       corev1.ServiceAffinityClientIP,
			SessionAffinityConfig: &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](30)}},
			InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyLocal), TrafficDistribution: &td,
			IPFamilies:  []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			Labels:      map[string]string{"team": "a"},
			Annotations: map[string]string{"example.com/x": "y"}, LocalClusterFirst: true,
		},
		Endpoints: []reconciler.EndpointGroup{{
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
					NodeName: ptr.To("n1"), Zone: ptr.To("z1"), Hostname: ptr.To("web-0"),
					TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web-0", UID: "u0"}},
				{Addresses: []string{"10.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}},
			},
		}, {
			AddressType: discoveryv1.AddressTypeIPv6,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"fd00::1"}}},
		}},
		// Nanoseconds: the latency metric needs them (a metav1.Time on the
		// wire cut them off).
		LastChangeTriggerTime: time.Date(2026, 1, 2, 3, 5, 7, 123456789, time.UTC),
	}
}

// TestRoundTrip: an export survives Encode, JSON (as the API server
// stores it) and Decode with every field, and the name and label say whose
// it is.
func TestRoundTrip(t *testing.T) {
	want := export()
	p := Encode(want, "mcs-system")
	if p.Name != "east.ns.web" || p.Namespace != "mcs-system" || p.Labels[mcsv1beta1.LabelSourceCluster] != "east" {
		t.Fatalf("publication %s/%s labels %v", p.Namespace, p.Name, p.Labels)
	}
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back v1alpha1.PublishedExport
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &back); err != nil {
		t.Fatal(err)
	}
	got, err := Decode(&back)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(want) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, want)
	}
	if cp := back.DeepCopy(); !cp.Spec.ExportCreated.Equal(&back.Spec.ExportCreated) || len(cp.Spec.Endpoints[0].Endpoints) != 2 {
		t.Errorf("deep copy %+v", cp.Spec)
	}
}

// TestDecodeTakesEveryServiceName: every name the API server takes for a
// Service (a DNS-1123 label: one that begins with a digit, KEP-5311, and
// the longest, 63 characters, in the longest namespace from the longest
// cluster ID) is read back.
func TestDecodeTakesEveryServiceName(t *testing.T) {
	for _, c := range []struct{ cluster, namespace, name string }{
		{"east", "ns", "1web"},
		{"east", "ns", "123"},
		{strings.Repeat("c", 63), strings.Repeat("n", 63), "9" + strings.Repeat("w", 62)},
	} {
		es := export()
		es.Cluster, es.Key = clusterset.ClusterID(c.cluster), types.NamespacedName{Namespace: c.namespace, Name: c.name}
		p := Encode(es, "mcs-system")
		if errs := validation.IsDNS1123Subdomain(p.Name); len(errs) > 0 {
			t.Errorf("publication name %q: %v", p.Name, errs)
		}
		if got, err := Decode(p); err != nil || got.Key != es.Key {
			t.Errorf("%s/%s from %s: %v, %v", c.namespace, c.name, c.cluster, got, err)
		}
	}
}

// TestDecodeRefuses: every field a consumer relies on is checked; a
// publication that fails says which field.
func TestDecodeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		mutate     func(*v1alpha1.PublishedExport)
	}{
		{"bad cluster", `spec.cluster: cluster ID "East"`, func(p *v1alpha1.PublishedExport) { p.Spec.Cluster = "East" }},
		{"label is another cluster", `label multicluster.kubernetes.io/source-cluster is "west", spec.cluster "east"`, func(p *v1alpha1.PublishedExport) { p.Labels[mcsv1beta1.LabelSourceCluster] = "west" }},
		{"name of another export", `the publication of ns/web from east is named "east.ns.web"`, func(p *v1alpha1.PublishedExport) { p.Name = "east.ns.db" }},
		{"bad namespace", `spec.namespace "NS"`, func(p *v1alpha1.PublishedExport) { p.Spec.Namespace = "NS" }},
		{"bad name", `spec.name "-web"`, func(p *v1alpha1.PublishedExport) { p.Spec.Name, p.Name = "-web", "east.ns.-web" }},
		{"name too long", `spec.name "` + strings.Repeat("w", 64) + `"`, func(p *v1alpha1.PublishedExport) {
			p.Spec.Name = strings.Repeat("w", 64)
			p.Name = "east.ns." + p.Spec.Name
		}},
		{"bad type", `spec.type "LoadBalancer"`, func(p *v1alpha1.PublishedExport) { p.Spec.Type = "LoadBalancer" }},
		{"bad port", "spec.ports[0]: port 70000", func(p *v1alpha1.PublishedExport) { p.Spec.Ports[0].Port = 70000 }},
		{"bad protocol", `spec.ports[0]: protocol "ICMP"`, func(p *v1alpha1.PublishedExport) { p.Spec.Ports[0].Protocol = "ICMP" }},
		{"ClusterSetIP without a port", "spec.ports: a ClusterSetIP export has none", func(p *v1alpha1.PublishedExport) { p.Spec.Ports = nil }},
		{"bad affinity", `spec.sessionAffinity "Sticky"`, func(p *v1alpha1.PublishedExport) { p.Spec.SessionAffinity = "Sticky" }},
		{"bad policy", `spec.internalTrafficPolicy "Node"`, func(p *v1alpha1.PublishedExport) {
			p.Spec.InternalTrafficPolicy = ptr.To[corev1.ServiceInternalTrafficPolicy]("Node")
		}},
		{"bad family", `spec.ipFamilies: "IPv5"`, func(p *v1alpha1.PublishedExport) { p.Spec.IPFamilies = []corev1.IPFamily{"IPv5"} }},
		{"reserved label", `spec.exportedLabels["multicluster.kubernetes.io/service-name"]`, func(p *v1alpha1.PublishedExport) {
			p.Spec.ExportedLabels = map[string]string{mcsv1beta1.LabelServiceName: "x"}
		}},
		{"reserved annotation", `spec.exportedAnnotations["mcs-syncer.io/local-cluster-first"]`, func(p *v1alpha1.PublishedExport) {
			p.Spec.ExportedAnnotations = map[string]string{clusterset.LocalClusterFirstAnnotation: "true"}
		}},
		{"unknown address type", `spec.endpoints[0].addressType "IP"`, func(p *v1alpha1.PublishedExport) { p.Spec.Endpoints[0].AddressType = "IP" }},
		{"IPv6 in IPv4", `spec.endpoints[1].endpoints[0]: "fd00::1" is not an IPv4 address`, func(p *v1alpha1.PublishedExport) { p.Spec.Endpoints[1].AddressType = discoveryv1.AddressTypeIPv4 }},
		{"not an address", `"10.0.0.300" is not an IPv4 address`, func(p *v1alpha1.PublishedExport) { p.Spec.Endpoints[0].Endpoints[0].Addresses[0] = "10.0.0.300" }},
		{"no address", "spec.endpoints[0].endpoints[1]: no address", func(p *v1alpha1.PublishedExport) { p.Spec.Endpoints[0].Endpoints[1].Addresses = nil }},
		{"bad trigger time", `spec.lastChangeTriggerTime "yesterday"`, func(p *v1alpha1.PublishedExport) { p.Spec.LastChangeTriggerTime = "yesterday" }},
		{"bad part ID", `spec.parts[1] "Two"`, func(p *v1alpha1.PublishedExport) { p.Spec.Parts = []string{"1", "Two"} }},
		{"part named twice", `spec.parts[1] "1": named twice`, func(p *v1alpha1.PublishedExport) { p.Spec.Parts = []string{"1", "1"} }},
		{"part named twice, out of order", `spec.parts[2] "2": named twice`, func(p *v1alpha1.PublishedExport) { p.Spec.Parts = []string{"2", "1", "2"} }},
		{"endpoint port without number", "spec.endpoints[0].ports[0]: port and protocol are required", func(p *v1alpha1.PublishedExport) { p.Spec.Endpoints[0].Ports[0].Port = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Encode(export(), "mcs-system").DeepCopy()
			tc.mutate(p)
			_, err := Decode(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// fakePublicationServer is a fake client of a publication server.
func fakePublicationServer(t *testing.T) *fake.ClientBuilder {
	return fake.NewClientBuilder().WithScheme(scheme(t))
}

// fedByWrites returns cl wrapped so that each write that succeeds is
// noted in an index of east's parts, as the publisher's event handler
// notes what its cache sees (at once here: the fake server is its own
// cache), and that index, holding what cl holds already.
func fedByWrites(t *testing.T, cl client.WithWatch) (client.WithWatch, *ownParts) {
	own := newOwnParts("east")
	var list v1alpha1.PublishedExportList
	if err := cl.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		own.note(nil, &list.Items[i])
	}
	held := func(ctx context.Context, c client.WithWatch, o client.Object) *v1alpha1.PublishedExport {
		var pub v1alpha1.PublishedExport
		if c.Get(ctx, client.ObjectKeyFromObject(o), &pub) != nil {
			return nil
		}
		return &pub
	}
	written := func(o client.Object) *v1alpha1.PublishedExport {
		pub, _ := o.(*v1alpha1.PublishedExport)
		return pub.DeepCopy()
	}
	return interceptor.NewClient(cl, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
			err := c.Create(ctx, o, opts...)
			if err == nil {
				own.note(nil, written(o))
			}
			return err
		},
		Update: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
			old := held(ctx, c, o)
			err := c.Update(ctx, o, opts...)
			if err == nil {
				own.note(old, written(o))
			}
			return err
		},
		Delete: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.DeleteOption) error {
			old := held(ctx, c, o)
			err := c.Delete(ctx, o, opts...)
			if err == nil {
				own.note(old, nil)
			}
			return err
		},
	}), own
}

// publisherOf returns a publisher of east into a fake publication server.
func publisherOf(t *testing.T, store *clusterset.Store, objs ...client.Object) (*Publisher, client.Client) {
	cl, own := fedByWrites(t, fakePublicationServer(t).WithObjects(objs...).Build())
	return &Publisher{opts: PublisherOptions{Cluster: "east", Namespace: "mcs-system", Store: store, Feedback: clusterset.NewFeedback()}, client: cl, apiReader: cl, own: own}, cl
}

// readBack returns cluster's export of key as a reader of every
// publication in cl assembles it (nil: none).
func readBack(t *testing.T, cl client.Client, cluster clusterset.ClusterID, key types.NamespacedName) *clusterset.ExportedService {
	t.Helper()
	store := clusterset.NewStore()
	r := newReader(cluster, store, nil, nil)
	for _, pub := range publications(t, cl) {
		if pub.Labels[mcsv1beta1.LabelSourceCluster] == string(cluster) {
			r.put(pub)
		}
	}
	return store.GetFrom(key, cluster)
}

func publications(t *testing.T, cl client.Client) map[string]*v1alpha1.PublishedExport {
	var list v1alpha1.PublishedExportList
	if err := cl.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]*v1alpha1.PublishedExport{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// TestPublisher: a new export is published, a change updates it, an
// unchanged one writes nothing, and the marker is written once everything
// is published and nothing stale is left; a withdrawal waits for the
// member's first pass.
func TestPublisher(t *testing.T) {
	ctx := context.Background()
	store := clusterset.NewStore()
	stale := Encode(&clusterset.ExportedService{Cluster: "east", Key: types.NamespacedName{Namespace: "ns", Name: "gone"}, Spec: clusterset.ExportedSpec{Type: mcsv1beta1.ClusterSetIP}}, "mcs-system")
	west := Encode(&clusterset.ExportedService{Cluster: "west", Key: webKey, Spec: clusterset.ExportedSpec{Type: mcsv1beta1.ClusterSetIP}}, "mcs-system")
	p, cl := publisherOf(t, store, stale, west)
	store.BeginResync("east")
	store.Put(export())

	reconcileOK(t, p, webKey)
	got := publications(t, cl)["east.ns.web"]
	if got == nil {
		t.Fatal("not published")
	}
	if es := readBack(t, cl, "east", webKey); es == nil || !es.Equal(export()) {
		t.Errorf("published %+v", es)
	}
	rv := got.ResourceVersion
	reconcileOK(t, p, webKey)
	if publications(t, cl)["east.ns.web"].ResourceVersion != rv {
		t.Error("an unchanged export was written again")
	}

	// Before the first pass: nothing withdrawn, no marker.
	gone := types.NamespacedName{Namespace: "ns", Name: "gone"}
	if res := reconcileOK(t, p, gone); res.RequeueAfter == 0 {
		t.Error("a withdrawal on a partial view is not looked at again")
	}
	reconcileOK(t, p, markerRequest.NamespacedName)
	pubs := publications(t, cl)
	if pubs["east.ns.gone"] == nil || pubs["east"] != nil {
		t.Fatalf("before the first pass: stale withdrawn %v, marker %v", pubs["east.ns.gone"] == nil, pubs["east"] != nil)
	}

	// After it: the stale one goes (west's stays), then the marker comes.
	store.MarkSynced("east", map[types.NamespacedName]bool{webKey: true})
	reconcileOK(t, p, markerRequest.NamespacedName)
	if publications(t, cl)["east"] != nil {
		t.Fatal("marker written while a stale publication is left")
	}
	reconcileOK(t, p, gone)
	reconcileOK(t, p, markerRequest.NamespacedName)
	pubs = publications(t, cl)
	if pubs["east.ns.gone"] != nil || pubs["west.ns.web"] == nil || pubs["east"] == nil || !IsMarker(pubs["east"]) {
		t.Fatalf("after the first pass: %v", keys(pubs))
	}
	misnamed := Marker("east", "mcs-system", 0)
	misnamed.Name = "east.x"
	if IsMarker(misnamed) {
		t.Error("a publication without a Service under another name than its cluster's counts as the marker")
	}

	// A change updates; a withdrawal deletes.
	changed := export()
	changed.Endpoints = changed.Endpoints[:1]
	store.Put(changed)
	reconcileOK(t, p, webKey)
	if es := readBack(t, cl, "east", webKey); es == nil || len(es.Endpoints) != 1 {
		t.Errorf("update not published: %+v", es)
	}
	store.Delete("east", webKey)
	reconcileOK(t, p, webKey)
	if _, ok := publications(t, cl)["east.ns.web"]; ok {
		t.Error("withdrawn export still published")
	}
	if err := cl.Get(ctx, types.NamespacedName{Namespace: "mcs-system", Name: "east"}, &v1alpha1.PublishedExport{}); apierrors.IsNotFound(err) {
		t.Error("the marker went with the last export")
	}
}

func reconcileOK(t *testing.T, p *Publisher, key types.NamespacedName) reconcile.Result {
	t.Helper()
	res, err := p.Reconcile(context.Background(), reconcile.Request{NamespacedName: key})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func keys(m map[string]*v1alpha1.PublishedExport) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestReader: the reader puts what it reads into the Store, refuses what
// is invalid or published as another cluster (withdrawing the last good
// version), and marks the member synced only once both the first list
// and the marker are in; then what the first list lacks is withdrawn.
func TestReader(t *testing.T) {
	store := clusterset.NewStore()
	old := export()
	old.Key.Name = "old"
	store.Put(old) // read before a reconnection; gone since
	r := newReader("east", store, nil, nil)
	store.BeginResync("east")

	r.put(Encode(export(), "mcs-system"))
	if got := store.Get(webKey); len(got) != 1 || !got[0].Equal(export()) {
		t.Fatalf("store %+v", got)
	}
	r.mu.Lock()
	r.listed = true
	r.markSyncedLocked()
	r.mu.Unlock()
	if store.Synced("east") {
		t.Fatal("synced without the marker")
	}
	r.put(Marker("east", "mcs-system", 0))
	if !store.Synced("east") || len(store.Get(types.NamespacedName{Namespace: "ns", Name: "old"})) != 0 {
		t.Fatalf("after the marker: synced %v, old export %v", store.Synced("east"), store.Get(types.NamespacedName{Namespace: "ns", Name: "old"}))
	}

	// Published as west in east's publications: refused, the export withdrawn.
	impostor := export()
	impostor.Cluster = "west"
	bad := Encode(impostor, "mcs-system")
	bad.Name = ObjectName("west", webKey)
	before := refusedCount(t, r, "east")
	r.put(bad)
	r.put(func() *v1alpha1.PublishedExport { p := Encode(export(), "mcs-system"); p.Spec.Type = "Bogus"; return p }())
	if got := store.Get(webKey); len(got) != 0 {
		t.Errorf("refused publication left %+v", got)
	}
	if n := refusedCount(t, r, "east") - before; n != 2 {
		t.Errorf("refusals counted %v, want 2", n)
	}

	// Deleted: withdrawn once RemovalDelay has passed.
	delayed := &delayed{}
	r.delay = delayed.add
	r.put(Encode(export(), "mcs-system"))
	r.remove(Encode(export(), "mcs-system"))
	if got := store.Get(webKey); len(got) != 1 {
		t.Errorf("withdrawn at once: %+v", got)
	}
	delayed.fire()
	if got := store.Get(webKey); len(got) != 0 || !store.Synced("east") {
		t.Errorf("after delete: %+v, synced %v", got, store.Synced("east"))
	}
}

// TestReaderWipedPublications: every publication of a member deleted at
// once, the export's before the marker's (a wiped hub): nothing is
// withdrawn, the member is in a first pass again; when its publisher has
// written the export and the marker again, what it no longer publishes is
// withdrawn and the rest stays, never having left. A publication deleted
// and written again within RemovalDelay is never withdrawn.
func TestReaderWipedPublications(t *testing.T) {
	store := clusterset.NewStore()
	delayed := &delayed{}
	r := newReader("east", store, nil, nil)
	r.delay = delayed.add
	store.BeginResync("east")
	gone := export()
	gone.Key.Name = "gone"
	r.put(Encode(export(), "mcs-system"))
	r.put(Encode(gone, "mcs-system"))
	r.mu.Lock()
	r.listed = true
	r.mu.Unlock()
	r.put(Marker("east", "mcs-system", 0))
	if !store.Synced("east") {
		t.Fatal("not synced")
	}

	// Deleted and written again at once: never withdrawn.
	r.remove(Encode(export(), "mcs-system"))
	r.put(Encode(export(), "mcs-system"))
	delayed.fire()
	if got := store.Get(webKey); len(got) != 1 {
		t.Fatalf("a publication written again was withdrawn: %+v", got)
	}

	// The wipe.
	r.remove(Encode(export(), "mcs-system"))
	r.remove(Encode(gone, "mcs-system"))
	r.remove(Marker("east", "mcs-system", 0))
	if store.Synced("east") {
		t.Error("still synced without its marker")
	}
	delayed.fire()
	if len(store.Get(webKey)) != 1 || len(store.Get(gone.Key)) != 1 {
		t.Fatalf("withdrawn while the member republishes: web %v, gone %v", store.Get(webKey), store.Get(gone.Key))
	}
	// Republished: web and the marker, not gone.
	r.put(Encode(export(), "mcs-system"))
	r.put(Marker("east", "mcs-system", 0))
	if !store.Synced("east") || len(store.Get(webKey)) != 1 || len(store.Get(gone.Key)) != 0 {
		t.Errorf("after the republication: synced %v, web %v, gone %v", store.Synced("east"), store.Get(webKey), store.Get(gone.Key))
	}

	// Wiped again, the marker first (the hub deletes in name order), and
	// the marker written again before the publisher saw its export's
	// deletion (CI, stop 38): the export written again within RemovalDelay
	// never leaves.
	r.remove(Marker("east", "mcs-system", 0))
	r.remove(Encode(export(), "mcs-system"))
	r.put(Marker("east", "mcs-system", 0))
	if !store.Synced("east") || len(store.Get(webKey)) != 1 {
		t.Fatalf("the marker back before the export: synced %v, web %v", store.Synced("east"), store.Get(webKey))
	}
	r.put(Encode(export(), "mcs-system"))
	delayed.fire()
	if len(store.Get(webKey)) != 1 {
		t.Fatalf("an export written again after the marker was withdrawn: %v", store.Get(webKey))
	}
	// The same, and the export not written again: withdrawn after the delay.
	r.remove(Marker("east", "mcs-system", 0))
	r.remove(Encode(export(), "mcs-system"))
	r.put(Marker("east", "mcs-system", 0))
	delayed.fire()
	if len(store.Get(webKey)) != 0 {
		t.Errorf("an export deleted and never written again is kept: %v", store.Get(webKey))
	}
}

// TestDemux: the readers of several members share one informer (a hub's):
// each gets its own cluster's publications and no other's, including those
// seen before it came and those that change cluster; a deletion reaches
// the reader it belongs to, and a reader that left gets nothing more.
func TestDemux(t *testing.T) {
	store := clusterset.NewStore()
	inf := controllertest.NewFakeInformer()
	delayed := &delayed{}
	group := NewReaderGroup()
	newReader := func(id clusterset.ClusterID) *Reader {
		// In its steady state: listed, and marked.
		r := newReader(id, store, nil, nil)
		r.delay, r.listed = delayed.add, true
		r.put(Marker(id, "mcs-system", 0))
		return r
	}
	publication := func(cluster clusterset.ClusterID, name string) *v1alpha1.PublishedExport {
		es := export()
		es.Cluster, es.Key.Name = cluster, name
		return Encode(es, "mcs-system")
	}
	sources := func(name string) []clusterset.ClusterID {
		var ids []clusterset.ClusterID
		for _, es := range store.Get(types.NamespacedName{Namespace: "ns", Name: name}) {
			ids = append(ids, es.Cluster)
		}
		slices.Sort(ids)
		return ids
	}

	east, west := newReader("east"), newReader("west")
	d, err := group.attach(inf, inf, east)
	if err != nil {
		t.Fatal(err)
	}
	if d2, _ := group.attach(inf, inf, west); d2 != d {
		t.Fatal("a second reader of the informer got a demux of its own")
	}
	inf.Add(publication("east", "web"))
	inf.Add(publication("west", "web"))
	inf.Add(publication("north", "web")) // no reader yet
	if got := sources("web"); !slices.Equal(got, []clusterset.ClusterID{"east", "west"}) {
		t.Fatalf("web from %v, want east and west", got)
	}
	north := newReader("north")
	if _, err := group.attach(inf, inf, north); err != nil {
		t.Fatal(err)
	}
	if got := sources("web"); !slices.Equal(got, []clusterset.ClusterID{"east", "north", "west"}) {
		t.Fatalf("after north's reader came: web from %v", got)
	}

	// A publication whose label moves from west to east is west's no more;
	// east's reader refuses it (its spec says west) and withdraws nothing of
	// its own.
	moved := publication("west", "db")
	inf.Add(moved)
	relabelled := moved.DeepCopy()
	relabelled.Labels[mcsv1beta1.LabelSourceCluster] = "east"
	inf.Update(moved, relabelled)
	delayed.fire()
	if got := sources("db"); len(got) != 0 {
		t.Errorf("db from %v after its label moved to a cluster its spec does not name", got)
	}

	inf.Delete(publication("west", "web"))
	delayed.fire()
	if got := sources("web"); !slices.Equal(got, []clusterset.ClusterID{"east", "north"}) {
		t.Errorf("after west's web was deleted: web from %v", got)
	}
	d.detach(east)
	inf.Add(publication("east", "api"))
	if got := sources("api"); len(got) != 0 {
		t.Errorf("a reader that left got %v", got)
	}
}

// wrappingCache hands out a new wrapper of its one informer on every
// GetInformer, as controller-runtime's cache limited to namespaces does.
type wrappingCache struct {
	cache.Cache
	inf      *controllertest.FakeInformer
	handlers atomic.Int32
}

type informerWrapper struct {
	*controllertest.FakeInformer
	c *wrappingCache
}

func (c *wrappingCache) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return &informerWrapper{FakeInformer: c.inf, c: c}, nil
}

func (w *informerWrapper) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	w.c.handlers.Add(1)
	return w.FakeInformer.AddEventHandler(h)
}

// TestReadersShareOneHandler: the readers of every member on one cache
// share one handler, though each GetInformer returns another wrapper (254
// readers of a hub each added a handler, and each handler's buffer and
// copy of what it saw made an importer 4 KB per imported endpoint).
func TestReadersShareOneHandler(t *testing.T) {
	inf := controllertest.NewFakeInformer(controllertest.Synced)
	c := &wrappingCache{inf: inf}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := clusterset.NewStore()
	group := NewReaderGroup()
	var done []chan struct{}
	for _, id := range []clusterset.ClusterID{"east", "west"} {
		r := newReader(id, store, nil, c)
		r.group = group
		ch := make(chan struct{})
		done = append(done, ch)
		go func() { defer close(ch); _ = r.Start(ctx) }()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		group.mu.Lock()
		d := group.demuxes[c]
		n := 0
		if d != nil {
			d.mu.Lock()
			n = len(d.readers)
			d.mu.Unlock()
		}
		group.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d readers on the cache's demux, want 2", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := c.handlers.Load(); got != 1 {
		t.Errorf("%d handlers on the informer, want 1", got)
	}
	cancel()
	for _, ch := range done {
		<-ch
	}
}

func refusedCount(t *testing.T, r *Reader, source string) float64 {
	t.Helper()
	c, err := r.group.refused.GetMetricWithLabelValues(source)
	if err != nil {
		t.Fatal(err)
	}
	out := &dto.Metric{}
	if err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	return out.GetCounter().GetValue()
}

// TestPublisherCacheBehind: a publication that the publisher's cache has
// not seen yet (its own create, just made) is no error: the create's
// AlreadyExists is looked at again shortly, and nothing is overwritten.
func TestPublisherCacheBehind(t *testing.T) {
	store := clusterset.NewStore()
	store.BeginResync("east")
	store.Put(export())
	mine := Encode(export(), "mcs-system")
	cl, own := fedByWrites(t, fakePublicationServer(t).WithObjects(mine).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			return apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("publishedexports").GroupResource(), key.Name)
		},
	}).Build())
	p := &Publisher{opts: PublisherOptions{Cluster: "east", Namespace: "mcs-system", Store: store, Feedback: clusterset.NewFeedback()}, client: cl, own: own,
		apiReader: fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(mine.DeepCopy()).Build()}
	if res := reconcileOK(t, p, webKey); res.RequeueAfter == 0 {
		t.Error("a publication the cache has not seen is not looked at again")
	}

	// Not ours, under our publication's name: an error that says so.
	foreign := mine.DeepCopy()
	foreign.Labels = map[string]string{"app": "other"}
	p.apiReader = fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(foreign).Build()
	_, err := p.Reconcile(context.Background(), reconcile.Request{NamespacedName: webKey})
	if err == nil || !strings.Contains(err.Error(), "in the way") {
		t.Errorf("an object in the way that is not ours: %v", err)
	}
}

// syncedStore is a Store that holds east's exports es, east's first pass
// over.
func syncedStore(es ...*clusterset.ExportedService) *clusterset.Store {
	store := clusterset.NewStore()
	store.BeginResync("east")
	synced := map[types.NamespacedName]bool{}
	for _, e := range es {
		store.Put(e)
		synced[e.Key] = true
	}
	store.MarkSynced("east", synced)
	return store
}

// syncedReader is a reader of east into store whose first list and marker
// are in, and whose removals wait in the returned delayed until fired.
func syncedReader(store *clusterset.Store, heartbeats *Heartbeats) (*Reader, *delayed) {
	r := newReader("east", store, heartbeats, nil)
	later := &delayed{}
	r.delay, r.listed, r.markerSeen, r.marked = later.add, true, true, true
	return r, later
}

// delayed holds the removals a Reader put off (Reader.delay) until the
// test fires them, as RemovalDelay's timer would.
type delayed struct {
	mu sync.Mutex
	fs []func()
}

func (d *delayed) add(f func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fs = append(d.fs, f)
}

func (d *delayed) fire() {
	d.mu.Lock()
	fs := d.fs
	d.fs = nil
	d.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// TestReaderGroupsShareNothing: the readers of two mcs-syncers in one
// process (a group each) get a demux each on one informer, and a
// publication one refuses is counted in its group's metric only.
func TestReaderGroupsShareNothing(t *testing.T) {
	inf := controllertest.NewFakeInformer()
	a, b := NewReaderGroup(), NewReaderGroup()
	ra, rb := newReader("east", clusterset.NewStore(), nil, nil), newReader("east", clusterset.NewStore(), nil, nil)
	ra.group, rb.group = a, b
	da, err := a.attach(inf, inf, ra)
	if err != nil {
		t.Fatal(err)
	}
	db, err := b.attach(inf, inf, rb)
	if err != nil {
		t.Fatal(err)
	}
	if da == db {
		t.Error("two groups' readers of one informer share a demux")
	}
	bad := Encode(export(), "mcs-system")
	bad.Spec.Type = "Bogus"
	ra.put(bad)
	if got, other := refusedCount(t, ra, "east"), refusedCount(t, rb, "east"); got != 1 || other != 0 {
		t.Errorf("refused: %v in the group that refused, %v in the other; want 1 and 0", got, other)
	}
}
