package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/membership"
)

// configHeader is the schema every clusterset config begins with.
const configHeader = "apiVersion: " + membership.ConfigAPIVersion + "\nkind: " + membership.ConfigKind + "\n"

// TestFlagsRejectBadValues: every bad value is refused with one line that
// names its flag.
func TestFlagsRejectBadValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--clusterset-config: required"},
		{[]string{"--clusterset-config", "c", "--local-cluster", "East"}, "--local-cluster:"},
		{[]string{"--clusterset-config", "c", "--local-cluster", "east.fleet.a"}, `--local-cluster: cluster ID "east.fleet.a" has 3 dot-separated parts`},
		{[]string{"--clusterset-config", "c", "--leader-elect", "--leader-election-cluster", "east..a"}, "--leader-election-cluster: cluster ID"},
		{[]string{"--clusterset-config", "c", "--managed-by", "not valid!"}, "--managed-by:"},
		{[]string{"--clusterset-config", "c", "--managed-by", ""}, "--managed-by:"},
		{[]string{"--clusterset-config", "c", "--managed-by", "endpointslicemirroring-controller.k8s.io"}, "belongs to a Kubernetes controller"},
		{[]string{"--clusterset-config", "c", "--managed-by", "endpointslice-controller.k8s.io"}, "belongs to a Kubernetes controller"},
		{[]string{"--clusterset-config", "c", "--managed-by", "k8s.io"}, "belongs to a Kubernetes controller"},
		{[]string{"--clusterset-config", "c", "--managed-by", "kubernetes.io"}, "belongs to a Kubernetes controller"},
		{[]string{"--clusterset-config", "c", "--max-endpoints-per-slice", "0"}, "--max-endpoints-per-slice: 0 is outside 1..1000"},
		{[]string{"--clusterset-config", "c", "--max-endpoints-per-slice", "1001"}, "--max-endpoints-per-slice: 1001"},
		{[]string{"--clusterset-config", "c", "--cluster-unreachable-grace", "-1s"}, "--cluster-unreachable-grace: -1s is negative"},
		{[]string{"--clusterset-config", "c", "--cluster-unreachable-grace", "soon"}, "cluster-unreachable-grace"},
		{[]string{"--clusterset-config", "c", "extra"}, `unexpected argument "extra"`},
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"--clusterset-config", "c", "--kube-api-qps", "0"}, "--kube-api-qps: 0 is not a rate"},
		{[]string{"--clusterset-config", "c", "--kube-api-qps", "fast"}, "kube-api-qps"},
		{[]string{"--clusterset-config", "c", "--kube-api-qps", "NaN"}, "--kube-api-qps: NaN"},
		{[]string{"--clusterset-config", "c", "--kube-api-qps", "1e40"}, "--kube-api-qps: 1e+40"},
		{[]string{"--clusterset-config", "c", "--kube-api-burst", "0"}, "--kube-api-burst: 0 is not positive"},
		{[]string{"--clusterset-config", "c", "--kube-api-burst", "-3"}, "--kube-api-burst: -3"},
		{[]string{"--clusterset-config", "c", "--kube-api-burst", "many"}, "kube-api-burst"},
		{[]string{"--clusterset-config", "c", "--concurrent-import-syncs", "0"}, "--concurrent-import-syncs: 0 is not positive"},
		{[]string{"--clusterset-config", "c", "--concurrent-export-syncs", "-1"}, "--concurrent-export-syncs: -1 is not positive"},
		{[]string{"--clusterset-config", "c", "--concurrent-export-syncs", "2.5"}, "concurrent-export-syncs"},
		{[]string{"--clusterset-config", "c", "--heartbeat-interval", "500ms"}, "--heartbeat-interval: 500ms is under a second"},
		{[]string{"--clusterset-config", "c", "--leader-election-cluster", "east"}, "need --leader-elect"},
		{[]string{"--clusterset-config", "c", "--leader-elect", "--leader-election-cluster", "east", "--leader-election-kubeconfig", "k"}, "set one, not both"},
	} {
		_, err := parseFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v, want one line containing %q", tc.args, err, tc.want)
		}
	}
}

// TestTwoLabelClusterIDs: KEP-1645's cluster ID may be a cluster name and
// one more DNS label ("east.fleet-a"), in every flag that takes one.
func TestTwoLabelClusterIDs(t *testing.T) {
	o, err := parseFlags([]string{"--clusterset-config", "c", "--local-cluster", "east.fleet-a", "--leader-elect", "--leader-election-cluster", "west.fleet-b"}, io.Discard)
	if err != nil || o.localCluster != "east.fleet-a" || o.leaderElectCluster != "west.fleet-b" {
		t.Errorf("parseFlags: %+v, %v", o, err)
	}
}

// TestVersionNeedsNoConfig: --version answers without the settings a run
// needs, as `kubectl version --client` does.
func TestVersionNeedsNoConfig(t *testing.T) {
	o, err := parseFlags([]string{"--version"}, io.Discard)
	if err != nil || !o.printVersion {
		t.Errorf("--version: %+v, %v; want it parsed without --clusterset-config", o, err)
	}
}

