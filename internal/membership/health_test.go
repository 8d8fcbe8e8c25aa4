package membership

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// The health the import side acts on (clusterset.Health), driven through
// the members' states directly: milliseconds, no API server.

// healthSet is a Set of east (read directly) and west and south (read
// through a hub), not started: the test moves the members' states.
type healthSet struct {
	set     *Set
	changes int
	mu      sync.Mutex
	// heard is when each member was last heard from, and silence how
	// long a silence may last (Options.Heartbeat).
	heard   map[clusterset.ClusterID]time.Time
	silence time.Duration
}

func newHealthSet(t *testing.T, reg prometheus.Registerer) *healthSet {
	t.Helper()
	dir := t.TempDir()
	kubeconfig(t, dir, "east.kubeconfig", "https://127.0.0.1:1")
	kubeconfig(t, dir, "hub.kubeconfig", "https://127.0.0.1:2")
	path := filepath.Join(dir, "clusterset.yaml")
	raw := configHeader + "clusterset: prod\nhub:\n  kubeconfig: hub.kubeconfig\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n- id: west\n- id: south\n"
	if err := os.WriteFile(path, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	hs := &healthSet{heard: map[clusterset.ClusterID]time.Time{}, silence: time.Minute}
	hs.set, err = NewSet(path, cfg, Options{
		Scheme: runtime.NewScheme(), Registerer: reg, Required: "east",
		Engage:            func(clusterset.ClusterID, cluster.Cluster) ([]func(context.Context) error, error) { return nil, nil },
		ReadsPublications: func(id clusterset.ClusterID) bool { return id != "east" },
		Heartbeat: func(id clusterset.ClusterID) (time.Time, time.Duration) {
			hs.mu.Lock()
			defer hs.mu.Unlock()
			return hs.heard[id], hs.silence
		},
		Changed: func() { hs.mu.Lock(); hs.changes++; hs.mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	return hs
}

func (hs *healthSet) to(id clusterset.ClusterID, state State) {
	hs.set.members[id].setState(context.Background(), state, errors.New(string(state)))
}

func (hs *healthSet) changed() int {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.changes
}

// TestHealthDownClockSurvivesFlapping: a member that was up and then fails
// over and over (forbidden, syncing, forbidden, ...: a token that may
// answer a probe but not list) stays down since it was last up; its grace
// is not reset by each cycle, only its first fall is announced, and the
// process's readiness does not cycle with it (only a member's first sync
// holds it).
func TestHealthDownClockSurvivesFlapping(t *testing.T) {
	hs := newHealthSet(t, nil)
	hs.set.run = context.Background() // started
	for _, id := range []clusterset.ClusterID{"west", "south"} {
		hs.to(id, Engaged)
	}
	hs.to("east", Syncing)
	if ready, lines := hs.set.Readiness(); ready {
		t.Errorf("ready during east's first sync: %v", lines)
	}
	hs.to("east", Engaged)
	if h := hs.set.Health("east"); !h.Up || !h.Answering {
		t.Fatalf("engaged: %+v", h)
	}
	before := hs.changed()
	hs.to("east", Forbidden)
	down := hs.set.Health("east")
	if down.Up || down.Held || down.Since.IsZero() {
		t.Fatalf("forbidden: %+v", down)
	}
	for range 5 {
		hs.to("east", Syncing)
		if h := hs.set.Health("east"); h.Up || !h.Answering || !h.Since.Equal(down.Since) {
			t.Fatalf("syncing again: %+v, want down since %s", h, down.Since)
		}
		if ready, lines := hs.set.Readiness(); !ready {
			t.Fatalf("not ready while east syncs again: %v", lines)
		}
		hs.to("east", Forbidden)
		if h := hs.set.Health("east"); h.Up || !h.Since.Equal(down.Since) {
			t.Fatalf("forbidden again: %+v, want down since %s", h, down.Since)
		}
	}
	if n := hs.changed() - before; n != 1 {
		t.Errorf("%d changes announced while east flapped, want 1 (its fall)", n)
	}
}

// TestHealthThroughAHubThatCannotBeRead: members read through the hub are
// held while the hub cannot be read (whatever the reason), with the hub's
// gauge at 0; up again when it can.
func TestHealthThroughAHubThatCannotBeRead(t *testing.T) {
	reg := prometheus.NewRegistry()
	hs := newHealthSet(t, reg)
	for _, id := range []clusterset.ClusterID{"west", "south"} {
		hs.heard[id] = time.Now()
		hs.to(id, Engaged)
	}
	if v := testutil.ToFloat64(hs.set.metrics.hubConnected); v != 1 {
		t.Errorf("hub_connected = %v with the hub read", v)
	}
	for _, state := range []State{Unreachable, Forbidden, Syncing, BadConfig} {
		for _, id := range []clusterset.ClusterID{"west", "south"} {
			hs.to(id, state)
		}
		for _, id := range []clusterset.ClusterID{"west", "south"} {
			if h := hs.set.Health(id); !h.Held || h.Up {
				t.Errorf("%s with the hub %s: %+v", id, state, h)
			}
		}
		if v := testutil.ToFloat64(hs.set.metrics.hubConnected); v != 0 {
			t.Errorf("hub_connected = %v with the hub %s", v, state)
		}
	}
	if v := testutil.ToFloat64(hs.set.metrics.up.WithLabelValues("west")); v != 0 {
		t.Errorf("member_up{west} = %v while held", v)
	}
	hs.to("west", Engaged)
	if h := hs.set.Health("west"); !h.Up {
		t.Errorf("west with the hub back: %+v", h)
	}
}

// TestHealthHeartbeat: an engaged member read through its publications is
// up while its mcs-syncer is heard from; silent for longer than the
// heartbeat allows, it is down since it was last heard from, and the
// change is announced at the next look (announceHealth, every config
// poll). Silence before the member was engaged does not count (the hub's
// return is no member's silence), and a member that does not renew
// (timeout 0) is never silent.
func TestHealthHeartbeat(t *testing.T) {
	hs := newHealthSet(t, nil)
	hs.to("west", Engaged)
	engaged := hs.set.Health("west").Since

	hs.heard["west"] = engaged.Add(-time.Hour) // heard long ago, before the hub's return
	if h := hs.set.Health("west"); !h.Up {
		t.Fatalf("just engaged: %+v", h)
	}
	hs.mu.Lock()
	hs.silence = time.Millisecond
	hs.mu.Unlock()
	heard := time.Now()
	hs.heard["west"] = heard
	poll(t, "west silent", func() error {
		if h := hs.set.Health("west"); h.Up || h.Held || !h.Since.Equal(heard) {
			return errors.New("still up")
		}
		return nil
	})
	before := hs.changed()
	hs.set.announceHealth()
	hs.set.announceHealth()
	if n := hs.changed() - before; n != 1 {
		t.Errorf("%d changes announced for west's silence, want 1", n)
	}

	hs.mu.Lock()
	hs.silence = 0
	hs.mu.Unlock()
	if h := hs.set.Health("west"); !h.Up {
		t.Errorf("a member that does not renew is never silent: %+v", h)
	}
	// east is read directly: no heartbeat is asked of it.
	hs.to("east", Engaged)
	hs.mu.Lock()
	hs.silence = time.Millisecond
	hs.mu.Unlock()
	if h := hs.set.Health("east"); !h.Up {
		t.Errorf("east: %+v", h)
	}
}

// TestHubNotSaidUnreadableWhileStarting: the members read through the hub
// are held while they first connect, but the hub is not logged as out of
// reach (s.hubHeld) before one of them failed to reach it; once all have,
// it is, and again not once one is engaged.
func TestHubNotSaidUnreadableWhileStarting(t *testing.T) {
	hs := newHealthSet(t, nil)
	hubHeld := func() bool {
		hs.set.announceHealth() // as every config poll does
		hs.set.mu.Lock()
		defer hs.set.mu.Unlock()
		return hs.set.hubHeld
	}
	if hubHeld() {
		t.Error("the hub is said to be out of reach while its members first connect")
	}
	hs.to("west", Unreachable)
	if hubHeld() {
		t.Error("the hub is said to be out of reach while south first connects")
	}
	hs.to("south", Unreachable)
	if !hubHeld() {
		t.Error("the hub is not said to be out of reach when no member read through it could reach it")
	}
	hs.heard["west"] = time.Now()
	hs.to("west", Engaged)
	if hubHeld() {
		t.Error("the hub is still said to be out of reach with west engaged through it")
	}
}

// TestNoHubNoHubGauge: without a member read through a hub,
// mcs_syncer_hub_connected has no series (it reported 0 in central mode,
// which an alert on the hub would read as a hub out of reach).
func TestNoHubNoHubGauge(t *testing.T) {
	dir := t.TempDir()
	kubeconfig(t, dir, "east.kubeconfig", "https://127.0.0.1:1")
	path := filepath.Join(dir, "clusterset.yaml")
	if err := os.WriteFile(path, []byte(configHeader+"clusterset: prod\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	set, err := NewSet(path, cfg, Options{
		Scheme: runtime.NewScheme(), Registerer: prometheus.NewRegistry(),
		Engage: func(clusterset.ClusterID, cluster.Cluster) ([]func(context.Context) error, error) { return nil, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, state := range []State{Engaged, Unreachable} {
		set.members["east"].setState(context.Background(), state, errors.New(string(state)))
		if n := testutil.CollectAndCount(set.metrics.hubConnected); n != 0 {
			t.Errorf("east %s, no hub: %d hub_connected series", state, n)
		}
		if v := testutil.ToFloat64(set.metrics.up.WithLabelValues("east")); v != gauge(state == Engaged) {
			t.Errorf("east %s: member_up %v", state, v)
		}
	}
}
