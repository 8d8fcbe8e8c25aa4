package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcs-syncer/mcs-syncer/config/monitoring"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
)

// TestMemberDownAlertOnARealPrometheus: a real Prometheus (Debian's
// package; .ci/run installs it) scrapes an mcs-syncer with the default
// grace (2m) and evaluates config/monitoring/rules.yaml as shipped. West's
// API server stopped makes MCSMemberDown fire for west, after its for
// (1m) and within the grace, before west's endpoints leave the imports;
// west back, it resolves.
func TestMemberDownAlertOnARealPrometheus(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	exclusive(t)
	// With leader election, as config/manager runs it: MCSNoLeader must
	// stay silent while one leads.
	s := ownSyncer(ctx, t, bed.ConfigPath, "--cluster-unreachable-grace", "2m",
		"--leader-elect", "--leader-election-namespace", "default", "--leader-election-cluster", "north")
	prom := startPrometheus(ctx, t, s.MetricsAddr)
	eventually(ctx, t, "Prometheus to scrape west up", prom.says(ctx, `mcs_syncer_member_up{cluster="west"}`, 1))
	eventually(ctx, t, "Prometheus to scrape a leader", prom.says(ctx, `max(leader_election_master_status{name=~"mcs-syncer-.+"})`, 1))
	if err := prom.silent(ctx, "MCSMemberDown", "MCSHubUnreachable", "MCSNoLeader")(); err != nil {
		t.Fatalf("on a healthy clusterset: %v", err)
	}
	prom.runsTheDashboard(ctx, t)

	westBed := bed.Cluster("west")
	if err := westBed.StopAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	down := true
	t.Cleanup(func() {
		if down {
			_ = westBed.StartAPIServer(context.Background())
		}
	})
	stopped := time.Now()
	eventually(ctx, t, "MCSMemberDown to fire for west", prom.firing(ctx, "MCSMemberDown", "west"))
	fired := time.Since(stopped)
	t.Logf("MCSMemberDown fired for west %s after its API server stopped (for: 1m; grace 2m)", fired.Round(time.Second))
	if fired < time.Minute || fired > 2*time.Minute {
		t.Errorf("fired after %s: not between its for (1m) and the grace (2m)", fired)
	}
	if err := westBed.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	down = false
	back := time.Now()
	eventually(ctx, t, "MCSMemberDown to resolve", prom.silent(ctx, "MCSMemberDown"))
	t.Logf("resolved %s after west's API server was back", time.Since(back).Round(time.Second))
}

// prometheus is a Prometheus server of a test.
type prometheus struct{ addr string }

// startPrometheus runs Prometheus, scraping target (an mcs-syncer's
// /metrics) and evaluating config/monitoring/rules.yaml every second, until
// the test ends. Its log is printed if the test fails.
func startPrometheus(ctx context.Context, t *testing.T, target string) *prometheus {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus: %v (Debian's prometheus package: .ci/run installs it)", err)
	}
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rules, monitoring.Rules, 0o644); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [%q]\n"+
		"scrape_configs:\n- job_name: mcs-syncer\n  static_configs: [{targets: [%q]}]\n", rules, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	port, err := host.FreePort(false)
	if err != nil {
		t.Fatal(err)
	}
	p := &prometheus{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	logPath := filepath.Join(dir, "prometheus.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file", filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path", filepath.Join(dir, "data"),
		"--web.listen-address", p.addr)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logFile.Close()
		if t.Failed() {
			log, _ := os.ReadFile(logPath)
			t.Logf("Prometheus' log:\n%s", log)
		}
	})
	eventually(ctx, t, "Prometheus to be ready", func() error {
		resp, err := http.Get("http://" + p.addr + "/-/ready")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/-/ready: %s", resp.Status)
		}
		return nil
	})
	return p
}

// get decodes the data of an answer of Prometheus' HTTP API at path.
func (p *prometheus) get(ctx context.Context, path string, data any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	var answer struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if answer.Status != "success" {
		return fmt.Errorf("%s: %s", path, answer.Error)
	}
	return json.Unmarshal(answer.Data, data)
}

type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

func (a promAlert) String() string {
	return a.Labels["alertname"] + "/" + a.Labels["cluster"] + ":" + a.State
}

// alerts returns the pending and firing alerts.
func (p *prometheus) alerts(ctx context.Context) ([]promAlert, error) {
	var data struct {
		Alerts []promAlert `json:"alerts"`
	}
	err := p.get(ctx, "/api/v1/alerts", &data)
	return data.Alerts, err
}

// firing returns a check that alert fires for cluster.
func (p *prometheus) firing(ctx context.Context, alert, cluster string) func() error {
	return func() error {
		alerts, err := p.alerts(ctx)
		if err != nil {
			return err
		}
		for _, a := range alerts {
			if a.Labels["alertname"] == alert && a.Labels["cluster"] == cluster && a.State == "firing" {
				return nil
			}
		}
		return fmt.Errorf("alerts: %v", alerts)
	}
}

// runsTheDashboard runs every query of config/monitoring/dashboard.json
// (Grafana's variables given values): each must parse, and the members'
// panel must have data.
func (p *prometheus) runsTheDashboard(ctx context.Context, t *testing.T) {
	t.Helper()
	queries, _, err := monitoring.DashboardQueries()
	if err != nil {
		t.Fatal(err)
	}
	grafana := strings.NewReplacer("$__rate_interval", "1m", "$cluster", ".*")
	for _, q := range queries {
		var data struct {
			Result []any `json:"result"`
		}
		if err := p.get(ctx, "/api/v1/query?query="+url.QueryEscape(grafana.Replace(q.Expr)), &data); err != nil {
			t.Errorf("panel %q: %v", q.Panel, err)
		}
		if q.Panel == "Members up" && len(data.Result) != 3 {
			t.Errorf("panel %q: %d series, want one per member", q.Panel, len(data.Result))
		}
	}
}

// silent returns a check that none of names is pending or firing.
func (p *prometheus) silent(ctx context.Context, names ...string) func() error {
	return func() error {
		alerts, err := p.alerts(ctx)
		if err != nil {
			return err
		}
		for _, a := range alerts {
			if slices.Contains(names, a.Labels["alertname"]) {
				return fmt.Errorf("alerts: %v", alerts)
			}
		}
		return nil
	}
}

// says returns a check that the instant query's one sample is want.
func (p *prometheus) says(ctx context.Context, query string, want float64) func() error {
	return func() error {
		var data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		}
		if err := p.get(ctx, "/api/v1/query?query="+url.QueryEscape(query), &data); err != nil {
			return err
		}
		if len(data.Result) != 1 {
			return fmt.Errorf("%s: %d samples", query, len(data.Result))
		}
		if v, _ := data.Result[0].Value[1].(string); v != strconv.FormatFloat(want, 'f', -1, 64) {
			return fmt.Errorf("%s = %v", query, data.Result[0].Value[1])
		}
		return nil
	}
}
