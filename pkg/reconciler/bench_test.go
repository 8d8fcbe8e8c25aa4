package reconciler

import (
	"context"
	"fmt"
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
// 100. One slice is updated; every other is still read and compared.
func BenchmarkPlanOneEndpointChange(b *testing.B) {
	for _, n := range []int{100, 10000, 50000} {
		b.Run(fmt.Sprintf("endpoints=%d", n), func(b *testing.B) {
			svc := service()
			client := reconcilertest.NewClientset()
			r, _ := New(client.DiscoveryV1(), "bench")
			desired := GroupSlices(reconcilertest.ServiceSlices(svc.Namespace, svc.Name, n, 100))
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
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				// The plan is not applied: the existing slices stay as
				// written, and the endpoint differs from them every time.
				desired[0].Endpoints[0].Conditions.Ready = []*bool{ptr.To(false), nil}[i%2]
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
