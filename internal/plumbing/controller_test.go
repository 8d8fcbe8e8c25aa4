package plumbing

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestEnqueueEveryListsEachTime(t *testing.T) {
	svc := func(name string, labels map[string]string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name, Labels: labels}}
	}
	ours := map[string]string{"managed": "yes"}
	cl := fake.NewClientBuilder().WithObjects(svc("a", ours), svc("b", nil)).Build()
	every := EnqueueEvery(cl, &corev1.ServiceList{}, "Services", "east", client.MatchingLabels(ours))
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	drain := func() []string {
		var got []string
		for q.Len() > 0 {
			r, _ := q.Get()
			got = append(got, r.String())
			q.Done(r)
		}
		slices.Sort(got)
		return got
	}
	every(context.Background(), q)
	if got := drain(); !slices.Equal(got, []string{"demo/a"}) {
		t.Fatalf("enqueued %v, want the one the options select", got)
	}
	if err := cl.Create(context.Background(), svc("c", ours)); err != nil {
		t.Fatal(err)
	}
	every(context.Background(), q)
	if got := drain(); !slices.Equal(got, []string{"demo/a", "demo/c"}) {
		t.Fatalf("enqueued %v the second time: a call lists again", got)
	}
}
