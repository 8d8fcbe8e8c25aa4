package export

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// TestThinSlice: the transforms of ConfigureCache keep the endpoints of a
// slice whose Service's ServiceExport the cache has seen, and drop (and
// mark) those of any other, leaving its name, Service and trigger time.
func TestThinSlice(t *testing.T) {
	e := NewExportedNames()
	t0 := time.Now().Truncate(time.Second)

	got, err := e.thinSlice(slice("web-a", t0, "10.0.0.1", "10.0.0.2"))
	s := got.(*discoveryv1.EndpointSlice)
	if err != nil || len(s.Endpoints) != 0 || !thinned(s) || len(s.Ports) != 0 || s.Labels[discoveryv1.LabelServiceName] != "web" || s.Name != "web-a" || s.Namespace != "ns" {
		t.Fatalf("slice of a Service not exported: %v, %s/%s, %d endpoints, thinned %v, ports %v, labels %v", err, s.Namespace, s.Name, len(s.Endpoints), thinned(s), s.Ports, s.Labels)
	}
	if tt, ok := triggerTime(s); !ok || !tt.Equal(t0) {
		t.Errorf("trigger time %v %v, want %v", tt, ok, t0)
	}

	if _, err := e.noteExport(serviceExportOf(t0)); err != nil {
		t.Fatal(err)
	}
	got, _ = e.thinSlice(slice("web-a", t0, "10.0.0.1", "10.0.0.2"))
	if s := got.(*discoveryv1.EndpointSlice); len(s.Endpoints) != 2 || thinned(s) {
		t.Errorf("slice of an exported Service: %d endpoints, thinned %v; want 2, kept", len(s.Endpoints), thinned(s))
	}
	other := slice("db-a", t0, "10.0.0.3")
	other.Labels[discoveryv1.LabelServiceName] = "db"
	if got, _ := e.thinSlice(other); !thinned(got.(*discoveryv1.EndpointSlice)) {
		t.Error("a slice of another Service kept its endpoints")
	}
	if got, _ := e.thinSlice(slice("web-empty", t0)); thinned(got.(*discoveryv1.EndpointSlice)) {
		t.Error("a slice without endpoints was marked")
	}
}

// TestUnitThinnedSlicesAreRead: a Service exported after its slices were
// cached thinned is exported with their endpoints, read from the API server
// once; the same resourceVersions are not read again, a newer one is, and a
// thinned slice the API server no longer holds is left out.
func TestUnitThinnedSlicesAreRead(t *testing.T) {
	t0 := time.Now().Add(-time.Minute).Truncate(time.Second)
	// The API server holds the slices whole.
	a, b := slice("web-a", t0, "10.0.0.1"), slice("web-b", t0, "10.0.0.2", "10.0.0.3")
	lists := 0
	api := fake.NewClientBuilder().WithObjects(a, b).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lists++
			return c.List(ctx, list, opts...)
		},
	}).Build()
	live := func(name string) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{}
		if err := api.Get(t.Context(), types.NamespacedName{Namespace: "ns", Name: name}, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	// The cache holds them as its transform left them: a thinned, b whole
	// (it changed after the ServiceExport was seen).
	e := NewExportedNames()
	thinA, _ := e.thinSlice(live("web-a"))
	e.names[webKey] = struct{}{}
	wholeB, _ := e.thinSlice(live("web-b"))
	h := newUnitHarness(t, serviceExportOf(t0), service(nil), thinA.(*discoveryv1.EndpointSlice), wholeB.(*discoveryv1.EndpointSlice))
	h.w.apiReader = api

	endpoints := func() int {
		n := 0
		for _, g := range h.export().Endpoints {
			n += len(g.Endpoints)
		}
		return n
	}
	h.sync()
	if n := endpoints(); n != 3 || lists != 1 {
		t.Fatalf("%d endpoints exported after %d lists of the API server; want 3 after 1", n, lists)
	}
	h.sync()
	if lists != 1 {
		t.Errorf("the same thinned slice was read again: %d lists", lists)
	}

	// The ServiceExport goes: nothing fetched is kept.
	if err := h.client.Delete(t.Context(), serviceExportOf(t0)); err != nil {
		t.Fatal(err)
	}
	h.sync()
	if len(h.w.fetched.services) != 0 {
		t.Errorf("fetched slices kept after the export went: %v", h.w.fetched.services)
	}
}

