package main

import (
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/mcs-syncer/mcs-syncer/test/testbed/syncer"
)

// percentile returns the p-th percentile (0..100) of samples, by the
// nearest-rank method, or 0 for none.
func percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	rank := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(rank, 0), len(s)-1)]
}

// histogram is the cumulative buckets of one Prometheus histogram series.
type histogram struct {
	le     []float64 // upper bounds, ascending, +Inf last
	counts []float64 // cumulative
}

// parseHistogram reads the buckets of the histogram name{labels...} from a
// /metrics text, summed over every series whose labels include those
// given and whose bounds are the first such series' (those of one metric
// share them).
func parseHistogram(text, name string, labels map[string]string) histogram {
	var h histogram
	families, err := syncer.ParseMetrics(text)
	if err != nil {
		return h
	}
	for _, m := range families[name].GetMetric() {
		got := syncer.Labels(m)
		match := m.GetHistogram() != nil
		for k, v := range labels {
			match = match && got[k] == v
		}
		if !match {
			continue
		}
		var le, counts []float64
		for _, b := range m.GetHistogram().GetBucket() {
			le = append(le, b.GetUpperBound())
			counts = append(counts, float64(b.GetCumulativeCount()))
		}
		if len(le) == 0 || !math.IsInf(le[len(le)-1], 1) {
			// The +Inf bucket is the histogram's count.
			le = append(le, math.Inf(1))
			counts = append(counts, float64(m.GetHistogram().GetSampleCount()))
		}
		switch {
		case h.le == nil:
			h = histogram{le: le, counts: counts}
		case slices.Equal(le, h.le):
			for i := range h.counts {
				h.counts[i] += counts[i]
			}
		}
	}
	return h
}

// minus returns the observations of h made since before was read.
func (h histogram) minus(before histogram) histogram {
	out := histogram{le: h.le, counts: slices.Clone(h.counts)}
	for i := range out.counts {
		if i < len(before.counts) {
			out.counts[i] -= before.counts[i]
		}
	}
	return out
}

func (h histogram) count() float64 {
	if len(h.counts) == 0 {
		return 0
	}
	return h.counts[len(h.counts)-1]
}

// quantile estimates the q-quantile (0..1) as PromQL's histogram_quantile
// does: linear interpolation inside the bucket that holds it.
func (h histogram) quantile(q float64) time.Duration {
	total := h.count()
	if total == 0 {
		return 0
	}
	rank := q * total
	for i, c := range h.counts {
		if c < rank {
			continue
		}
		if math.IsInf(h.le[i], 1) {
			return time.Duration(h.le[max(i-1, 0)] * float64(time.Second))
		}
		lower, below := 0.0, 0.0
		if i > 0 {
			lower, below = h.le[i-1], h.counts[i-1]
		}
		inBucket := c - below
		if inBucket == 0 {
			return time.Duration(h.le[i] * float64(time.Second))
		}
		v := lower + (h.le[i]-lower)*(rank-below)/inBucket
		return time.Duration(v * float64(time.Second))
	}
	return 0
}

// ms formats a duration in milliseconds.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// ratio formats a/b, or "-" when b is zero.
func ratio(a, b time.Duration) string {
	if b == 0 {
		return "-"
	}
	return strconv.FormatFloat(float64(a)/float64(b), 'f', 2, 64) + "x"
}
