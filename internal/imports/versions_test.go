package imports

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcs-syncer/mcs-syncer/internal/mcsapi"
)

// TestConsumerOnV1alpha1: a consumer whose CRDs serve v1alpha1 only (mcs-api
// before v0.5.0) gets its import as one that serves v1beta1 does, and the
// derived Service and slices name their owner in the version it serves,
// so that its garbage collector can find it. A derived Service owned
// under the other version (written before the CRD was rolled back) is
// still mcs-syncer's: its owner is rewritten once, then left alone.
func TestConsumerOnV1alpha1(t *testing.T) {
	h := newHarnessOn(t, mcsapi.V1alpha1, Options{})
	h.put(h.export("east", 0, "10.1.0.1"))
	h.reconcile()
	si := h.serviceImport()
	svc := &corev1.Service{}
	if err := h.client.Get(t.Context(), derivedKey(), svc); err != nil {
		t.Fatal(err)
	}
	owner := metav1.GetControllerOf(svc)
	if owner == nil || owner.APIVersion != mcsapi.V1alpha1.String() || owner.UID != si.UID {
		t.Fatalf("derived Service's owner %+v, want the ServiceImport in v1alpha1", owner)
	}
	var slices discoveryv1.EndpointSliceList
	if err := h.client.List(t.Context(), &slices, client.InNamespace("ns")); err != nil {
		t.Fatal(err)
	}
	if len(slices.Items) != 1 {
		t.Fatalf("%d slices, want 1", len(slices.Items))
	}
	if ref := metav1.GetControllerOf(&slices.Items[0]); ref == nil || ref.APIVersion != mcsapi.V1alpha1.String() || ref.UID != si.UID {
		t.Errorf("slice's owner %+v, want the ServiceImport in v1alpha1", ref)
	}

	// The CRD was v1beta1 when the derived Service was written.
	svc.OwnerReferences[0].APIVersion = mcsapi.V1beta1.String()
	if err := h.client.Update(t.Context(), svc); err != nil {
		t.Fatal(err)
	}
	h.takeWrites()
	h.reconcile()
	if got := h.takeWrites(); len(got) != 1 || got[0] != "update Service ns/"+DerivedServiceName(key) {
		t.Errorf("writes %v, want the derived Service's owner rewritten", got)
	}
	h.reconcile()
	if got := h.takeWrites(); len(got) != 0 {
		t.Errorf("a second reconcile wrote %v", got)
	}
}
