package clusterset

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseClusterID(t *testing.T) {
	if _, err := ParseClusterID("east-1"); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"", "East", "a.b", strings.Repeat("a", 64), "-east"} {
		if _, err := ParseClusterID(bad); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("ParseClusterID(%q): %v", bad, err)
		}
	}
}
