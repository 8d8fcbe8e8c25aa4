package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/publish"
	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/workloads"
)

// TestOversizedExportAndAnnotations (hub mode): an export that grows to
// 12,000 endpoints (as pods' endpoints are written: one object of the
// form before parts held about 6,300, and etcd refused 7,000) is published
// in parts and imported exactly into north, Ready=True, no part over
// --max-endpoints-per-slice; an export whose exportedAnnotations exceed
// their budget (a valid ServiceExport spec that blocked the whole import
// before) is imported without the key that does not fit, and says so
// (Valid=True KeysRefused).
func TestOversizedExportAndAnnotations(t *testing.T) {
	ns := "hub-oversized"
	ctx, _ := hubFailureTest(t, ns, 5*time.Minute)
	east, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "north")

	if err := manualExport(ctx, east, ns, "big", ips(100)...); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "north: big's 100 endpoints", importedEndpoints(ctx, north, ns, "big", "east", 100))
	grow(ctx, t, east, ns, "big", 11900)
	eventually(ctx, t, "north: big's 12,000 endpoints", importedEndpoints(ctx, north, ns, "big", "east", 12000))
	eventually(ctx, t, "big's ServiceExport Ready", func() error {
		cond, err := workloads.ExportCondition(ctx, east, ns, "big", mcsv1beta1.ServiceExportConditionReady)
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready %s %s: %s", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
	var pubs publish.PublishedExportList
	if err := hubClient(t, "").List(ctx, &pubs, client.InNamespace(testbed.HubNamespace), client.MatchingLabels{
		mcsv1beta1.LabelSourceCluster: "east", mcsv1beta1.LabelServiceName: "big", publish.ServiceNamespaceLabel: ns}); err != nil {
		t.Fatal(err)
	}
	parts := 0
	for _, p := range pubs.Items {
		n := 0
		for _, g := range p.Spec.Endpoints {
			n += len(g.Endpoints)
		}
		switch {
		case publish.IsPart(&p) && n <= publish.DefaultMaxEndpointsPerPart:
			parts++
		case publish.IsPart(&p):
			t.Errorf("part %s holds %d endpoints", p.Name, n)
		case n > 0:
			t.Errorf("head %s holds %d endpoints", p.Name, n)
		}
	}
	if parts < 120 || len(pubs.Items) != parts+1 {
		t.Errorf("%d parts of %d objects, want a head and at least 120 parts", parts, len(pubs.Items))
	}

	annotated := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "annotated"}}
	if err := manualExport(ctx, east, ns, "annotated", "10.100.9.9"); err != nil {
		t.Fatal(err)
	}
	// A merge patch, not an update: mcs-syncer writes the export's
	// status and finalizer meanwhile, and an update read before that
	// conflicts (it failed CI once).
	annotations := map[string]any{"spec": map[string]any{"exportedAnnotations": map[string]string{
		"a.example/small": "kept", "b.example/huge": strings.Repeat("x", 200<<10)}}}
	patch, err := json.Marshal(annotations)
	if err != nil {
		t.Fatal(err)
	}
	if err := east.Patch(ctx, annotated, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "north: annotated imported with the key that fits", func() error {
		si := &mcsv1beta1.ServiceImport{}
		if err := north.Get(ctx, types.NamespacedName{Namespace: ns, Name: "annotated"}, si); err != nil {
			return err
		}
		if si.Annotations["a.example/small"] != "kept" {
			return fmt.Errorf("annotations %d, small %q", len(si.Annotations), si.Annotations["a.example/small"])
		}
		if _, ok := si.Annotations["b.example/huge"]; ok {
			return fmt.Errorf("the huge annotation was imported")
		}
		return importedEndpoints(ctx, north, ns, "annotated", "east", 1)()
	})
	// Polled too: the export watcher puts the export into the Store before
	// it writes the status, so north may import it first (seen in a CI
	// rehearsal on a loaded machine: "Valid True Valid").
	eventually(ctx, t, "east's export to say which key was refused", func() error {
		cond, err := workloads.ExportCondition(ctx, east, ns, "annotated", mcsv1beta1.ServiceExportConditionValid)
		if err != nil {
			return err
		}
		if cond.Reason != "KeysRefused" || !strings.Contains(cond.Message, "b.example/huge") {
			return fmt.Errorf("Valid %s %s: %s", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
}

// ips returns n distinct addresses in east's pod range.
func ips(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("10.100.%d.%d", 100+i/250, 1+i%250)
	}
	return out
}

// grow adds n ready endpoints to name's manual export (of ips(100)), in
// slices of 1,000 (the most one EndpointSlice holds).
func grow(ctx context.Context, t *testing.T, cl client.Client, ns, name string, n int) {
	t.Helper()
	all := ips(100 + n)[100:]
	for i := 0; i*1000 < n; i++ {
		slice := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-grown-%d", name, i), Namespace: ns, Labels: map[string]string{
				discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "e2e.mcs-syncer"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80), Protocol: ptr.To(corev1.ProtocolTCP)}},
		}
		for j, ip := range all[i*1000 : min(n, (i+1)*1000)] {
			// As kube-controller-manager writes a pod's endpoint: ~170
			// bytes in a publication (an address alone takes ~55).
			slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
				NodeName: ptr.To(fmt.Sprintf("node-%d", j%10)), Zone: ptr.To("zone-a"),
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("%s-7d4b9c8f6-%05d", name, i*1000+j), UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i*1000+j))}})
		}
		if err := cl.Create(ctx, slice); err != nil {
			t.Fatal(err)
		}
	}
}
