package reconciler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/reconcilertest"
)

// BenchmarkCreate10000 reconciles a Service with 10,000 pods from no
// slices: the conversion from pods and the plan and writes into a fake
// clientset. bench/ compares the same with the upstream reconciler.
func BenchmarkCreate10000(b *testing.B) {
	svc, pods := service(), readyPods(10000)
	b.ReportAllocs()
	for b.Loop() {
		client := reconcilertest.NewClientset()
		r, _ := New(client.DiscoveryV1(), "bench")
		desired, types, _ := DesiredFromServicePods(svc, pods, defaultNodes)
		if err := r.Reconcile(context.Background(), Input{Owner: svc, OwnerGVK: serviceGVK, Desired: desired, AddressTypes: types, Labeler: ServiceLabels{svc}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlan10000 plans the same without writing: the reconciler's own
// cost.
func BenchmarkPlan10000(b *testing.B) {
	svc, pods := service(), readyPods(10000)
	r, _ := New(reconcilertest.NewClientset().DiscoveryV1(), "bench")
	b.ReportAllocs()
	for b.Loop() {
		desired, types, _ := DesiredFromServicePods(svc, pods, defaultNodes)
		if _, err := r.Plan(Input{Owner: svc, OwnerGVK: serviceGVK, Desired: desired, AddressTypes: types, Labeler: ServiceLabels{svc}}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlanOneEndpointChange plans the slices of a Service of n
// endpoints, written in slices of 100 before, after one endpoint's
// readiness changed (the plan is not applied): the reconciler's own cost
// of a change, which issue 56 wants no larger at 50,000 than twice that at
// 100. One slice is updated. Each change is a new desired array sharing
// the unchanged endpoints with the last (as the export watcher's
// SliceGrouper gives them); with incremental plans, only the changed
// endpoint and its slice are read, without, every slice is read and
// compared. ",runs": the desired groups in runs, each version sharing
// every run but the changed one with the last, as a SliceGrouper with
// MaxRun gives them.
func BenchmarkPlanOneEndpointChange(b *testing.B) {
	for _, mode := range []struct{ incremental, runs bool }{{false, false}, {true, false}, {true, true}} {
		incremental := mode.incremental
		for _, n := range []int{100, 10000, 50000} {
			name := fmt.Sprintf("incremental=%v/endpoints=%d", incremental, n)
			if mode.runs {
				name = fmt.Sprintf("incremental=%v,runs/endpoints=%d", incremental, n)
			}
			b.Run(name, func(b *testing.B) {
				svc := service()
				client := reconcilertest.NewClientset()
				var opts []Option
				if incremental {
					opts = append(opts, WithIncrementalPlans(1))
				}
				r, _ := New(client.DiscoveryV1(), "bench", opts...)
				items := reconcilertest.ServiceSlices(svc.Namespace, svc.Name, n, 100)
				grouper := SliceGrouper{MaxRun: 200}
				desired := GroupSlices(items)
				if mode.runs {
					desired = grouper.Group(items)
				}
				in := Input{Owner: svc, OwnerGVK: serviceGVK, Desired: desired, AddressTypes: []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4}, Labeler: ServiceLabels{svc}}
				if err := r.Reconcile(context.Background(), in); err != nil {
					b.Fatal(err)
				}
				written, err := client.Slices(context.Background(), svc.Namespace)
				if err != nil {
					b.Fatal(err)
				}
				for i := range written {
					in.Existing = append(in.Existing, written[i].DeepCopy()) // as an informer holds them, apart from desired
				}
				// In another order for each call, as an informer's index
				// lists them (a map's).
				var orders [2][]*discoveryv1.EndpointSlice
				for o := range orders {
					orders[o] = slices.Clone(in.Existing)
					rand.New(rand.NewPCG(uint64(o), 56)).Shuffle(len(orders[o]), func(i, j int) {
						orders[o][i], orders[o][j] = orders[o][j], orders[o][i]
					})
				}
				// Two versions that differ from the written slices, and
				// from each other, in one endpoint's readiness.
				var versions [2][]EndpointGroup
				for v, ready := range []*bool{ptr.To(false), nil} {
					if mode.runs {
						changed := items[len(items)/2].DeepCopy()
						changed.ResourceVersion = fmt.Sprint(v + 2)
						changed.Endpoints[0].Conditions.Ready = ready
						items[len(items)/2] = *changed
						versions[v] = grouper.Group(items)
						continue
					}
					versions[v] = []EndpointGroup{{AddressType: desired[0].AddressType, Ports: desired[0].Ports, Endpoints: slices.Clone(desired[0].Endpoints)}}
					versions[v][0].Endpoints[n/2].Conditions.Ready = ready
				}
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					// The plan is not applied: the existing slices stay
					// as written.
					in.Desired, in.Existing = versions[i%2], orders[i%2]
					plan, err := r.Plan(in)
					if err != nil {
						b.Fatal(err)
					}
					if len(plan.Update) != 1 || len(plan.Create)+len(plan.Delete) != 0 {
						b.Fatalf("%d updates, %d creates, %d deletes", len(plan.Update), len(plan.Create), len(plan.Delete))
					}
				}
			})
		}
	}
}
