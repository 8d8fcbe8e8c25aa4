package syncer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/membership"
)

// configHeader is the schema every clusterset config begins with.
const configHeader = "apiVersion: " + membership.ConfigAPIVersion + "\nkind: " + membership.ConfigKind + "\n"

// writeKubeconfig writes a kubeconfig of one API server (a token user)
// to path.
func writeKubeconfig(t *testing.T, path, server string) {
	t.Helper()
	kc := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: " + server + "}\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n"
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
}

// defaults are the settings of the flags' defaults.
func defaults(config string) Settings {
	return Settings{ClustersetConfig: config, ManagedBy: "mcs", MaxEndpointsPerSlice: 100, KubeAPIQPS: -1, KubeAPIBurst: 100,
		ImportSyncs: 10, ExportSyncs: 5, Heartbeat: 10 * time.Second, MetricsAddr: "0", ProbeAddr: "0", PprofAddr: "0"}
}

// newSyncer builds a process of config (written into a folder with the
// kubeconfigs it names, each of its own API server that never answers) with
// the flags' defaults as change (if set) changes them; nothing is started.
func newSyncer(t *testing.T, config string, change func(*Settings), kubeconfigs ...string) (*Syncer, error) {
	t.Helper()
	dir := t.TempDir()
	for i, k := range kubeconfigs {
		writeKubeconfig(t, filepath.Join(dir, k), "https://127.0.0.1:"+strconv.Itoa(1+i))
	}
	path := filepath.Join(dir, "clusterset.yaml")
	if err := os.WriteFile(path, []byte(configHeader+config), 0o644); err != nil {
		t.Fatal(err)
	}
	s := defaults(path)
	if change != nil {
		change(&s)
	}
	return New(s, prometheus.NewRegistry())
}

// TestModes: which members a process reads through their publications and
// which it writes into, per mode: central mode reads and writes every
// member; per-cluster mode writes its own only and reads the others through
// what they publish.
func TestModes(t *testing.T) {
	const config = "clusterset: prod\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n- id: west.fleet-b\n  kubeconfig: west.kubeconfig\n"
	type role struct{ writes, readsPublished bool }
	for local, want := range map[string]map[clusterset.ClusterID]role{
		"":             {"east": {writes: true}, "west.fleet-b": {writes: true}},
		"west.fleet-b": {"east": {readsPublished: true}, "west.fleet-b": {writes: true}},
	} {
		sy, err := newSyncer(t, config, func(s *Settings) { s.LocalCluster = local }, "east.kubeconfig", "west.kubeconfig")
		if err != nil {
			t.Fatal(err)
		}
		for id, r := range want {
			if got := (role{sy.writesInto(id), sy.readsPublications(id)}); got != r {
				t.Errorf("--local-cluster %q, member %s: %+v, want %+v", local, id, got, r)
			}
		}
	}
}

// TestDepartedForgetsTheMember: a member that left the config leaves every
// import at once: the Store no longer holds its exports.
func TestDepartedForgetsTheMember(t *testing.T) {
	sy, err := newSyncer(t, "clusterset: prod\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n", nil, "east.kubeconfig")
	if err != nil {
		t.Fatal(err)
	}
	es := &clusterset.ExportedService{Cluster: "east"}
	es.Key.Namespace, es.Key.Name = "ns", "web"
	sy.store.Put(es)
	if sy.store.Count("east") != 1 {
		t.Fatalf("the Store holds %d exports of east", sy.store.Count("east"))
	}
	sy.departed(membership.Departure{ID: "east"})
	if n := sy.store.Count("east"); n != 0 {
		t.Errorf("the Store still holds %d exports of east after it left", n)
	}
}

// TestLeaseHome: the Lease never lives implicitly in a member: outside a
// cluster, central mode must name its cluster; per-cluster mode uses the
// local cluster; a named member must be one.
func TestLeaseHome(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod
	dir := t.TempDir()
	kc := filepath.Join(dir, "east.kubeconfig")
	writeKubeconfig(t, kc, "https://127.0.0.1:6443")
	cfg, err := membership.ParseConfig([]byte(configHeader+"clusterset: prod\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		s        Settings
		wantHost string
		wantErr  string
	}{
		{name: "no leader election"},
		{name: "central", s: Settings{LeaderElect: true}, wantErr: "--leader-elect: outside a cluster in central mode"},
		{name: "per-cluster", s: Settings{LeaderElect: true, LocalCluster: "east"}, wantHost: "https://127.0.0.1:6443"},
		{name: "member", s: Settings{LeaderElect: true, LeaderElectCluster: "east"}, wantHost: "https://127.0.0.1:6443"},
		{name: "no member", s: Settings{LeaderElect: true, LeaderElectCluster: "west"}, wantErr: `--leader-election-cluster: "west" is not a member`},
		{name: "kubeconfig", s: Settings{LeaderElect: true, LeaderElectKubeconfig: kc}, wantHost: "https://127.0.0.1:6443"},
		{name: "missing kubeconfig", s: Settings{LeaderElect: true, LeaderElectKubeconfig: kc + ".missing"}, wantErr: "--leader-election-kubeconfig:"},
	} {
		rc, err := leaderElectionConfig(tc.s, cfg)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want %q", tc.name, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.wantHost == "" && rc != nil:
			t.Errorf("%s: a Lease config without leader election", tc.name)
		case tc.wantHost != "" && (rc == nil || rc.Host != tc.wantHost):
			t.Errorf("%s: Lease config %v, want host %s", tc.name, rc, tc.wantHost)
		}
	}
}

