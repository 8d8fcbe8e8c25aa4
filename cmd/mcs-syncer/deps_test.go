package main

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/mcs-syncer/mcs-syncer"

// TestDependenciesPointOneWay keeps the README's "Dependencies point one
// way": the API types import nothing of ours, internal/membership does not
// reach into the publications' code, and no product package imports cmd
// or test.
func TestDependenciesPointOneWay(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, module+"/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, " ")
		for _, dep := range strings.Fields(deps) {
			if !strings.HasPrefix(dep, module+"/") || strings.HasPrefix(dep, module+"/pkg/reconciler") {
				continue
			}
			checked++
			switch {
			case pkg == module+"/api/v1alpha1":
				t.Errorf("api/v1alpha1 imports %s: the API types import nothing of ours", dep)
			case pkg == module+"/internal/membership" && dep == module+"/internal/publish":
				t.Errorf("internal/membership imports internal/publish")
			case strings.HasPrefix(pkg, module+"/internal/") && (strings.HasPrefix(dep, module+"/cmd/") || strings.HasPrefix(dep, module+"/test/")):
				t.Errorf("%s imports %s: nothing of the product imports cmd or test", pkg, dep)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("read %d dependencies between our packages: go list's output changed", checked)
	}
}
