package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestFlagsRejectBadValues: every bad value is refused with one line that
// names its flag.
func TestFlagsRejectBadValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--clusterset-config: required"},
		{[]string{"--clusterset-config", "c", "--local-cluster", "East"}, "--local-cluster:"},
		{[]string{"--clusterset-config", "c", "--managed-by", "not valid!"}, "--managed-by:"},
		{[]string{"--clusterset-config", "c", "--managed-by", ""}, "--managed-by:"},
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
	} {
		_, err := parseFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v, want one line containing %q", tc.args, err, tc.want)
		}
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
