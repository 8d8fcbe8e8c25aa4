package reconciler

import (
	"context"
	"testing"

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
