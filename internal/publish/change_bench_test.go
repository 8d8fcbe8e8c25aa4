package publish

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/reconcilertest"
)

// changeSizes are the endpoints per Service that issue 56's benchmarks of
// one endpoint's change run at: the cost at 50,000 should be no more than
// twice that at 100.
var changeSizes = []int{100, 10000, 50000}

// twoVersions returns an export of n endpoints and the same with one
// endpoint not ready: a change of one endpoint, back and forth. Its IPv4
// group is in runs, and the second shares every run but the changed one
// with the first, as the export watcher gives them (its
// reconciler.SliceGrouper, with the export's MaxRun).
func twoVersions(n int) [2]*clusterset.ExportedService {
	a := withEndpoints(n - 1)
	v4 := a.Endpoints[0]
	items := reconcilertest.SlicesOf("ns", "web", v4.AddressType, v4.Ports, v4.Endpoints, 100)
	g := reconciler.SliceGrouper{MaxRun: 200}
	a.Endpoints = append(g.Group(items), a.Endpoints[1:]...)
	changed := items[len(items)/2].DeepCopy()
	changed.ResourceVersion = "2"
	changed.Endpoints[0].Conditions.Ready = ptr.To(false)
	items[len(items)/2] = *changed
	b := *a
	b.Endpoints = append(g.Group(items), a.Endpoints[len(a.Endpoints)-1:]...)
	return [2]*clusterset.ExportedService{a, &b}
}

// BenchmarkPublishOneEndpointChange is the publisher's own work for one
// endpoint's change of an export as it is published (whole at 100
// endpoints, in parts above: wholeFits): plan the parts and check what it
// writes (Publisher.prepare), the API calls left out.
func BenchmarkPublishOneEndpointChange(b *testing.B) {
	for _, n := range changeSizes {
		b.Run(fmt.Sprintf("endpoints=%d", n), func(b *testing.B) {
			versions := twoVersions(n)
			p := &Publisher{opts: PublisherOptions{Cluster: "east", Namespace: "mcs-system"}}
			_, parts := EncodeParts(versions[0], "mcs-system", DefaultMaxEndpointsPerPart)
			own := newOwnParts("east") // as the publisher's handler notes the hub's parts
			for _, part := range parts {
				part.UID, part.ResourceVersion = types.UID(part.Name), "1"
				own.note(nil, part)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				want, plan, inParts, refused, ok := p.prepare(versions[(i+1)%2], own.of(webKey))
				if !ok || refused != "" {
					b.Fatalf("change %d: refused (%q)", i, refused)
				}
				if !inParts {
					if len(parts) > 0 || !plan.empty() || len(want.Spec.Endpoints) == 0 {
						b.Fatalf("change %d: published whole over %d parts", i, len(parts))
					}
					continue
				}
				if len(plan.update) != 1 || len(plan.create)+len(plan.remove) != 0 {
					b.Fatalf("change %d: %d creates, %d updates, %d removals", i, len(plan.create), len(plan.update), len(plan.remove))
				}
				// As the hub returns it: the API server's work, not the
				// publisher's, so not counted.
				b.StopTimer()
				written := plan.update[0].DeepCopy()
				written.ResourceVersion = strconv.Itoa(i + 2)
				own.note(own.byExport[webKey][written.Name], written)
				b.StartTimer()
			}
		})
	}
}

// BenchmarkReadOneEndpointChange is a reader's work for one rewritten
// object of an export it holds whole (its head at 100 endpoints, a part
// above): decode it and put the export into the Store.
func BenchmarkReadOneEndpointChange(b *testing.B) {
	for _, n := range changeSizes {
		b.Run(fmt.Sprintf("endpoints=%d", n), func(b *testing.B) {
			versions := twoVersions(n)
			head, parts := EncodeParts(versions[0], "mcs-system", DefaultMaxEndpointsPerPart)
			changedHead, changed := EncodeParts(versions[1], "mcs-system", DefaultMaxEndpointsPerPart)
			pair := [2]*v1alpha1.PublishedExport{head, changedHead}
			for i := range parts {
				if !equalPart(parts[i], changed[i]) {
					pair = [2]*v1alpha1.PublishedExport{parts[i], changed[i]}
				}
			}
			store := clusterset.NewStore()
			r := newReader("east", store, nil, nil)
			for _, part := range parts {
				r.put(part)
			}
			r.put(head)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				r.put(pair[(i+1)%2])
			}
			b.StopTimer()
			if got := store.GetFrom(webKey, "east").EndpointCount(); got != n {
				b.Fatalf("the reader holds %d endpoints, want %d", got, n)
			}
		})
	}
}

func equalPart(a, b *v1alpha1.PublishedExport) bool {
	ea, eb := a.Spec.Endpoints[0].Endpoints, b.Spec.Endpoints[0].Endpoints
	return len(ea) == len(eb) && !slices.ContainsFunc(ea, func(e discoveryv1.Endpoint) bool {
		i := slices.IndexFunc(eb, func(f discoveryv1.Endpoint) bool { return f.Addresses[0] == e.Addresses[0] })
		return i < 0 || !reconciler.EndpointEqual(&e, &eb[i])
	})
}

// BenchmarkReaderFollowsAGrowingExport: a reader following an export that
// grows from 100 to n endpoints one part at a time, as a consumer does
// while a Service of n endpoints comes up in the member (the sizes
// phase's import): each step is the part written and the head naming it.
// Issue 56: a part added merged every endpoint anew, O(n²) over the
// import.
func BenchmarkReaderFollowsAGrowingExport(b *testing.B) {
	for _, n := range []int{10000, 50000} {
		b.Run(fmt.Sprintf("endpoints=%d", n), func(b *testing.B) {
			es := withEndpoints(n)
			all := es.Endpoints[0].Endpoints
			type step struct{ part, head *v1alpha1.PublishedExport }
			var steps []step
			var existing []*v1alpha1.PublishedExport
			for k := 100; k <= n; k += 100 {
				grown := *es
				grown.Endpoints = []reconciler.EndpointGroup{{AddressType: es.Endpoints[0].AddressType, Ports: es.Endpoints[0].Ports, Endpoints: all[:k:k]}}
				plan := planParts("east", webKey, "mcs-system", "", grown.Endpoints, existing, DefaultMaxEndpointsPerPart)
				if len(plan.create) != 1 || len(plan.update)+len(plan.remove) != 0 {
					b.Fatalf("%d endpoints: %d creates, %d updates, %d removals", k, len(plan.create), len(plan.update), len(plan.remove))
				}
				head := EncodeHead(&grown, "mcs-system")
				head.Spec.Parts = plan.ids
				steps = append(steps, step{plan.create[0], head})
				existing = append(existing, plan.create[0])
			}
			b.ReportAllocs()
			for b.Loop() {
				store := clusterset.NewStore()
				r := newReader("east", store, nil, nil)
				for _, s := range steps {
					r.put(s.part)
					r.put(s.head)
				}
				if got := store.GetFrom(webKey, "east").EndpointCount(); got != n {
					b.Fatalf("%d endpoints, want %d", got, n)
				}
			}
		})
	}
}
