package imports

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// storeOf returns a Store holding es.
func storeOf(es ...*clusterset.ExportedService) *clusterset.Store {
	s := clusterset.NewStore()
	for _, e := range es {
		s.Put(e)
	}
	return s
}

// exportedEndpoints is an export of web from east: n endpoints as a Pod's.
func exportedEndpoints(n int) *clusterset.ExportedService {
	g := reconciler.EndpointGroup{AddressType: discoveryv1.AddressTypeIPv4}
	for i := range n {
		g.Endpoints = append(g.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.1.0.%d", i)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To("node-a"), Zone: ptr.To("zone-a"),
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "demo", Name: fmt.Sprintf("web-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))},
		})
	}
	return &clusterset.ExportedService{Cluster: "east", Key: types.NamespacedName{Namespace: "demo", Name: "web"}, Endpoints: []reconciler.EndpointGroup{g}}
}

// decoded is an imported slice of web from east holding endpoints, as
// the watch delivers it: decoded from JSON, nothing shared.
func decoded(t testing.TB, endpoints []discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "imported-web-east-abcde", ResourceVersion: "7",
			Labels:        map[string]string{discoveryv1.LabelManagedBy: "mcs", mcsv1beta1.LabelServiceName: "web", mcsv1beta1.LabelSourceCluster: "east"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "mcs-syncer"}},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   endpoints,
	}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := serializer.NewCodecFactory(scheme.Scheme).UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*discoveryv1.EndpointSlice)
}

func transformed(t *testing.T, store Exports, s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	t.Helper()
	obj, err := shareWithStore(store)(s)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*discoveryv1.EndpointSlice)
}

func TestShareWithStoreSharesAWholeGroup(t *testing.T) {
	es := exportedEndpoints(5)
	stored := es.Endpoints[0].Endpoints
	s := transformed(t, storeOf(es), decoded(t, stored))
	if len(s.Endpoints) != 5 || &s.Endpoints[0] != &stored[0] {
		t.Fatalf("the slice holds its source's whole group but not the Store's array")
	}
	if cap(s.Endpoints) != len(s.Endpoints) {
		t.Errorf("cap %d > len %d: an append would write into the Store's array", cap(s.Endpoints), len(s.Endpoints))
	}
	if s.ManagedFields != nil {
		t.Errorf("managedFields kept: the transform must still strip what is never read")
	}
}

func TestShareWithStoreSharesEqualEndpointsOnly(t *testing.T) {
	es := exportedEndpoints(4)
	stored := es.Endpoints[0].Endpoints
	held := []discoveryv1.Endpoint{*stored[1].DeepCopy(), *stored[2].DeepCopy(), *stored[3].DeepCopy()}
	held[0].Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-b"}}} // the import's own
	held[1].Conditions.Ready = ptr.To(false)                                                      // not yet written: differs
	s := transformed(t, storeOf(es), decoded(t, held))

	if &s.Endpoints[0].Addresses[0] != &stored[1].Addresses[0] || s.Endpoints[0].TargetRef != stored[1].TargetRef {
		t.Errorf("an endpoint equal but for its hints does not share the Store's")
	}
	if s.Endpoints[0].Hints == nil || s.Endpoints[0].Hints.ForZones[0].Name != "zone-b" {
		t.Errorf("hints %v: the slice's own hints must be kept", s.Endpoints[0].Hints)
	}
	if s.Endpoints[1].TargetRef == stored[2].TargetRef || *s.Endpoints[1].Conditions.Ready {
		t.Errorf("an endpoint that differs from the Store's was replaced by it")
	}
	if &s.Endpoints[2].Addresses[0] != &stored[3].Addresses[0] {
		t.Errorf("the third endpoint, equal, does not share the Store's")
	}
	if stored[1].Hints != nil {
		t.Errorf("the Store's endpoint got the slice's hints")
	}
}

func TestShareWithStoreLeavesOthersAsDecoded(t *testing.T) {
	east := exportedEndpoints(2)
	west := exportedEndpoints(2)
	west.Cluster = "west"
	elsewhere := exportedEndpoints(2)
	for i := range elsewhere.Endpoints[0].Endpoints {
		elsewhere.Endpoints[0].Endpoints[i].Addresses = []string{fmt.Sprintf("10.9.0.%d", i)}
	}
	for name, store := range map[string]*clusterset.Store{
		"the Store has west's export only":    storeOf(west),
		"east's export holds other addresses": storeOf(east),
	} {
		s := decoded(t, elsewhere.Endpoints[0].Endpoints)
		want := s.DeepCopy()
		want.ManagedFields = nil
		if got := transformed(t, store, s); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the slice changed:\n%+v\nwant\n%+v", name, got, want)
		}
	}
}

