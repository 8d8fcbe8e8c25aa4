package imports

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	discoveryclient "k8s.io/client-go/kubernetes/typed/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/reconcilertest"
)

// BenchmarkReconcileOneSourceChanged is the importer's work under make
// bench-scale's hub load: an import of many sources (10 endpoints each),
// one of which changes per reconcile. What a reconcile costs beyond
// planning and writing that one source's slice is work that grows with
// the import's sources, and it bounds the change latency at 1,000
// members. The imported slices are read as the informer's index gives
// them (shared objects, no list); the ServiceImport, its derived Service
// and the namespace come from the fake client, a cost that does not grow
// with the sources.
func BenchmarkReconcileOneSourceChanged(b *testing.B) {
	for _, sources := range []int{252, 1000} {
		b.Run(fmt.Sprintf("sources=%d", sources), func(b *testing.B) {
			// With the metrics a process keeps: a reconcile sets gauges
			// per source.
			m, err := NewMetrics(prometheus.NewRegistry())
			if err != nil {
				b.Fatal(err)
			}
			h := newHarness(b, Options{Metrics: m})
			current := make([]*clusterset.ExportedService, sources)
			other := make([]*clusterset.ExportedService, sources) // each source's other version
			h.members.ids = []clusterset.ClusterID{"north"}
			for i := range current {
				id := fmt.Sprintf("m%04d", i)
				h.members.ids = append(h.members.ids, clusterset.ClusterID(id))
				addrs := make([]string, 10)
				for j := range addrs {
					addrs[j] = fmt.Sprintf("10.%d.%d.%d", 100+i/250, i%250, j)
				}
				current[i] = h.export(id, 1, addrs...)
				other[i] = h.export(id, 1, append(slices.Clone(addrs[1:]), fmt.Sprintf("10.99.%d.%d", i/250, i%250))...)
			}
			held := h.withHeldIndex()
			h.put(current...)
			h.reconcile()
			if n := held.count(); n != sources {
				b.Fatalf("%d imported slices after the first reconcile, want %d", n, sources)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				s := i % sources
				current[s], other[s] = other[s], current[s]
				h.store.Put(current[s])
				h.reconcile()
			}
			b.StopTimer()
			if n := held.count(); n != sources {
				b.Fatalf("%d imported slices, want %d", n, sources)
			}
			// Every change was written: a reconcile that skipped the
			// changed source would look fast and be wrong.
			for i, es := range current {
				if got, want := held.addressesFrom(es.Cluster), endpointAddresses(es); !slices.Equal(got, want) {
					b.Fatalf("source %d holds %v, its export %v", i, got, want)
				}
			}
		})
	}
}

// withHeldIndex gives the harness a controller that reads and writes its
// imported slices through a heldIndex, with its members all up (looked
// up in a set, as the Membership of a process does, not the harness's
// list), and returns the index.
func (h *harness) withHeldIndex() *heldIndex {
	held, opts := newHeldIndex(), h.c.opts
	opts.Membership = allUp(h.members.ids)
	c, err := newController(h.client, held, held, nil, opts)
	if err != nil {
		h.t.Fatal(err)
	}
	h.c = c
	return held
}

// allUp is a Membership whose members are all up.
type allUp []clusterset.ClusterID

func (m allUp) IDs() []clusterset.ClusterID { return slices.Clone(m) }

// Changes is never closed: the members never change.
func (m allUp) Changes() <-chan struct{} { return nil }

func (m allUp) Health(clusterset.ClusterID) clusterset.Health {
	return clusterset.Health{Up: true, Answering: true}
}

// heldIndex stands for the informer's index and the API server at once:
// what the reconciler writes is held at once, as shared objects, the way
// indexedSlices gives the informer's.
type heldIndex struct {
	mu     sync.Mutex
	byName map[types.NamespacedName]*discoveryv1.EndpointSlice
	rv     int
}

func newHeldIndex() *heldIndex {
	return &heldIndex{byName: map[types.NamespacedName]*discoveryv1.EndpointSlice{}}
}

func (x *heldIndex) count() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.byName)
}

// addressesFrom returns the addresses of source's held slices, sorted.
func (x *heldIndex) addressesFrom(source clusterset.ClusterID) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []string
	for _, s := range x.byName {
		if sourceOf(s) == source {
			for _, ep := range s.Endpoints {
				out = append(out, ep.Addresses...)
			}
		}
	}
	slices.Sort(out)
	return out
}