// TestFetchedFollowsTheCache: a thinned slice is read again once the cache
// holds another resourceVersion of it, and left out once the API server no
// longer holds it; what the cache holds whole is taken from the cache.
func TestFetchedFollowsTheCache(t *testing.T) {
	t0 := time.Now().Truncate(time.Second)
	lists := 0
	api := fake.NewClientBuilder().WithObjects(slice("web-a", t0, "10.0.0.1")).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lists++
			return c.List(ctx, list, opts...)
		},
	}).Build()
	e := NewExportedNames()
	cached := func() discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{}
		if err := api.Get(t.Context(), types.NamespacedName{Namespace: "ns", Name: "web-a"}, s); err != nil {
			t.Fatal(err)
		}
		thin, _ := e.thinSlice(s)
		return *thin.(*discoveryv1.EndpointSlice)
	}
	f := newFetched()
	whole := func(items ...discoveryv1.EndpointSlice) []string {
		t.Helper()
		out, err := f.whole(t.Context(), api, webKey, items)
		if err != nil {
			t.Fatal(err)
		}
		var addresses []string
		for _, s := range out {
			for _, ep := range s.Endpoints {
				addresses = append(addresses, ep.Addresses[0])
			}
		}
		return addresses
	}

	a := cached()
	if got := whole(a); len(got) != 1 || lists != 1 {
		t.Fatalf("%v after %d lists, want 10.0.0.1 after 1", got, lists)
	}
	b := *slice("web-b", t0, "10.0.0.9") // whole in the cache
	if got := whole(a, b); len(got) != 2 || lists != 1 {
		t.Errorf("%v after %d lists, want 10.0.0.1 and the cache's 10.0.0.9 after 1", got, lists)
	}

	live := &discoveryv1.EndpointSlice{}
	if err := api.Get(t.Context(), client.ObjectKeyFromObject(&a), live); err != nil {
		t.Fatal(err)
	}
	live.Endpoints[0].Addresses = []string{"10.0.0.2"}
	if err := api.Update(t.Context(), live); err != nil {
		t.Fatal(err)
	}
	if got := whole(cached()); len(got) != 1 || got[0] != "10.0.0.2" || lists != 2 {
		t.Errorf("%v after %d lists once the cache holds a newer version, want 10.0.0.2 after 2", got, lists)
	}

	stale := cached()
	if err := api.Delete(t.Context(), live); err != nil {
		t.Fatal(err)
	}
	stale.ResourceVersion = "1" // a version never fetched; its deletion is on its way to the cache
	if got := whole(stale); len(got) != 0 || lists != 3 {
		t.Errorf("%v after %d lists once the API server no longer holds the slice, want none after 3", got, lists)
	}
	if len(f.services) != 0 {
		t.Errorf("kept %v of a Service whose thinned slices are gone", f.services)
	}
}

