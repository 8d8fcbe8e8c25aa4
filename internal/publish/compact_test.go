package publish

import (
	"encoding/json"
	"fmt"
	"reflect"
	goruntime "runtime"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// decodedPublication is a publication of n endpoints as a cache receives
// it: JSON, decoded by the scheme's deserializer.
func decodedPublication(t testing.TB, n int) (*v1alpha1.PublishedExport, []byte) {
	g := reconciler.EndpointGroup{AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80)}}}
	for i := range n {
		g.Endpoints = append(g.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.1.0.%d", i)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(i%2 == 0), Serving: ptr.To(true), Terminating: ptr.To(false)},
		})
	}
	es := &clusterset.ExportedService{Cluster: "east", Key: types.NamespacedName{Namespace: "demo", Name: "web"}, Endpoints: []reconciler.EndpointGroup{g}}
	data, err := json.Marshal(Encode(es, "mcs-system"))
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, data), data
}

func decode(t testing.TB, data []byte) *v1alpha1.PublishedExport {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	obj, _, err := serializer.NewCodecFactory(scheme).UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*v1alpha1.PublishedExport)
}

func TestCompactKeepsThePublicationAsItWas(t *testing.T) {
	p, _ := decodedPublication(t, 10)
	want := p.DeepCopy()
	got, err := transform(p)
	if err != nil {
		t.Fatal(err)
	}
	c := got.(*v1alpha1.PublishedExport)
	if !reflect.DeepEqual(c.Spec, want.Spec) {
		t.Fatalf("compacted spec differs:\n%+v\nwant\n%+v", c.Spec, want.Spec)
	}
	g := c.Spec.Endpoints[0]
	if cap(g.Endpoints) > len(g.Endpoints) || cap(g.Endpoints[0].Addresses) != 1 {
		t.Errorf("capacities %d (of %d endpoints), %d (of 1 address): the decoder's spare room kept", cap(g.Endpoints), len(g.Endpoints), cap(g.Endpoints[0].Addresses))
	}
	if g.Endpoints[0].Conditions.Serving != g.Endpoints[1].Conditions.Serving || g.Endpoints[0].Conditions.Ready == g.Endpoints[1].Conditions.Ready {
		t.Errorf("equal conditions do not share one bool, or unequal ones do")
	}
}

// BenchmarkPublicationHeap is the heap a cache holds per endpoint of
// 10-endpoint publications, as decoded and as compacted.
func BenchmarkPublicationHeap(b *testing.B) {
	_, data := decodedPublication(b, 10)
	for _, name := range []string{"decoded", "compacted"} {
		b.Run(name, func(b *testing.B) {
			held := make([]any, 0, b.N)
			var before, after goruntime.MemStats
			goruntime.GC()
			goruntime.ReadMemStats(&before)
			for range b.N {
				var obj any = decode(b, data)
				if name == "compacted" {
					obj, _ = transform(obj)
				}
				held = append(held, obj)
			}
			goruntime.GC()
			goruntime.ReadMemStats(&after)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(10*len(held)), "heap-B/endpoint")
			goruntime.KeepAlive(held)
		})
	}
}
