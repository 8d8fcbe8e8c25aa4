package main

// The tests of this file keep the docs in step with the code: the
// README's flag table with the flags, docs/metrics.md with the metrics,
// the README's layout with the tree. Each fails naming what is missing
// where, so that nothing is added, renamed or removed without its line.

import (
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcs-syncer/mcs-syncer/internal/syncer"
)

// TestREADMEListsEveryFlag: the README's flag table and the flags
// mcs-syncer registers (its --help) name the same flags, so that neither
// changes without the other. controller-runtime's zap flags are one row.
func TestREADMEListsEveryFlag(t *testing.T) {
	var usage strings.Builder
	if _, err := parseFlags([]string{"-h"}, &usage); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v, want flag.ErrHelp", err)
	}
	registered := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(usage.String(), -1) {
		registered[m[1]] = true
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "| flag | default | meaning |\n")
	if !ok {
		t.Fatal(`README.md: no flag table ("| flag | default | meaning |")`)
	}
	documented := map[string]bool{}
	for _, row := range strings.Split(table, "\n") {
		if !strings.HasPrefix(row, "|") {
			break
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(row, "|"), "|")
		for _, m := range regexp.MustCompile("`--([a-z0-9-]+)`").FindAllStringSubmatch(first, -1) {
			documented[m[1]] = true
		}
	}
	if len(registered) < 10 || len(documented) < 10 {
		t.Fatalf("read %d registered and %d documented flags: the usage or the table's format changed", len(registered), len(documented))
	}
	for name := range registered {
		if !documented[name] && !(strings.HasPrefix(name, "zap-") && documented["zap-log-level"]) {
			t.Errorf("--%s is a flag of mcs-syncer but not in README.md's flag table", name)
		}
	}
	for name := range documented {
		if !registered[name] {
			t.Errorf("README.md's flag table names --%s, which mcs-syncer does not have", name)
		}
	}
}

// TestMetricsAreDocumented: docs/metrics.md names every metric mcs-syncer
// registers (syncer.New registers them all), and
// none that it does not, so that a metric cannot be added, renamed or
// removed without its line.
func TestMetricsAreDocumented(t *testing.T) {
	reg := &describing{names: map[string]bool{}}
	dir := t.TempDir()
	kubeconfig := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:1\"}\n" +
		"contexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {}\n"
	path := filepath.Join(dir, "clusterset.yaml")
	for name, content := range map[string]string{"east.kubeconfig": kubeconfig, "clusterset.yaml": configHeader + "clusterset: prod\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	o, err := parseFlags([]string{"--clusterset-config", path, "--metrics-bind-address", "0", "--health-probe-bind-address", "0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := syncer.New(o.Settings, reg); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, row := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(row, "| `mcs_syncer_") {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(row, "|"), "|")
		for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(first, -1) {
			documented[m[1]] = true
		}
	}
	if len(reg.names) < 10 || len(documented) < 10 {
		t.Fatalf("read %d registered and %d documented metrics: the registration or the table's format changed", len(reg.names), len(documented))
	}
	for name := range reg.names {
		if !documented[name] {
			t.Errorf("%s is registered but not in docs/metrics.md's table (one full name per metric)", name)
		}
	}
	for name := range documented {
		if !reg.names[name] {
			t.Errorf("docs/metrics.md names %s, which mcs-syncer does not register", name)
		}
	}
}

// describing is a Registerer that keeps the names of what it is given.
type describing struct{ names map[string]bool }

func (d *describing) Register(c prometheus.Collector) error {
	descs := make(chan *prometheus.Desc)
	go func() { c.Describe(descs); close(descs) }()
	for desc := range descs {
		if m := regexp.MustCompile(`fqName: "([^"]+)"`).FindStringSubmatch(desc.String()); m != nil {
			d.names[m[1]] = true
		}
	}
	return nil
}

func (d *describing) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d *describing) Unregister(prometheus.Collector) bool { return false }

// TestREADMELayout: every folder the README's Layout names exists, and
// every folder of Go code is named there, itself or under a folder named
// with a trailing slash ("bench/": all of it). A two-space indented entry
// is under the entry above it that is not indented.
func TestREADMELayout(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, layout, found := strings.Cut(string(readme), "## Layout\n\n```\n")
	layout, _, closed := strings.Cut(layout, "```")
	if !found || !closed {
		t.Fatal("README.md: no Layout block (## Layout, then a ``` block)")
	}
	var entries []string
	parent := ""
	for _, line := range strings.Split(layout, "\n") {
		switch {
		case line == "" || strings.HasPrefix(line, "   "): // a description's next line
		case strings.HasPrefix(line, "  "):
			entries = append(entries, path.Join(parent, strings.Fields(line)[0])+suffixSlash(strings.Fields(line)[0]))
		default:
			parent = strings.Fields(line)[0]
			entries = append(entries, parent)
		}
	}
	root := filepath.Join("..", "..")
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(root, e)); err != nil {
			t.Errorf("README.md's Layout names %s: %v", e, err)
		}
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "*.go").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git work tree?)", err)
	}
	var folders []string
	for _, f := range strings.Fields(string(out)) {
		if d := path.Dir(f); !slices.Contains(folders, d) {
			folders = append(folders, d)
		}
	}
	if len(entries) < 10 || len(folders) < 10 {
		t.Fatalf("read %d Layout entries and %d Go folders: the block's format changed", len(entries), len(folders))
	}
	for _, d := range folders {
		named := slices.ContainsFunc(entries, func(e string) bool {
			return strings.TrimSuffix(e, "/") == d || (strings.HasSuffix(e, "/") && strings.HasPrefix(d+"/", e))
		})
		if !named {
			t.Errorf("%s holds Go code but README.md's Layout does not name it (nor a folder above it with a trailing slash)", d)
		}
	}
}

func suffixSlash(entry string) string {
	if strings.HasSuffix(entry, "/") {
		return "/"
	}
	return ""
}
