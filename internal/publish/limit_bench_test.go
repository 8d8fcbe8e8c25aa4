package publish

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// BenchmarkReaderAtLimit measures what a reader holds of one member at
// DefaultMaxObjectsPerMember, in two shapes: 1,000 exports of a head and
// four parts of 100 endpoints each (400,000 endpoints), and 2,500 exports
// of a head and one part of 10 endpoints (25,000 endpoints: the shape of
// the 255-member hub load's), as the reader and the Store hold them after
// reading, and apart (objects-MiB) the publications as Go objects, which
// the informer holds besides. It reports the reader's heap per held object
// and per endpoint (docs/benchmarks.md).
func BenchmarkReaderAtLimit(b *testing.B) {
	for _, shape := range []struct{ partsPerExport, perPart int }{{4, 100}, {1, 10}} {
		b.Run(fmt.Sprintf("parts=%d/endpoints=%d", shape.partsPerExport, shape.perPart), func(b *testing.B) {
			benchmarkReaderAtLimit(b, shape.partsPerExport, shape.perPart)
		})
	}
}

func benchmarkReaderAtLimit(b *testing.B, partsPerExport, perPart int) {
	exports := DefaultMaxObjectsPerMember / (1 + partsPerExport)
	var start runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&start)
	var pubs []*v1alpha1.PublishedExport
	for e := range exports {
		es := export()
		es.Key = types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("web-%d", e)}
		es.Endpoints = nil
		pubs = append(pubs, Encode(es, "mcs-system"))
		for p := range partsPerExport {
			g := v1alpha1.EndpointGroup{AddressType: discoveryv1.AddressTypeIPv4, Ports: export().Endpoints[0].Ports}
			for i := range perPart {
				n := (e*partsPerExport+p)*perPart + i
				g.Endpoints = append(g.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", n>>16&255, n>>8&255, n&255)},
					Conditions: export().Endpoints[0].Endpoints[0].Conditions, NodeName: export().Endpoints[0].Endpoints[0].NodeName})
			}
			pubs = append(pubs, encodePart("east", es.Key, "mcs-system", strconv.Itoa(p), []v1alpha1.EndpointGroup{g}))
		}
	}
	runtime.GC()
	var built runtime.MemStats
	runtime.ReadMemStats(&built)
	objects := float64(built.HeapAlloc) - float64(start.HeapAlloc)
	var heap, counted float64
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		store := clusterset.NewStore()
		r := newReader("east", store, nil, nil)
		for _, p := range pubs {
			r.put(p)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if r.held != len(pubs) || store.Count("east") != exports {
			b.Fatalf("held %d of %d objects, %d exports in the Store", r.held, len(pubs), store.Count("east"))
		}
		heap = float64(after.HeapAlloc) - float64(before.HeapAlloc)
		counted = float64(r.bytes)
		runtime.KeepAlive(r)
	}
	b.ReportMetric(heap/float64(len(pubs)), "heap-B/object")
	b.ReportMetric(heap/float64(exports*partsPerExport*perPart), "heap-B/endpoint")
	b.ReportMetric(heap/(1<<20), "heap-MiB")
	// The publications as Go objects, as an informer holds them besides.
	b.ReportMetric(objects/(1<<20), "objects-MiB")
	// What --max-publication-bytes-per-member counts of them (its default is 128Mi).
	b.ReportMetric(counted/(1<<20), "counted-MiB")
}
