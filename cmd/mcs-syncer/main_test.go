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
}
