package clusterset

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRulesImportNoControllerRuntime: this package is the clusterset's
// rules (doc.go); the controllers' plumbing lives in internal/plumbing. Not
// even through another package does it import controller-runtime.
func TestRulesImportNoControllerRuntime(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "sigs.k8s.io/controller-runtime") {
			t.Errorf("internal/clusterset imports %s", dep)
		}
	}
}
