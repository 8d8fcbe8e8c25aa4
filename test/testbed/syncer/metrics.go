package syncer

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ParseMetrics parses a /metrics text (the Prometheus exposition format)
// into its metric families, by name.
func ParseMetrics(text string) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	return families, nil
}

// Labels returns a metric's labels as a map.
func Labels(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// MetricFamilies returns the metric families of mcs-syncer's /metrics.
func (s *Process) MetricFamilies(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	text, err := s.Metrics(ctx)
	if err != nil {
		return nil, err
	}
	return ParseMetrics(text)
}

// Metric returns the value of the counter, gauge or untyped sample of its
// /metrics whose name and labels (all of them, as written in the
// exposition format, e.g.
// `controller_runtime_reconcile_total{controller="import-north",result="success"}`)
// are given. A sample that is not there is an error: a renamed or
// unregistered metric must not read as 0.
func (s *Process) Metric(ctx context.Context, sample string) (float64, error) {
	name, labels, err := parseSample(sample)
	if err != nil {
		return 0, err
	}
	families, err := s.MetricFamilies(ctx)
	if err != nil {
		return 0, err
	}
	if v, ok := sampleValue(families, name, labels); ok {
		return v, nil
	}
	return 0, fmt.Errorf("no sample %s in mcs-syncer's /metrics", sample)
}

// sampleValue finds the sample name{labels} among families: a counter,
// gauge or untyped value, or a histogram's or summary's _count or _sum
// (which the parser folds into the family without the suffix).
func sampleValue(families map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	for _, m := range families[name].GetMetric() {
		if !maps.Equal(Labels(m), labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	for _, suffix := range []string{"_count", "_sum"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		for _, m := range families[base].GetMetric() {
			if !maps.Equal(Labels(m), labels) {
				continue
			}
			switch {
			case m.Histogram != nil && suffix == "_count":
				return float64(m.Histogram.GetSampleCount()), true
			case m.Histogram != nil:
				return m.Histogram.GetSampleSum(), true
			case m.Summary != nil && suffix == "_count":
				return float64(m.Summary.GetSampleCount()), true
			case m.Summary != nil:
				return m.Summary.GetSampleSum(), true
			}
		}
	}
	return 0, false
}

// parseSample splits `name{a="x",b="y"}` into its name and labels.
func parseSample(sample string) (string, map[string]string, error) {
	name, rest, found := strings.Cut(sample, "{")
	labels := map[string]string{}
	if !found {
		return name, labels, nil
	}
	rest, ok := strings.CutSuffix(rest, "}")
	for ok && rest != "" {
		var k, v string
		k, rest, ok = strings.Cut(rest, "=")
		if !ok {
			break
		}
		var err error
		if v, err = strconv.QuotedPrefix(rest); err != nil {
			return "", nil, fmt.Errorf("sample %s: label %s: %w", sample, k, err)
		}
		labels[k], _ = strconv.Unquote(v)
		rest = strings.TrimPrefix(rest[len(v):], ",")
	}
	if !ok {
		return "", nil, fmt.Errorf("sample %s: not of the form name{label=\"value\",...}", sample)
	}
	return name, labels, nil
}
