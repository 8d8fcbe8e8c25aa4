// Package examplestest holds what the examples' unit tests share: a fake
// clientset that gives generateName objects a name, as the API server
// does, and a poll for a namespace's EndpointSlices.
package examplestest

import (
	"context"
	"fmt"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Clientset returns a fake clientset holding objs whose EndpointSlice
// creates with only a generateName get a name (the fake has no
// generateName of its own: a second create would clash on "").
func Clientset(objs ...runtime.Object) *fake.Clientset {
	client := fake.NewClientset(objs...)
	named := 0
	client.PrependReactor("create", "endpointslices", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if s := a.(k8stesting.CreateAction).GetObject().(*discoveryv1.EndpointSlice); s.Name == "" {
			named++
			s.Name = fmt.Sprintf("%s%d", s.GenerateName, named)
		}
		return false, nil, nil
	})
	return client
}

// WaitSlices polls, for up to 10 s, until the EndpointSlices of namespace
// that match selector (a label selector, "" for all) satisfy ok, and
// returns them; it fails t with the last ones seen otherwise.
func WaitSlices(t testing.TB, client *fake.Clientset, namespace, selector string, ok func([]discoveryv1.EndpointSlice) bool) []discoveryv1.EndpointSlice {
	t.Helper()
	var got []discoveryv1.EndpointSlice
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := client.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		got = list.Items
		return ok(got), nil
	})
	if err != nil {
		t.Fatalf("EndpointSlices of %s (%q): %v; last seen %+v", namespace, selector, err, got)
	}
	return got
}
