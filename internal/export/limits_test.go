package export

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// TestUnitKeysTheImportCannotCarry: exportedAnnotations over the budget
// (a valid ServiceExport spec: every ServiceImport update failed with
// "metadata.annotations: Too long") and exportedLabels that are no labels
// are left out, key by key, with Valid=True KeysRefused naming them; the
// rest is exported, and the status message stays within the API's bound
// although the refused value is huge.
func TestUnitKeysTheImportCannotCarry(t *testing.T) {
	se := serviceExportOf(time.Now())
	se.Spec.ExportedAnnotations = map[string]string{
		"a.example/small": "kept",
		"b.example/huge":  strings.Repeat("x", 300<<10),
	}
	se.Spec.ExportedLabels = map[string]string{"team": "web", "bad": strings.Repeat("y", 64)}
	h := newUnitHarness(t, se, service(nil))
	h.sync()
	es := h.export()
	if es == nil {
		t.Fatal("not exported")
	}
	if _, ok := es.Spec.Annotations["b.example/huge"]; ok || es.Spec.Annotations["a.example/small"] != "kept" {
		t.Errorf("annotations %v", keys(es.Spec.Annotations))
	}
	if _, ok := es.Spec.Labels["bad"]; ok || es.Spec.Labels["team"] != "web" {
		t.Errorf("labels %v", es.Spec.Labels)
	}
	valid := h.condition(mcsv1beta1.ServiceExportConditionValid)
	if valid.Status != metav1.ConditionTrue || valid.Reason != string(ReasonKeysRefused) ||
		!strings.Contains(valid.Message, "exportedAnnotations b.example/huge") || !strings.Contains(valid.Message, "exportedLabels bad") {
		t.Errorf("Valid %s/%s %q", valid.Status, valid.Reason, valid.Message)
	}
	if len(valid.Message) > clusterset.MaxConditionMessage {
		t.Errorf("message of %d bytes", len(valid.Message))
	}
}

// TestUnitUnpublishedIsNotReady: an export that could not be published
// (the Feedback says why: the hub refused it, it is too large) is Ready=False
// Failed with the reason; Ready again once it is published.
func TestUnitUnpublishedIsNotReady(t *testing.T) {
	h := newUnitHarness(t, serviceExportOf(time.Now()), service(nil))
	h.sync()
	key := client.ObjectKeyFromObject(serviceExportOf(time.Now()))
	h.feedback.SetUnpublished(key, `Unauthorized`)
	h.sync()
	ready := h.condition(mcsv1beta1.ServiceExportConditionReady)
	if ready.Status != metav1.ConditionFalse || ready.Reason != string(mcsv1beta1.ServiceExportReasonFailed) || !strings.Contains(ready.Message, "Unauthorized") {
		t.Errorf("Ready %s/%s %q", ready.Status, ready.Reason, ready.Message)
	}
	h.feedback.SetUnpublished(key, "")
	h.sync()
	if ready := h.condition(mcsv1beta1.ServiceExportConditionReady); ready.Status != metav1.ConditionTrue {
		t.Errorf("Ready %s/%s %q once published", ready.Status, ready.Reason, ready.Message)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
