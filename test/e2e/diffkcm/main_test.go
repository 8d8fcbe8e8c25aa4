package diffkcm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/mcs-syncer/mcs-syncer/test/testbed"
)

// bed is the cluster both controllers run on; nil when the testbed's
// binaries are missing (the test then skips).
var bed *testbed.Clusterset

// examples are the example controllers' binaries by name, built for this
// run.
var examples = map[string]string{}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	stateDir, err := os.MkdirTemp("", "mcs-diffkcm-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The state folder must be empty for the testbed: the policy lives apart.
	policyDir, err := os.MkdirTemp("", "mcs-diffkcm-policy-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(policyDir)
	policy := filepath.Join(policyDir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	started, err := testbed.Start(ctx, testbed.Options{
		AuditPolicy:  policy,
		Clusters:     []string{"diff"},
		StateDir:     stateDir,
		Zones:        3,
		NodesPerZone: 2,
		ZoneCPU:      []string{"32", "32", "8"},
		DualStack:    true,
		// The mirroring controller's syncs and their outcome, for
		// explainedMirroringRecycle.
		ControllerManagerFlags: []string{"vmodule=endpointslicemirroring_controller=4"},
		TeardownOnExit:         true,
	})
	if errors.Is(err, testbed.ErrNoBinaries) {
		fmt.Fprintln(os.Stderr, "SKIP: the differential test needs the testbed:", err)
		return m.Run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "diffkcm: start the testbed:", err)
		return 1
	}
	code := 1
	if err = buildExamples(ctx, stateDir); err != nil {
		fmt.Fprintln(os.Stderr, "diffkcm:", err)
	} else {
		bed = started
		code = m.Run()
	}
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer stopCancel()
	if err := started.Stop(stopCtx); err != nil {
		fmt.Fprintln(os.Stderr, "diffkcm:", err)
		return 1
	}
	return code
}

// buildExamples builds the example controllers from the library's module.
func buildExamples(ctx context.Context, stateDir string) error {
	_, file, _, _ := runtime.Caller(0)
	lib := filepath.Join(filepath.Dir(file), "..", "..", "..", "pkg", "reconciler")
	for _, name := range []string{"endpointslice", "mirroring"} {
		out := filepath.Join(stateDir, name)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./examples/"+name)
		cmd.Dir = lib
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build the example %s: %w\n%s", name, err, b)
		}
		examples[name] = out
	}
	return nil
}

func needTestbed(t *testing.T) {
	t.Helper()
	if bed == nil {
		t.Skip("the testbed's binaries are missing (make tools)")
	}
}
