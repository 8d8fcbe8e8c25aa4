package export

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// TestUnitRestrictedNamespace: a ServiceExport in a namespace the
// clusterset does not export from is Valid=False RestrictedNamespace with
// an event that says why; one exported before the policy (an upgrade)
// leaves the Store with that condition, never silently. Allowed again, it
// is exported.
func TestUnitRestrictedNamespace(t *testing.T) {
	h := newUnitHarness(t, serviceExportOf(time.Now()), service(nil))
	h.sync()
	if h.export() == nil {
		t.Fatal("not exported before the policy")
	}
	h.w.namespaces = clusterset.NamespacePolicy{Deny: []string{"n*"}}
	h.sync()
	if es := h.export(); es != nil {
		t.Errorf("an export of a denied namespace stays in the Store: %+v", es)
	}
	valid := h.condition(mcsv1beta1.ServiceExportConditionValid)
	if valid.Status != metav1.ConditionFalse || valid.Reason != clusterset.ReasonRestrictedNamespace || !strings.Contains(valid.Message, "exportNamespaces.deny") {
		t.Errorf("Valid %s/%s %q", valid.Status, valid.Reason, valid.Message)
	}
	if got := h.conditions(); got["Ready"] != "False/Pending" || got["Conflict"] != "" {
		t.Errorf("conditions %v, want Ready=False/Pending and no Conflict", got)
	}
	if ev := h.events(); len(ev) != 1 || !strings.Contains(ev[0], clusterset.ReasonRestrictedNamespace) {
		t.Errorf("events %v, want one %s", ev, clusterset.ReasonRestrictedNamespace)
	}

	h.w.namespaces = clusterset.NamespacePolicy{Allow: []string{"ns"}}
	h.sync()
	if h.export() == nil {
		t.Error("not exported once its namespace is allowed")
	}
	if got := h.conditions(); got["Valid"] != "True/Valid" {
		t.Errorf("conditions once allowed: %v", got)
	}
}
