package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/mcs-syncer/mcs-syncer/test/testbed/syncer"
)

// stages are the histograms that say where an importer's time goes.
var stages = []struct{ label, metric, key, value string }{
	{"queued (workqueue)", "workqueue_queue_duration_seconds", "name", "import-"},
	{"reconcile", "controller_runtime_reconcile_time_seconds", "controller", "import-"},
	{"trigger to write (mcs_syncer_propagation_latency_seconds)", "mcs_syncer_propagation_latency_seconds", "consumer_cluster", ""},
}

// breakdown is an importer's metrics read twice; between them, where its
// time went.
type breakdown struct {
	consumer string
	before   string
}

func startBreakdown(ctx context.Context, p *syncer.Process, consumer string) (*breakdown, error) {
	text, err := p.Metrics(ctx)
	return &breakdown{consumer: consumer, before: text}, err
}

// report reads the metrics again and describes each stage's p50 and p99
// since the first reading, and the reconciles of the consumer's import
// controller by result.
func (b *breakdown) report(ctx context.Context, p *syncer.Process) (string, error) {
	after, err := p.Metrics(ctx)
	if err != nil {
		return "", err
	}
	var lines []string
	for _, s := range stages {
		match := map[string]string{s.key: s.value + b.consumer}
		h := parseHistogram(after, s.metric, match).minus(parseHistogram(b.before, s.metric, match))
		lines = append(lines, fmt.Sprintf("%s p50/p99 %s/%s ms over %.0f", s.label, ms(h.quantile(0.5)), ms(h.quantile(0.99)), h.count()))
	}
	families, err := syncer.ParseMetrics(after)
	if err != nil {
		return "", err
	}
	earlier, err := syncer.ParseMetrics(b.before)
	if err != nil {
		return "", err
	}
	var syncs []string
	for _, m := range families["mcs_syncer_endpointslice_reconciler_syncs_total"].GetMetric() {
		result := syncer.Labels(m)["result"]
		was := 0.0
		for _, e := range earlier["mcs_syncer_endpointslice_reconciler_syncs_total"].GetMetric() {
			if syncer.Labels(e)["result"] == result {
				was = e.GetCounter().GetValue()
			}
		}
		syncs = append(syncs, fmt.Sprintf("%s %.0f", result, m.GetCounter().GetValue()-was))
	}
	slices.Sort(syncs)
	lines = append(lines, "slice syncs: "+strings.Join(syncs, ", "))
	return strings.Join(lines, "; "), nil
}
