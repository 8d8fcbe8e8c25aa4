package membership

import (
	"os"
	"strings"
	"testing"
)

// TestStatesAreDocumented: every member state has its row in the
// troubleshooting guide's table and its name in the state metric's line of
// docs/metrics.md, and neither names a state that does not exist.
func TestStatesAreDocumented(t *testing.T) {
	troubleshooting, err := os.ReadFile("../../docs/troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(troubleshooting), "\n## Member states\n")
	section, _, _ = strings.Cut(section, "\n## ")
	var rows []string // the states of the table's rows, in order
	for _, line := range strings.Split(section, "\n") {
		if name, ok := strings.CutPrefix(line, "| `"); ok {
			if name, _, ok = strings.Cut(name, "` |"); ok {
				rows = append(rows, name)
			}
		}
	}
	var metricLine string
	for _, line := range strings.Split(string(metrics), "\n") {
		if strings.HasPrefix(line, "| `mcs_syncer_member_state`") {
			metricLine = line
		}
	}
	var want []string
	for _, s := range states {
		want = append(want, string(s))
	}
	// Its meaning opens with the metric's Help, which lists the states.
	_, listed, _ := strings.Cut(metricLine, "current state (")
	listed, _, _ = strings.Cut(listed, ")")
	if listed != strings.Join(want, ", ") {
		t.Errorf("docs/metrics.md: mcs_syncer_member_state lists the states %q, want %q", listed, strings.Join(want, ", "))
	}
	if strings.Join(rows, " ") != strings.Join(want, " ") {
		t.Errorf("docs/troubleshooting.md, Member states: rows %v, want one per state in order %v", rows, want)
	}
}

// TestConfigurationExamplesParse: every clusterset config shown in
// docs/configuration.md is one mcs-syncer reads.
func TestConfigurationExamplesParse(t *testing.T) {
	raw, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	examples := 0
	for _, block := range strings.Split(string(raw), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if !strings.Contains(block, "kind: "+ConfigKind) {
			continue
		}
		examples++
		if _, err := ParseConfig([]byte(block), t.TempDir()); err != nil {
			t.Errorf("%v:\n%s", err, block)
		}
	}
	if examples < 2 {
		t.Errorf("%d clusterset configs in docs/configuration.md, want the two of central and hub mode", examples)
	}
}
