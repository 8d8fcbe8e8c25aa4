package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/test/testbed/workloads"
)

// TestOversizedAnnotations (hub mode): an export whose exportedAnnotations
// exceed their budget (a valid ServiceExport spec that blocked the whole
// import before) is imported without the key that does not fit, and says
// so (Valid=True KeysRefused). (Exports of any number of endpoints:
// TestAnyServiceSize.)
func TestOversizedAnnotations(t *testing.T) {
	ns := "hub-oversized"
	ctx, _ := hubFailureTest(t, ns, 5*time.Minute)
	east, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "north")

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
