package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/audit"
)

// bed is the clusterset shared by the tests of this package.
var bed *testbed.Clusterset

// noTestbed says why there is no testbed (its binaries are missing); the
// tests then skip with it.
var noTestbed string

// needTestbed skips t when there is no testbed.
func needTestbed(t *testing.T) {
	t.Helper()
	if noTestbed != "" {
		t.Skip(noTestbed)
	}
}

func TestMain(m *testing.M) {
	if stateDir := os.Getenv(orphanEnv); stateDir != "" {
		os.Exit(runOrphanedTestbed(stateDir))
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	stateDir, err := os.MkdirTemp("", "mcs-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Every API server logs mcs-syncer's writes (TestUpgradeUnderTraffic
	// counts them); the state folder must be empty, so the policy lives apart.
	policyDir, err := os.MkdirTemp("", "mcs-e2e-policy-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(policyDir)
	policy, err := audit.WritePolicy(policyDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	start := time.Now()
	bed, err = testbed.Start(ctx, testbed.Options{
		AuditPolicy:    policy,
		StateDir:       stateDir,
		TeardownOnExit: true,
		RealNodes:      true,
		DualStack:      true,
		// north's and east's real nodes share a zone, west's is apart:
		// zone-aware routing across clusters shows (TestDataPlaneTrafficDistribution).
		RealNodeZones: map[string]string{"north": "shared", "east": "shared"},
		// north's and west's real nodes share a name, as kind's nodes do:
		// a node name from another cluster never counts as north's own
		// node (TestDataPlaneNodeNamesCollide).
		RealNodeNames: map[string]string{"north": "worker", "west": "worker"},
		// A hub for the hub-mode tests (hub_test.go); MCS_E2E_HUB=generic
		// serves it from the KEP-4080 generic control plane.
		Hub:        true,
		GenericHub: os.Getenv("MCS_E2E_HUB") == "generic",
		Log:        os.Stderr,
	})
	if errors.Is(err, testbed.ErrNoBinaries) {
		noTestbed = err.Error()
		fmt.Fprintln(os.Stderr, "SKIP: every test here needs the testbed:", noTestbed)
		return m.Run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "testbed: %d clusters up in %s\n", len(bed.Clusters), time.Since(start).Round(time.Millisecond))
	if syncer, err = startSyncer(ctx, stateDir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = bed.Stop(context.Background())
		return 1
	}
	code := m.Run()
	if err := syncer.stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if err := bed.Stop(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if logs, err := syncerLogs(); err == nil {
		if code == 0 {
			_ = os.RemoveAll(logs)
		} else {
			fmt.Fprintln(os.Stderr, "mcs-syncer's logs are kept in", logs)
		}
	}
	return code
}