// endpointAddresses returns the addresses of an export's endpoints, sorted.
func endpointAddresses(es *clusterset.ExportedService) []string {
	var out []string
	for _, g := range es.Endpoints {
		for _, ep := range g.Endpoints {
			out = append(out, ep.Addresses...)
		}
	}
	slices.Sort(out)
	return out
}

func (x *heldIndex) of(_ context.Context, key types.NamespacedName) ([]*discoveryv1.EndpointSlice, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]*discoveryv1.EndpointSlice, 0, len(x.byName))
	for _, s := range x.byName {
		if s.Namespace == key.Namespace && importedSliceKey(s)[0] == key.Name {
			out = append(out, s)
		}
	}
	return out, nil
}

func (x *heldIndex) EndpointSlices(ns string) discoveryclient.EndpointSliceInterface {
	return &heldNamespace{x: x, ns: ns}
}

type heldNamespace struct {
	discoveryclient.EndpointSliceInterface // only the methods below are used
	x                                      *heldIndex
	ns                                     string
}

func (n *heldNamespace) store(es *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	n.x.mu.Lock()
	defer n.x.mu.Unlock()
	es = es.DeepCopy()
	es.Namespace = n.ns
	n.x.rv++
	if es.Name == "" {
		es.Name = fmt.Sprintf("%s%d", es.GenerateName, n.x.rv)
	}
	if es.UID == "" {
		es.UID = uuid.NewUUID()
	}
	es.ResourceVersion = fmt.Sprint(n.x.rv)
	n.x.byName[types.NamespacedName{Namespace: n.ns, Name: es.Name}] = es
	return es.DeepCopy()
}

func (n *heldNamespace) Create(_ context.Context, es *discoveryv1.EndpointSlice, _ metav1.CreateOptions) (*discoveryv1.EndpointSlice, error) {
	return n.store(es), nil
}

func (n *heldNamespace) Update(_ context.Context, es *discoveryv1.EndpointSlice, _ metav1.UpdateOptions) (*discoveryv1.EndpointSlice, error) {
	return n.store(es), nil
}

func (n *heldNamespace) Delete(_ context.Context, name string, _ metav1.DeleteOptions) error {
	n.x.mu.Lock()
	defer n.x.mu.Unlock()
	delete(n.x.byName, types.NamespacedName{Namespace: n.ns, Name: name})
	return nil
}

// BenchmarkImportOneEndpointChange is the importer's work for one
// endpoint's change of a Service of n endpoints from one source: plan
// and write its imported slices (issue 56: at 50,000, no more than twice
// the cost at 100). The slices are read as the informer's index gives
// them; the write of the one changed slice is the held index's.
func BenchmarkImportOneEndpointChange(b *testing.B) {
	for _, n := range []int{100, 10000, 50000} {
		b.Run(fmt.Sprintf("endpoints=%d", n), func(b *testing.B) {
			h := newHarness(b, Options{})
			addrs := make([]string, n)
			for i := range addrs {
				addrs[i] = fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
			}
			// In runs, the second version sharing every run but the
			// changed one with the first, as the export watcher's
			// SliceGrouper gives them.
			first := h.export("east", 1, addrs...)
			g := first.Endpoints[0]
			items := reconcilertest.SlicesOf("ns", "web", g.AddressType, g.Ports, g.Endpoints, 100)
			grouper := reconciler.SliceGrouper{MaxRun: 200}
			first.Endpoints = grouper.Group(items)
			changed := items[len(items)/2].DeepCopy()
			changed.ResourceVersion = "2"
			changed.Endpoints[0].Conditions.Ready = ptr.To(false)
			items[len(items)/2] = *changed
			second := *first
			second.Endpoints = grouper.Group(items)
			versions := [2]*clusterset.ExportedService{first, &second}
			held := h.withHeldIndex()
			h.put(versions[0])
			h.reconcile()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				h.store.Put(versions[(i+1)%2])
				h.reconcile()
			}
			b.StopTimer()
			if got := held.addressesFrom("east"); len(got) != n {
				b.Fatalf("%d endpoints imported, want %d", len(got), n)
			}
		})
	}
}
