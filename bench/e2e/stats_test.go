package main

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 100; i >= 1; i-- {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]time.Duration{50: 50 * time.Millisecond, 90: 90 * time.Millisecond, 99: 99 * time.Millisecond, 100: 100 * time.Millisecond} {
		if got := percentile(s, p); got != want {
			t.Errorf("p%v = %v, want %v", p, got, want)
		}
	}
	if percentile(nil, 50) != 0 {
		t.Error("no samples: want 0")
	}
}

func TestHistogramQuantile(t *testing.T) {
	text := `# HELP x_seconds h
# TYPE x_seconds histogram
x_seconds_bucket{a="1",b="east",le="0.01"} 2
x_seconds_bucket{a="1",b="east",le="0.02"} 6
x_seconds_bucket{a="1",b="east",le="+Inf"} 10
x_seconds_sum{a="1",b="east"} 0.2
x_seconds_count{a="1",b="east"} 10
x_seconds_bucket{a="1",b="west",le="0.01"} 100
x_seconds_bucket{a="1",b="west",le="+Inf"} 100
x_seconds_sum{a="1",b="west"} 1
x_seconds_count{a="1",b="west"} 100
`
	before := parseHistogram(`# TYPE x_seconds histogram
x_seconds_bucket{a="1",b="east",le="0.01"} 1
x_seconds_bucket{a="1",b="east",le="0.02"} 1
x_seconds_bucket{a="1",b="east",le="+Inf"} 2
x_seconds_sum{a="1",b="east"} 0.1
x_seconds_count{a="1",b="east"} 2
`, "x_seconds", map[string]string{"b": "east"})
	h := parseHistogram(text, "x_seconds", map[string]string{"b": "east"})
	if len(h.le) != 3 || h.count() != 10 {
		t.Fatalf("parsed %+v", h)
	}
	// 5th of 10 observations: 3 more than the 2 below 10 ms, of the 4 in
	// (10 ms, 20 ms]: 17.5 ms.
	if got := h.quantile(0.5); got != 17500*time.Microsecond {
		t.Errorf("p50 = %v, want 17.5ms", got)
	}
	d := h.minus(before)
	if d.count() != 8 || d.quantile(0.5) != 17500*time.Microsecond {
		t.Errorf("delta: count %v p50 %v", d.count(), d.quantile(0.5))
	}
}

func TestParseHistogramSumsTheSeriesThatMatch(t *testing.T) {
	text := `# TYPE y_seconds histogram
y_seconds_bucket{source="east",consumer="north",le="0.1"} 1
y_seconds_bucket{source="east",consumer="north",le="+Inf"} 2
y_seconds_sum{source="east",consumer="north"} 1
y_seconds_count{source="east",consumer="north"} 2
y_seconds_bucket{source="west",consumer="north",le="0.1"} 3
y_seconds_bucket{source="west",consumer="north",le="+Inf"} 3
y_seconds_sum{source="west",consumer="north"} 0.1
y_seconds_count{source="west",consumer="north"} 3
y_seconds_bucket{source="west",consumer="south",le="0.1"} 50
y_seconds_bucket{source="west",consumer="south",le="+Inf"} 50
y_seconds_sum{source="west",consumer="south"} 1
y_seconds_count{source="west",consumer="south"} 50
`
	h := parseHistogram(text, "y_seconds", map[string]string{"consumer": "north"})
	if h.count() != 5 || h.counts[0] != 4 {
		t.Fatalf("north's series summed: %+v, want 4 of 5 observations within 0.1 s", h)
	}
}