// TestThinService: a Service that was never exported keeps its identity,
// labels and owners only, and is marked; an exported one, and a derived
// one (controlled by a ServiceImport: the import side reads it), stay
// whole.
func TestThinService(t *testing.T) {
	e := NewExportedNames()
	labelled := service(func(s *corev1.Service) {
		s.UID, s.ResourceVersion, s.Labels = "u1", "7", map[string]string{"app": "web"}
		s.Annotations = map[string]string{"note": "long"}
	})
	got, err := e.thinService(labelled)
	svc := got.(*corev1.Service)
	if err != nil || !serviceThinned(svc) || len(svc.Spec.Ports) != 0 || svc.Spec.ClusterIP != "" ||
		svc.Name != "web" || svc.Namespace != "ns" || svc.UID != "u1" || svc.ResourceVersion != "7" || svc.Labels["app"] != "web" || svc.Annotations["note"] != "" {
		t.Fatalf("a Service not exported: %v, %+v", err, svc)
	}

	derived := service(func(s *corev1.Service) {
		s.Name = "derived-web"
		s.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(&mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "si"}},
			mcsv1beta1.SchemeGroupVersion.WithKind("ServiceImport"))}
	})
	if got, _ := e.thinService(derived); serviceThinned(got.(*corev1.Service)) || len(got.(*corev1.Service).Spec.Ports) != 1 {
		t.Errorf("a derived Service was thinned: %+v", got)
	}

	if _, err := e.noteExport(serviceExportOf(time.Now())); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.thinService(service(nil)); serviceThinned(got.(*corev1.Service)) || len(got.(*corev1.Service).Spec.Ports) != 1 {
		t.Errorf("an exported Service was thinned: %+v", got)
	}
}

// TestUnitThinnedServiceIsRead: a Service exported after the cache held it
// thinned is exported with its spec, read from the API server once; a
// newer resourceVersion in the cache is read again; a Service the API
// server no longer holds makes the export invalid (NoService), as a
// missing one does.
func TestUnitThinnedServiceIsRead(t *testing.T) {
	t0 := time.Now().Add(-time.Minute).Truncate(time.Second)
	gets := 0
	api := fake.NewClientBuilder().WithObjects(service(nil)).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Service); ok {
				gets++
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	live := &corev1.Service{}
	if err := api.Get(t.Context(), webKey, live); err != nil {
		t.Fatal(err)
	}
	gets = 0
	e := NewExportedNames()
	thin, _ := e.thinService(live.DeepCopy())
	h := newUnitHarness(t, serviceExportOf(t0), thin.(*corev1.Service), slice("web-a", t0, "10.0.0.1"))
	h.w.apiReader = api

	h.sync()
	if es := h.export(); es == nil || len(es.Spec.Ports) != 1 || es.Spec.Ports[0].Port != 80 || gets != 1 {
		t.Fatalf("export %+v after %d reads of the API server; want port 80 after 1", es, gets)
	}
	h.sync()
	if gets != 1 {
		t.Errorf("the same thinned Service was read again: %d reads", gets)
	}

	// A newer version, still thinned in the cache (the transform ran
	// before the ServiceExport was seen): read again.
	live.Spec.Ports[0].Port = 81
	if err := api.Update(t.Context(), live); err != nil {
		t.Fatal(err)
	}
	cached := &corev1.Service{}
	if err := h.client.Get(t.Context(), webKey, cached); err != nil {
		t.Fatal(err)
	}
	cached.ResourceVersion = ""
	cached.Annotations = map[string]string{SpecDroppedAnnotation: "true", "bump": "1"}
	if err := h.client.Update(t.Context(), cached); err != nil {
		t.Fatal(err)
	}
	h.sync()
	if es := h.export(); es == nil || es.Spec.Ports[0].Port != 81 || gets != 2 {
		t.Errorf("export %+v after %d reads; want port 81 after 2", es, gets)
	}

	// Gone from the API server, its deletion not yet in the cache.
	if err := api.Delete(t.Context(), live); err != nil {
		t.Fatal(err)
	}
	if err := h.client.Get(t.Context(), webKey, cached); err != nil {
		t.Fatal(err)
	}
	cached.Annotations["bump"] = "2"
	if err := h.client.Update(t.Context(), cached); err != nil {
		t.Fatal(err)
	}
	h.sync()
	if es := h.export(); es != nil {
		t.Errorf("exported %+v after the API server lost its Service", es)
	}
	if len(h.w.fetched.specs) != 0 {
		t.Errorf("kept %v of a Service the API server no longer holds", h.w.fetched.specs)
	}
}
