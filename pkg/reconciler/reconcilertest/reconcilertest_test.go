package reconcilertest_test

import (
	"context"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/reconcilertest"
)

func slice(generateName string, ips ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{GenerateName: generateName, Namespace: "ns", Labels: map[string]string{"a": "1"}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}})
	}
	return s
}

// TestWritesBehaveAsTheAPIServer: names from generateName, UID and
// generation on create; generation bumped by spec and label changes only;
// stale resourceVersions and UID preconditions refused; writes recorded.
func TestWritesBehaveAsTheAPIServer(t *testing.T) {
	ctx := context.Background()
	c := reconcilertest.NewClientset()
	api := c.DiscoveryV1().EndpointSlices("ns")
	a, err := api.Create(ctx, slice("web-", "10.0.0.1"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := api.Create(ctx, slice("web-", "10.0.0.2"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Name == b.Name || a.Name[:4] != "web-" || a.UID == "" || a.UID == b.UID || a.Generation != 1 || a.ResourceVersion == "" {
		t.Fatalf("created %s (uid %s, generation %d, rv %q) and %s (uid %s)", a.Name, a.UID, a.Generation, a.ResourceVersion, b.Name, b.UID)
	}
	if _, err := api.Create(ctx, slice(""), metav1.CreateOptions{}); !apierrors.IsBadRequest(err) {
		t.Errorf("a create with neither name nor generateName: %v, want BadRequest", err)
	}

	annotated := a.DeepCopy()
	annotated.Annotations = map[string]string{"note": "x"}
	annotated, err = api.Update(ctx, annotated, metav1.UpdateOptions{})
	if err != nil || annotated.Generation != 1 || annotated.ResourceVersion == a.ResourceVersion {
		t.Fatalf("an annotation's update: generation %d, rv %q (was %q), %v; want generation 1 and a new rv", annotated.Generation, annotated.ResourceVersion, a.ResourceVersion, err)
	}
	relabelled := annotated.DeepCopy()
	relabelled.Labels["a"] = "2"
	if relabelled, err = api.Update(ctx, relabelled, metav1.UpdateOptions{}); err != nil || relabelled.Generation != 2 {
		t.Fatalf("a label's update: generation %d, %v; want 2", relabelled.Generation, err)
	}
	moved := relabelled.DeepCopy()
	moved.Endpoints[0].Conditions.Ready = ptr.To(false)
	if moved, err = api.Update(ctx, moved, metav1.UpdateOptions{}); err != nil || moved.Generation != 3 {
		t.Fatalf("an endpoint's update: generation %d, %v; want 3", moved.Generation, err)
	}
	if _, err := api.Update(ctx, a, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("an update from a stale resourceVersion: %v, want Conflict", err)
	}
	other := types.UID("another")
	if err := api.Delete(ctx, a.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &other}}); !apierrors.IsConflict(err) {
		t.Errorf("a delete with another UID's precondition: %v, want Conflict", err)
	}
	if err := api.Delete(ctx, a.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &a.UID}}); err != nil {
		t.Fatal(err)
	}

	held, err := c.Slices(ctx, "ns")
	if err != nil || len(held) != 1 || held[0].Name != b.Name {
		t.Fatalf("held %v, %v; want only %s", held, err, b.Name)
	}
	var got []string
	for _, w := range c.Writes() {
		got = append(got, w.String())
	}
	want := []string{"create ns/" + a.Name, "create ns/" + b.Name, "update ns/" + a.Name, "update ns/" + a.Name, "update ns/" + a.Name, "delete ns/" + a.Name}
	if len(got) != len(want) {
		t.Fatalf("writes %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("writes %v, want %v", got, want)
		}
	}
	c.ClearWrites()
	if w := c.Writes(); len(w) != 0 {
		t.Errorf("after ClearWrites: %v", w)
	}
}