// TestNewRefusesWhatTheUserMustFix: a config that does not parse, whose
// members cannot be reached at all, or that does not suit the mode, and
// a leader election without a home, end the process at start with one
// line naming the problem, as a ConfigError (exit 2, as a bad flag).
func TestNewRefusesWhatTheUserMustFix(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod
	const one = "clusterset: prod\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n"
	for name, tc := range map[string]struct {
		raw, local  string
		leaderElect bool
		want        string
	}{
		"unparsable":        {raw: "clusterset: prod\nmembers: [\n", want: "--clusterset-config: clusterset config"},
		"no member":         {raw: "clusterset: prod\nmembers:\n- id: east\n  kubeconfig: nope\n", want: "no member can be reached: member east: kubeconfig"},
		"local not member":  {raw: one, local: "west", want: `--local-cluster: "west" is not a member of clusterset prod`},
		"hub in central":    {raw: "clusterset: prod\nhub: {kubeconfig: east.kubeconfig}\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n", want: "hub mode needs per-cluster mode"},
		"no home for Lease": {raw: one, leaderElect: true, want: "--leader-elect: outside a cluster in central mode"},
	} {
		_, err := newSyncer(t, tc.raw, func(s *Settings) { s.LocalCluster, s.LeaderElect = tc.local, tc.leaderElect }, "east.kubeconfig")
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line containing %q", name, err, tc.want)
		}
		if !errors.As(err, new(ConfigError)) {
			t.Errorf("%s: %v is not a ConfigError", name, err)
		}
	}
}

// TestCheckMode: a hub needs per-cluster mode, and the local member must
// have connection settings of its own (it is never read through the hub).
func TestCheckMode(t *testing.T) {
	dir := t.TempDir()
	writeKubeconfig(t, filepath.Join(dir, "k"), "https://127.0.0.1:1")
	cfg, err := membership.ParseConfig([]byte(configHeader+"clusterset: prod\nhub: {kubeconfig: k}\nmembers:\n- id: east\n  kubeconfig: k\n- id: west\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ local, want string }{
		{"", "hub mode needs per-cluster mode"},
		{"west", "member west has no kubeconfig (nor inCluster)"},
		{"south", `"south" is not a member`},
		{"east", ""},
	} {
		err := checkMode(cfg, clusterset.ClusterID(tc.local))
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("--local-cluster %q: %v, want %q", tc.local, err, tc.want)
		}
	}
}

// TestHubClientLimits: the publisher's client of the hub has the members'
// client limits (--kube-api-qps and --kube-api-burst), not client-go's
// default of 5 requests per second.
func TestHubClientLimits(t *testing.T) {
	dir := t.TempDir()
	writeKubeconfig(t, filepath.Join(dir, "hub.kubeconfig"), "https://127.0.0.1:6443")
	cfg, err := membership.ParseConfig([]byte(configHeader+"clusterset: prod\nhub: {kubeconfig: hub.kubeconfig}\nmembers:\n- id: east\n  kubeconfig: hub.kubeconfig\n- id: west\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Settings{{KubeAPIQPS: -1, KubeAPIBurst: 100}, {KubeAPIQPS: 30, KubeAPIBurst: 60}} {
		rc, err := cfg.Hub.RESTConfig()
		if err != nil {
			t.Fatal(err)
		}
		rc = withClientLimits(rc, s)
		if rc.QPS != float32(s.KubeAPIQPS) || rc.Burst != s.KubeAPIBurst {
			t.Errorf("%+v: hub client QPS %v burst %d", s, rc.QPS, rc.Burst)
		}
	}
}

// TestControllersHungEndsTheProcess: exit, membership's ControllersHung (a
// disengaged member's controllers did not return), stops the manager, and
// Start returns the error, which main exits 1 with; a plain stop (SIGTERM)
// returns nil.
func TestControllersHungEndsTheProcess(t *testing.T) {
	for _, hung := range []bool{false, true} {
		sy, err := newSyncer(t, "clusterset: prod\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n", nil, "east.kubeconfig")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		returned := make(chan error, 1)
		go func() { returned <- sy.Start(ctx) }()
		if hung {
			sy.exit(fmt.Errorf("member east: %w within 15s", membership.ErrControllersHung))
		} else {
			cancel()
		}
		select {
		case err := <-returned:
			if hung != errors.Is(err, membership.ErrControllersHung) || !hung && err != nil {
				t.Errorf("hung %v: Start returned %v", hung, err)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("hung %v: Start did not return", hung)
		}
		cancel()
	}
}
