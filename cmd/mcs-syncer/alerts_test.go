package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/mcs-syncer/mcs-syncer/config/monitoring"
)

// monitoringDir holds the alerting rules (config/monitoring).
var monitoringDir = filepath.Join("..", "..", "config", "monitoring")

// controllerRuntimeMetrics are the metrics of controller-runtime's
// registry that the rules read: its leader election gauge
// (pkg/metrics/leaderelection.go) and the process collector's start time.
var controllerRuntimeMetrics = map[string]bool{"leader_election_master_status": true, "process_start_time_seconds": true}

type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

type ruleTests struct {
	Tests []struct {
		Name        string `json:"name"`
		InputSeries []struct {
			Series string `json:"series"`
		} `json:"input_series"`
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

func readYAML(t *testing.T, name string, into any) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(monitoringDir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, into); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return raw
}

// TestAlertRules: config/monitoring's rules are what promtool accepts and
// what their unit tests (rules_test.yaml) expect; the PrometheusRule holds
// the same groups; each alert has a severity, a summary, a description and
// a runbook_url to its section of docs/troubleshooting.md, and fires in at
// least one test; the tests feed only series that mcs-syncer exposes (an
// expression naming a metric that does not exist could not fire in them).
func TestAlertRules(t *testing.T) {
	var rules ruleFile
	readYAML(t, "rules.yaml", &rules)
	// Compared whole, every field, not only those ruleFile reads.
	var plain, wrapped map[string]any
	readYAML(t, "rules.yaml", &plain)
	readYAML(t, "prometheusrule.yaml", &wrapped)
	if wrapped["kind"] != "PrometheusRule" || !reflect.DeepEqual(wrapped["spec"], plain) {
		t.Error("prometheusrule.yaml's spec is not rules.yaml's groups")
	}
	anchors := headingAnchors(t, filepath.Join("..", "..", "docs", "troubleshooting.md"))
	alerts := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
			if r.Labels["severity"] != "critical" && r.Labels["severity"] != "warning" {
				t.Errorf("%s: severity %q", r.Alert, r.Labels["severity"])
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: no summary or description", r.Alert)
			}
			if want := "docs/troubleshooting.md#" + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want || !anchors[strings.ToLower(r.Alert)] {
				t.Errorf("%s: runbook_url %q; want %s, a heading of docs/troubleshooting.md", r.Alert, r.Annotations["runbook_url"], want)
			}
		}
	}
	if len(alerts) < 9 {
		t.Fatalf("read %d alerts: the file's format changed", len(alerts))
	}
	var tests ruleTests
	readYAML(t, "rules_test.yaml", &tests)
	registered := registeredMetrics(t).names
	metricName := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`)
	fired := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, in := range tc.InputSeries {
			name := metricName.FindString(in.Series)
			if !metricExists(registered, name) && !controllerRuntimeMetrics[name] {
				t.Errorf("rules_test.yaml (%s) feeds %s, which mcs-syncer does not expose", tc.Name, name)
			}
		}
		for _, a := range tc.AlertRuleTest {
			if !alerts[a.Alertname] {
				t.Errorf("rules_test.yaml (%s) tests %s, which is no alert", tc.Name, a.Alertname)
			}
			if len(a.ExpAlerts) > 0 {
				fired[a.Alertname] = true
			}
		}
	}
	for a := range alerts {
		if !fired[a] {
			t.Errorf("no test of rules_test.yaml makes %s fire", a)
		}
	}

	promtool, err := exec.LookPath("promtool")
	if errors.Is(err, exec.ErrNotFound) && testing.Short() {
		t.Skip("promtool is not installed (Debian's prometheus package; .ci/run installs it): make test runs the rules' unit tests")
	}
	if err != nil {
		t.Fatalf("promtool: %v (install Debian's prometheus package: .ci/run does)", err)
	}
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "rules_test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = monitoringDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestDashboard: config/monitoring/dashboard.json is a Grafana dashboard
// whose every panel has a title and queries, and whose queries name only
// metrics that mcs-syncer registers. (The e2e test of the alerts has a
// real Prometheus run each query.)
func TestDashboard(t *testing.T) {
	queries, bad, err := monitoring.DashboardQueries()
	if err != nil {
		t.Fatal(err)
	}
	if bad > 0 || len(queries) < 10 {
		t.Fatalf("%d queries, %d panels without a title or a query", len(queries), bad)
	}
	registered := registeredMetrics(t).names
	metric := regexp.MustCompile(`mcs_syncer_[a-z0-9_]*[a-z0-9]`)
	for _, q := range queries {
		names := metric.FindAllString(q.Expr, -1)
		if len(names) == 0 {
			t.Errorf("panel %q: %s reads no metric of mcs-syncer", q.Panel, q.Expr)
		}
		for _, name := range names {
			if !metricExists(registered, name) {
				t.Errorf("panel %q reads %s, which mcs-syncer does not register", q.Panel, name)
			}
		}
	}
}