func TestFlagDefaults(t *testing.T) {
	o, err := parseFlags([]string{"--clusterset-config", "c"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.managedBy != "mcs" || o.maxEndpointsPerSlice != 100 || o.unreachableGrace != 2*time.Minute || o.leaderElect || o.localCluster != "" {
		t.Errorf("defaults %+v", o)
	}
	if o.kubeAPIQPS >= 0 || o.kubeAPIBurst < 1 || o.importSyncs < 2 || o.exportSyncs < 2 {
		t.Errorf("client and worker defaults %+v: want no client-side limit and several workers", o)
	}
}

// TestNegativeQPSIsAccepted: a negative QPS turns client-side limiting off,
// as in controller-runtime.
func TestNegativeQPSIsAccepted(t *testing.T) {
	o, err := parseFlags([]string{"--clusterset-config", "c", "--kube-api-qps", "-5", "--kube-api-burst", "7"}, io.Discard)
	if err != nil || o.kubeAPIQPS != -5 || o.kubeAPIBurst != 7 {
		t.Fatalf("got %+v, %v", o, err)
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
		args     []string
		wantHost string
		wantErr  string
	}{
		{args: nil},
		{args: []string{"--leader-elect"}, wantErr: "--leader-elect: outside a cluster in central mode"},
		{args: []string{"--leader-elect", "--local-cluster", "east"}, wantHost: "https://127.0.0.1:6443"},
		{args: []string{"--leader-elect", "--leader-election-cluster", "east"}, wantHost: "https://127.0.0.1:6443"},
		{args: []string{"--leader-elect", "--leader-election-cluster", "west"}, wantErr: `--leader-election-cluster: "west" is not a member`},
		{args: []string{"--leader-elect", "--leader-election-kubeconfig", kc}, wantHost: "https://127.0.0.1:6443"},
		{args: []string{"--leader-elect", "--leader-election-kubeconfig", kc + ".missing"}, wantErr: "--leader-election-kubeconfig:"},
	} {
		o, err := parseFlags(append([]string{"--clusterset-config", "c"}, tc.args...), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := leaderElectionConfig(o, cfg)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want %q", tc.args, err, tc.wantErr)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.wantHost == "" && rc != nil:
			t.Errorf("%v: a Lease config without leader election", tc.args)
		case tc.wantHost != "" && (rc == nil || rc.Host != tc.wantHost):
			t.Errorf("%v: Lease config %v, want host %s", tc.args, rc, tc.wantHost)
		}
	}
}

// TestRunRefusesUselessConfigs: only a config that does not parse, or
// whose members cannot be reached at all, ends the process at start, with
// one line naming the problem.
func TestRunRefusesUselessConfigs(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ raw, want string }{
		"unparsable": {configHeader + "clusterset: prod\nmembers: [\n", "--clusterset-config: clusterset config"},
		"no member":  {configHeader + "clusterset: prod\nmembers:\n- id: east\n  kubeconfig: nope\n", "no member can be reached: member east: kubeconfig"},
	} {
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(tc.raw), 0o644); err != nil {
			t.Fatal(err)
		}
		o, err := parseFlags([]string{"--clusterset-config", path}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		err = run(o)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line containing %q", name, err, tc.want)
		}
		if !errors.As(err, new(configError)) {
			t.Errorf("%s: %v is not a configError (exit 2 like a bad flag)", name, err)
		}
	}
}

// TestCheckMode: a hub needs per-cluster mode, and the local member must
// have connection settings of its own (it is never read through the hub).
func TestCheckMode(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "k")
	writeKubeconfig(t, kubeconfig, "https://127.0.0.1:1")
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
	kc := filepath.Join(dir, "hub.kubeconfig")
	writeKubeconfig(t, kc, "https://127.0.0.1:6443")
	cfg, err := membership.ParseConfig([]byte(configHeader+"clusterset: prod\nhub: {kubeconfig: hub.kubeconfig}\nmembers:\n- id: east\n  kubeconfig: hub.kubeconfig\n- id: west\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{nil, {"--kube-api-qps", "30", "--kube-api-burst", "60"}} {
		o, err := parseFlags(append([]string{"--clusterset-config", "c"}, args...), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := cfg.Hub.RESTConfig()
		if err != nil {
			t.Fatal(err)
		}
		rc = withClientLimits(rc, o)
		if rc.QPS != float32(o.kubeAPIQPS) || rc.Burst != o.kubeAPIBurst {
			t.Errorf("%v: hub client QPS %v burst %d, want %v and %d", args, rc.QPS, rc.Burst, o.kubeAPIQPS, o.kubeAPIBurst)
		}
	}
}

// writeKubeconfig writes a kubeconfig of one API server (a token user)
// to path.
func writeKubeconfig(t *testing.T, path, server string) {
	t.Helper()
	kc := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: " + server + "}\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n"
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
}
