package testbed

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
func (s *Syncer) MetricFamilies(ctx context.Context) (map[string]*dto.MetricFamily, error) {
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
func (s *Syncer) Metric(ctx context.Context, sample string) (float64, error) {
	name, labels, err := parseSample(sample)
	if err != nil {
		return 0, err
	}
	families, err := s.MetricFamilies(ctx)
	if err != nil {
		return 0, err
	}
	for _, m := range families[name].GetMetric() {
		if !maps.Equal(Labels(m), labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), nil
		case m.Gauge != nil:
			return m.Gauge.GetValue(), nil
		case m.Untyped != nil:
			return m.Untyped.GetValue(), nil
		}
	}
	return 0, fmt.Errorf("no sample %s in mcs-syncer's /metrics", sample)
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
