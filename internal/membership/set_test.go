package membership

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// closedPort returns a loopback address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// poll waits (generously) until check passes.
func poll(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func wantState(s *Set, id clusterset.ClusterID, state State, cause string) func() error {
	return func() error {
		st, ok := s.Status(id)
		if !ok {
			return fmt.Errorf("%s is not a member", id)
		}
		if st.State != state || !strings.Contains(st.Cause, cause) {
			return fmt.Errorf("%s is %s (%s), want %s with %q", id, st.State, st.Cause, state, cause)
		}
		return nil
	}
}

// TestSetReportsAndFollowsTheConfig: members that cannot be engaged are
// reported with their cause and do not make the process unready; a config
// that does not parse, or drops the required member, is refused and the
// last good one stays; members added and removed in the file join and
// leave without a restart.
func TestSetReportsAndFollowsTheConfig(t *testing.T) {
	dir := t.TempDir()
	kubeconfig(t, dir, "east.kubeconfig", "https://"+closedPort(t))
	kubeconfig(t, dir, "north.kubeconfig", "https://"+closedPort(t))
	// A server whose certificate the kubeconfig's (system) CAs do not trust.
	tlsServer := httptest.NewUnstartedServer(http.NotFoundHandler())
	tlsServer.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are expected
	tlsServer.StartTLS()
	defer tlsServer.Close()
	kubeconfig(t, dir, "south.kubeconfig", tlsServer.URL)
	path := filepath.Join(dir, "clusterset.yaml")
	write := func(raw string) {
		t.Helper()
		// Written aside and renamed, as a Secret volume is updated.
		if err := os.WriteFile(path+".tmp", []byte(raw), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	const good = configHeader + "clusterset: prod\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n- id: west\n  kubeconfig: west.kubeconfig\n" +
		"- id: south\n  kubeconfig: south.kubeconfig\n- id: up\n  kubeconfig: north.kubeconfig\n  context: absent\n"
	write(good)
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	var mu sync.Mutex
	var departed []clusterset.ClusterID
	changes := 0
	set, err := NewSet(path, cfg, Options{
		Scheme: runtime.NewScheme(), Registerer: reg, Required: "east",
		RetryInterval: 10 * time.Millisecond, MaxRetryInterval: 50 * time.Millisecond, ConfigPollInterval: 20 * time.Millisecond,
		Engage: func(clusterset.ClusterID, cluster.Cluster) ([]func(context.Context) error, error) {
			return nil, fmt.Errorf("no member here can be engaged")
		},
		Departed: func(d Departure) {
			mu.Lock()
			defer mu.Unlock()
			departed = append(departed, d.ID)
		},
		Changed: func() { mu.Lock(); changes++; mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	if ready, _ := set.Readiness(); ready {
		t.Error("ready before it started")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- set.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	poll(t, "east unreachable", wantState(set, "east", Unreachable, "connection refused"))
	poll(t, "west's kubeconfig reported", wantState(set, "west", BadConfig, "west.kubeconfig: stat"))
	poll(t, "south's CA reported", wantState(set, "south", Unreachable, "certificate"))
	poll(t, "up's context reported", wantState(set, "up", BadConfig, `context "absent"`))
	poll(t, "ready with both reported", func() error {
		ready, lines := set.Readiness()
		text := strings.Join(lines, "\n")
		if !ready || !strings.Contains(text, "[+]member east ok: unreachable since") || !strings.Contains(text, "[+]member west ok: config-error since") {
			return fmt.Errorf("ready=%v:\n%s", ready, text)
		}
		return nil
	})
	if v := testutil.ToFloat64(set.metrics.state.WithLabelValues("west", string(BadConfig))); v != 1 {
		t.Errorf("member_state{west,config-error} = %v", v)
	}
	if h := set.Health("east"); h.Up || h.Answering {
		t.Errorf("east: %+v", h)
	}

	// Refused: a file that does not parse, and one without the required
	// member. The last good membership stays.
	for _, bad := range []struct{ raw, cause string }{
		{configHeader + "clusterset: prod\nmembers: [\n", "parse"},
		{configHeader + "clusterset: prod\nmembers:\n- id: west\n  kubeconfig: west.kubeconfig\n", "member east (the local cluster) is missing"},
		{configHeader + "clusterset: other\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n", "the clusterset's name changed"},
	} {
		write(bad.raw)
		poll(t, "reload refused: "+bad.cause, func() error {
			if v := testutil.ToFloat64(set.metrics.reloadOK); v != 0 {
				return fmt.Errorf("last_reload_success = %v", v)
			}
			_, lines := set.Readiness()
			if !strings.Contains(lines[0], "last reload refused") || !strings.Contains(lines[0], bad.cause) {
				return fmt.Errorf("readiness says %q", lines[0])
			}
			return nil
		})
		if got := set.IDs(); !slices.Equal(got, []clusterset.ClusterID{"east", "south", "up", "west"}) {
			t.Errorf("members after a refused reload: %v", got)
		}
		write(good)
		poll(t, "the good config again", func() error {
			if v := testutil.ToFloat64(set.metrics.reloadOK); v != 1 {
				return fmt.Errorf("last_reload_success = %v", v)
			}
			return nil
		})
	}

	// west leaves, north joins.
	write(configHeader + "clusterset: prod\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n- id: north\n  kubeconfig: north.kubeconfig\n")
	poll(t, "north joined and west left", func() error {
		if got := set.IDs(); !slices.Equal(got, []clusterset.ClusterID{"east", "north"}) {
			return fmt.Errorf("members %v", got)
		}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(slices.Sorted(slices.Values(departed)), []clusterset.ClusterID{"south", "up", "west"}) {
			return fmt.Errorf("departed %v", departed)
		}
		return nil
	})
	poll(t, "north unreachable", wantState(set, "north", Unreachable, "connection refused"))
	if _, ok := set.Status("west"); ok {
		t.Error("west still has a status")
	}
	if n := testutil.CollectAndCount(set.metrics.state); n != 2*len(states) {
		t.Errorf("%d member_state series, want %d (west's are gone)", n, 2*len(states))
	}
	mu.Lock()
	if changes == 0 {
		t.Error("Changed was never called")
	}
	mu.Unlock()
}

// eastOnly is a Set, not started, of member east, whose API server does
// not answer.
func eastOnly(t *testing.T) *Set {
	t.Helper()
	dir := t.TempDir()
	kubeconfig(t, dir, "east.kubeconfig", "https://"+closedPort(t))
	path := filepath.Join(dir, "clusterset.yaml")
	if err := os.WriteFile(path, []byte(configHeader+"clusterset: prod\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	set, err := NewSet(path, cfg, Options{Scheme: runtime.NewScheme(), Engage: func(clusterset.ClusterID, cluster.Cluster) ([]func(context.Context) error, error) {
		return nil, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestReadyzSaysWhy: /readyz fails with its reasons before the members are
// engaged (not withheld, as controller-runtime's handler does); a standby
// replica is ready; ?verbose lists every check.
func TestReadyzSaysWhy(t *testing.T) {
	set := eastOnly(t)
	leading := true
	p := &ProbeServer{Set: set, Leading: func() bool { return leading }}
	get := func(url string) (int, string) {
		rec := httptest.NewRecorder()
		p.readyz(rec, httptest.NewRequest(http.MethodGet, url, nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "[-]members failed: not started yet") ||
		!strings.Contains(body, "[-]member east failed: connecting since") || !strings.HasSuffix(body, "readyz check failed\n") {
		t.Errorf("before start: %d\n%s", code, body)
	}
	leading = false
	if code, body := get("/readyz"); code != http.StatusOK || body != "readyz check passed\n" {
		t.Errorf("standby: %d\n%s", code, body)
	}
	if code, body := get("/readyz?verbose"); code != http.StatusOK || !strings.Contains(body, "[+]leader-election ok: standby") {
		t.Errorf("standby, verbose: %d\n%s", code, body)
	}
}

// TestMembersView: /members serves the leading replica's view of each
// member as JSON (its state, health, version, and the process's clock);
// a standby says it does not lead and lists none.
func TestMembersView(t *testing.T) {
	set := eastOnly(t)
	leading := true
	p := &ProbeServer{Set: set, Cluster: "west", Leading: func() bool { return leading }}
	get := func() View {
		rec := httptest.NewRecorder()
		p.members(rec, httptest.NewRequest(http.MethodGet, "/members", nil))
		var v View
		if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%v, %q: %s", err, rec.Header().Get("Content-Type"), rec.Body.String())
		}
		return v
	}
	v := get()
	if !v.Leading || v.Cluster != "west" || v.Version == "" || v.Now.IsZero() || len(v.Members) != 1 {
		t.Fatalf("leading: %+v", v)
	}
	if m := v.Members[0]; m.ID != "east" || m.State != Connecting || m.Health != HealthDown || m.LastHeartbeat != nil {
		t.Errorf("east before start: %+v", m)
	}
	leading = false
	if v := get(); v.Leading || len(v.Members) != 0 || v.Cluster != "west" {
		t.Errorf("standby: %+v", v)
	}
}

// TestHealthName: held before up (a member read through a hub that cannot
// be read), silent for an engaged member that is not up.
func TestHealthName(t *testing.T) {
	for _, c := range []struct {
		h     clusterset.Health
		state State
		want  string
	}{
		{clusterset.Health{Up: true}, Engaged, HealthUp},
		{clusterset.Health{Held: true}, Unreachable, HealthHeld},
		{clusterset.Health{Answering: true}, Engaged, HealthSilent},
		{clusterset.Health{}, Unreachable, HealthDown},
		{clusterset.Health{Answering: true}, Syncing, HealthDown},
	} {
		if got := healthName(c.h, c.state); got != c.want {
			t.Errorf("%+v in %s: %s, want %s", c.h, c.state, got, c.want)
		}
	}
}
