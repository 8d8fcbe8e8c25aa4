package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mcs-syncer/mcs-syncer/internal/membership"
	"github.com/mcs-syncer/mcs-syncer/internal/publish"
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
		{[]string{"--clusterset-config", "c", "--max-publication-bytes-per-member", "1k"}, "--max-publication-bytes-per-member: 1k is under 1Mi"},
		{[]string{"--clusterset-config", "c", "--max-publication-bytes-per-member", "lots"}, `"lots" is not a quantity of bytes`},
		{[]string{"--clusterset-config", "c", "--leader-election-cluster", "east"}, "need --leader-elect"},
		{[]string{"--clusterset-config", "c", "--leader-elect", "--leader-election-cluster", "east", "--leader-election-kubeconfig", "k"}, "set one, not both"},
		{[]string{"--max-endpoints-per-slice", "0", "--heartbeat-interval", "1ms"}, "--clusterset-config: required; --max-endpoints-per-slice: 0 is outside 1..1000; --heartbeat-interval: 1ms is under a second"},
	} {
		_, err := parseFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v, want one line containing %q", tc.args, err, tc.want)
		}
	}
}

// TestPublicationBytesAsAQuantity: --max-publication-bytes-per-member
// takes a Kubernetes quantity, and defaults to publish's default.
func TestPublicationBytesAsAQuantity(t *testing.T) {
	for arg, want := range map[string]int64{"": publish.DefaultMaxBytesPerMember, "256Mi": 256 << 20, "100M": 100e6, "2097152": 2 << 20} {
		args := []string{"--clusterset-config", "c"}
		if arg != "" {
			args = append(args, "--max-publication-bytes-per-member", arg)
		}
		o, err := parseFlags(args, io.Discard)
		if err != nil || o.MaxPublicationBytesPerMember != want {
			t.Errorf("%q: %v, %v; want %d", arg, o, err, want)
		}
	}
}

// TestTwoLabelClusterIDs: KEP-1645's cluster ID may be a cluster name and
// one more DNS label ("east.fleet-a"), in every flag that takes one.
func TestTwoLabelClusterIDs(t *testing.T) {
	o, err := parseFlags([]string{"--clusterset-config", "c", "--local-cluster", "east.fleet-a", "--leader-elect", "--leader-election-cluster", "west.fleet-b"}, io.Discard)
	if err != nil || o.LocalCluster != "east.fleet-a" || o.LeaderElectCluster != "west.fleet-b" {
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
	if o.ManagedBy != "mcs" || o.MaxEndpointsPerSlice != 100 || o.UnreachableGrace != 2*time.Minute || o.LeaderElect || o.LocalCluster != "" {
		t.Errorf("defaults %+v", o)
	}
	if o.KubeAPIQPS >= 0 || o.KubeAPIBurst < 1 || o.ImportSyncs < 2 || o.ExportSyncs < 2 {
		t.Errorf("client and worker defaults %+v: want no client-side limit and several workers", o)
	}
}

// TestNegativeQPSIsAccepted: a negative QPS turns client-side limiting off,
// as in controller-runtime.
func TestNegativeQPSIsAccepted(t *testing.T) {
	o, err := parseFlags([]string{"--clusterset-config", "c", "--kube-api-qps", "-5", "--kube-api-burst", "7"}, io.Discard)
	if err != nil || o.KubeAPIQPS != -5 || o.KubeAPIBurst != 7 {
		t.Fatalf("got %+v, %v", o, err)
	}
}
