package syncer

import "testing"

// TestParseSample: the sample names the e2e tests and benchmarks ask for
// are split into name and labels; a malformed one is an error.
func TestParseSample(t *testing.T) {
	name, labels, err := parseSample(`controller_runtime_reconcile_total{controller="import-north",result="success"}`)
	if err != nil || name != "controller_runtime_reconcile_total" || len(labels) != 2 || labels["controller"] != "import-north" || labels["result"] != "success" {
		t.Errorf("got %s %v %v", name, labels, err)
	}
	if name, labels, err := parseSample("up"); err != nil || name != "up" || len(labels) != 0 {
		t.Errorf("got %s %v %v", name, labels, err)
	}
	for _, bad := range []string{`x{a=b}`, `x{a="b"`, `x{a}`} {
		if _, _, err := parseSample(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	families, err := ParseMetrics("# TYPE m gauge\nm{a=\"1\"} 3\n" +
		"# TYPE h histogram\nh_bucket{c=\"x\",le=\"1\"} 2\nh_bucket{c=\"x\",le=\"+Inf\"} 5\nh_sum{c=\"x\"} 7.5\nh_count{c=\"x\"} 5\n")
	if err != nil || families["m"].GetMetric()[0].GetGauge().GetValue() != 3 || Labels(families["m"].GetMetric()[0])["a"] != "1" {
		t.Errorf("ParseMetrics: %v %v", families, err)
	}
	// The e2e tests ask for a histogram's _count and _sum by name.
	for sample, want := range map[string]float64{`m{a="1"}`: 3, `h_count{c="x"}`: 5, `h_sum{c="x"}`: 7.5} {
		name, labels, _ := parseSample(sample)
		if got, ok := sampleValue(families, name, labels); !ok || got != want {
			t.Errorf("%s = %v (%v), want %v", sample, got, ok, want)
		}
	}
	if _, ok := sampleValue(families, "h_count", map[string]string{"c": "y"}); ok {
		t.Error("a sample with other labels was found")
	}
}
