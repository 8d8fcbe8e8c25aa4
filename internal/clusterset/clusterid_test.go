package clusterset

import (
	"fmt"
	"strings"
	"testing"
)

// TestParseClusterID: KEP-1645, "cluster id": "must be either equal to
// cluster name, or composed of two valid RFC 1123 DNS labels separated with
// a dot"; and it is the value of the source-cluster label (63 characters).
func TestParseClusterID(t *testing.T) {
	for _, id := range []string{"east-1", "east.fleet-a", "0.1", strings.Repeat("a", 63), strings.Repeat("a", 31) + "." + strings.Repeat("b", 31)} {
		if got, err := ParseClusterID(id); err != nil || string(got) != id {
			t.Errorf("ParseClusterID(%q) = %q, %v", id, got, err)
		}
	}
	for bad, says := range map[string]string{
		"":                      "not a DNS-1123 label",
		"East":                  "not a DNS-1123 label",
		"-east":                 "not a DNS-1123 label",
		"east.":                 `"" is not a DNS-1123 label`,
		".east":                 `"" is not a DNS-1123 label`,
		"east.Fleet":            `"Fleet" is not a DNS-1123 label`,
		"east.fleet.a":          "3 dot-separated parts",
		"east_1":                "not a DNS-1123 label",
		strings.Repeat("a", 64): "not a DNS-1123 label",
		strings.Repeat("a", 32) + "." + strings.Repeat("b", 31): "has 64 characters",
	} {
		_, err := ParseClusterID(bad)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) || !strings.Contains(err.Error(), says) {
			t.Errorf("ParseClusterID(%q): %v, want an error naming it that says %q", bad, err, says)
		}
	}
}