// BenchmarkImportedSliceHeap is the heap of the imported slices of an
// import of 10-endpoint Services as the cache holds them, decoded from the
// watch and transformed, in bytes per endpoint.
func BenchmarkImportedSliceHeap(b *testing.B) {
	es := exportedEndpoints(10)
	store := storeOf(es)
	s := decoded(b, es.Endpoints[0].Endpoints)
	data, _ := json.Marshal(s)
	decoder := serializer.NewCodecFactory(scheme.Scheme).UniversalDeserializer()
	for _, name := range []string{"decoded", "shared-with-store"} {
		b.Run(name, func(b *testing.B) {
			held := make([]any, 0, b.N)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for range b.N {
				var obj any
				obj, _, err := decoder.Decode(data, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				if name == "shared-with-store" {
					obj, _ = shareWithStore(store)(obj)
				}
				held = append(held, obj)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(10*len(held)), "heap-B/endpoint")
			runtime.KeepAlive(held)
		})
	}
}

// BenchmarkShareWithStoreOneSlice is the transform's work for one imported
// slice of 100 endpoints (a change of one endpoint writes one) of an export
// of n: at 50,000 it indexed all 50,000 for each slice, and an import of
// 50,000 wrote 500.
func BenchmarkShareWithStoreOneSlice(b *testing.B) {
	for _, n := range []int{100, 10000, 50000} {
		b.Run(fmt.Sprintf("endpoints=%d", n), func(b *testing.B) {
			es := exportedEndpoints(n)
			transform := shareWithStore(storeOf(es))
			var slices []*discoveryv1.EndpointSlice
			for i := 0; i < n; i += 100 {
				slices = append(slices, decoded(b, es.Endpoints[0].Endpoints[i:min(i+100, n)]))
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				s := slices[i%len(slices)].DeepCopy()
				if _, err := transform(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSharesWithTheNextExport: after an export's change of one endpoint's
// conditions (the next export sharing the others, as the export watcher
// gives it), a slice holding the changed endpoint and others shares each
// with the new export (the index followed it where it moved), and after
// an endpoint's removal or addition before them (the index followed
// where the endpoints after it shifted) as well.
func TestSharesWithTheNextExport(t *testing.T) {
	first := exportedEndpoints(1000)
	store := storeOf(first)
	transform := shareWithStore(store)
	if _, err := transform(decoded(t, first.Endpoints[0].Endpoints[500:600])); err != nil {
		t.Fatal(err)
	}
	for step, change := range []func([]discoveryv1.Endpoint) []discoveryv1.Endpoint{
		func(eps []discoveryv1.Endpoint) []discoveryv1.Endpoint {
			eps[550].Conditions.Ready = ptr.To(false)
			return eps
		},
		func(eps []discoveryv1.Endpoint) []discoveryv1.Endpoint { return append(eps[:10:10], eps[11:]...) },
		func(eps []discoveryv1.Endpoint) []discoveryv1.Endpoint {
			return slices.Insert(eps, 20, discoveryv1.Endpoint{Addresses: []string{"10.9.9.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
		},
	} {
		last := store.GetFrom(first.Key, "east")
		next := *last
		next.Endpoints = []reconciler.EndpointGroup{last.Endpoints[0]}
		next.Endpoints[0].Endpoints = change(slices.Clone(last.Endpoints[0].Endpoints))
		store.Put(&next)
		eps := next.Endpoints[0].Endpoints[530:560]
		got, err := transform(decoded(t, eps))
		if err != nil {
			t.Fatal(err)
		}
		for i, ep := range got.(*discoveryv1.EndpointSlice).Endpoints {
			if &ep.Addresses[0] != &eps[i].Addresses[0] {
				t.Errorf("step %d: endpoint %s not shared with the new export", step, ep.Addresses[0])
			}
		}
	}
}

// TestSliceCacheDropsTheTriggerTime: the imported slices' cache holds no
// trigger-time annotation (nothing reads it) and keeps every other
// annotation; the slices the API server holds keep theirs. An import
// reconciled again from that cache writes nothing, and a change of its
// endpoints writes the new trigger time.
func TestSliceCacheDropsTheTriggerTime(t *testing.T) {
	s := decoded(t, exportedEndpoints(1).Endpoints[0].Endpoints)
	s.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: "2026-11-29T10:00:00Z", "team": "blue"}
	if got := transformed(t, storeOf(), s); !maps.Equal(got.Annotations, map[string]string{"team": "blue"}) {
		t.Errorf("cached with annotations %v, want team only", got.Annotations)
	}
	s.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: "2026-11-29T10:00:00Z"}
	if got := transformed(t, storeOf(), s); got.Annotations != nil {
		t.Errorf("cached with annotations %v, want none", got.Annotations)
	}

	h := newHarness(t, Options{})
	triggered := func(at time.Time, ips ...string) *clusterset.ExportedService {
		es := h.export("east", 0, ips...)
		es.LastChangeTriggerTime = at
		return es
	}
	stored := func() map[string]string {
		var list discoveryv1.EndpointSliceList
		if err := h.client.List(t.Context(), &list, client.InNamespace("ns")); err != nil || len(list.Items) != 1 {
			t.Fatalf("%d slices: %v", len(list.Items), err)
		}
		return list.Items[0].Annotations
	}
	at := t0.Add(time.Hour)
	h.put(triggered(at, "10.1.0.1"))
	h.reconcile()
	h.takeWrites()
	for try := range 3 {
		h.reconcile()
		if w := h.takeWrites(); len(w) > 0 {
			t.Fatalf("try %d from the cache without trigger times wrote %q", try, w)
		}
	}
	if got := stored()[corev1.EndpointsLastChangeTriggerTime]; got != at.Format(time.RFC3339Nano) {
		t.Errorf("the API server's slice carries trigger time %q, want %s", got, at.Format(time.RFC3339Nano))
	}
	later := at.Add(time.Minute)
	h.put(triggered(later, "10.1.0.1", "10.1.0.2"))
	h.reconcile()
	if got := stored()[corev1.EndpointsLastChangeTriggerTime]; got != later.Format(time.RFC3339Nano) {
		t.Errorf("after a change the API server's slice carries trigger time %q, want %s", got, later.Format(time.RFC3339Nano))
	}
}
