package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcs-syncer/mcs-syncer/test/testbed/workloads"
)

// TestUnreachableMemberIsWithdrawnAfterGrace: west unreachable for longer
// than the grace (20s here) loses its endpoints and, as the only exporter,
// its ServiceImport in north; twice in a row, each time they come back when
// west does, and a change made in west as soon as its API server is back
// is imported within seconds (the member-return time, printed). A later
// short blip of west changes nothing; a SIGTERM during an outage ends
// mcs-syncer cleanly (exit 0) within the manager's 30 s grace.
func TestUnreachableMemberIsWithdrawnAfterGrace(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns := "import-unreachable"
	bed.Namespace(ctx, t, ns)
	west, north := bed.ClientOf(t, "west"), bed.ClientOf(t, "north")
	workloads.CreateApp(ctx, t, west, ns, 2, 80, true, nil)
	importedFromWest := readyImported(ctx, north, ns, map[string]int{"west": 2})
	eventually(ctx, t, "north to import west's endpoints", importedFromWest)

	westBed := bed.Cluster("west")
	down := false
	// Never leave west down for the tests after this one.
	t.Cleanup(func() {
		if down {
			_ = westBed.StartAPIServer(context.Background())
		}
	})
	connected := func(want float64) func() error {
		return func() error {
			v, err := syncer.metric(ctx, `mcs_syncer_member_connected{cluster="west"}`)
			if err != nil {
				return err
			}
			if v != want {
				return fmt.Errorf("mcs_syncer_member_connected{cluster=west} = %v", v)
			}
			return nil
		}
	}

	for round := 1; round <= 2; round++ {
		// Down for longer than the grace: withdrawn.
		if err := westBed.StopAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		down = true
		stopped := time.Now()
		eventually(ctx, t, "/readyz to report west unreachable", readyzSays(ctx, syncer, "[+]member west ok: unreachable since"))
		eventually(ctx, t, "north to withdraw west's import", func() error {
			if _, err := getImport(ctx, north, ns); err == nil {
				return fmt.Errorf("ServiceImport still there")
			}
			bySource, err := importedSlices(ctx, north, ns)
			if err != nil {
				return err
			}
			if len(bySource["west"]) > 0 {
				return fmt.Errorf("%d slices from west", len(bySource["west"]))
			}
			return nil
		})
		if waited := time.Since(stopped); waited < 20*time.Second {
			t.Errorf("withdrawn after %s, before the 20s grace", waited)
		}
		if err := westBed.StartAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		down = false
		back := time.Now()
		name := fmt.Sprintf("changed-%d", round)
		if err := manualExport(ctx, west, ns, name, "10.102.9.1"); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "a change made in west right after its return to reach north", importedEndpoints(ctx, north, ns, name, "west", 1))
		t.Logf("outage %d: member-return time (west's API server ready -> a change made in west imported into north): %s", round, time.Since(back).Round(time.Millisecond))
		eventually(ctx, t, "west's import to return", importedFromWest)
		if err := syncer.Exited(); err != nil {
			t.Fatal(err)
		}
	}
	si, err := getImport(ctx, north, ns)
	if err != nil {
		t.Fatal(err)
	}

	// A blip shorter than the grace, long enough for mcs-syncer to see
	// west disconnected: nothing is withdrawn. West's API server is
	// frozen, not stopped: a restarted one takes 5-25 s to serve again on
	// a busy machine, which made the "short" blip outlast the 20 s grace
	// (and west rightly withdrawn) in CI; a thawed one answers at once.
	if err := westBed.PauseAPIServer(); err != nil {
		t.Fatal(err)
	}
	frozen := true
	t.Cleanup(func() {
		if frozen {
			_ = westBed.ResumeAPIServer()
		}
	})
	blip := time.Now()
	eventually(ctx, t, "mcs-syncer to see west disconnected", connected(0))
	seenDown := time.Now()
	if err := westBed.ResumeAPIServer(); err != nil {
		t.Fatal(err)
	}
	frozen = false
	eventually(ctx, t, "mcs-syncer to see west connected again", connected(1))
	// The grace counts from when mcs-syncer saw west disconnected.
	disconnected := time.Since(seenDown).Round(time.Millisecond)
	t.Logf("blip: west frozen %s until seen disconnected, then disconnected for %s", seenDown.Sub(blip).Round(time.Millisecond), disconnected)
	if again, err := getImport(ctx, north, ns); err != nil || again.UID != si.UID {
		t.Fatalf("the ServiceImport did not survive a short blip (disconnected for %s): %v", disconnected, err)
	}
	if err := importedFromWest(); err != nil {
		t.Fatalf("west's endpoints did not survive a short blip: %v", err)
	}

	// SIGTERM during an outage: a clean exit within the manager's grace.
	if err := westBed.StopAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	down = true
	eventually(ctx, t, "mcs-syncer to see west disconnected", connected(0))
	start := time.Now()
	if err := syncer.stop(); err != nil {
		t.Error(err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("shutdown during an outage took %s", took)
	}
	if err := westBed.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	down = false
	next, err := startSyncer(ctx, syncer.stateDir)
	if err != nil {
		t.Fatal(err)
	}
	*syncer = *next
}
