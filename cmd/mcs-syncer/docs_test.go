package main

// The tests of this file keep the docs in step with the code: the flag
// tables of the README and docs/configuration.md with the flags, docs/metrics.md with the metrics,
// the README's layout with the tree. Each fails naming what is missing
// where, so that nothing is added, renamed or removed without its line.

import (
	"flag"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcs-syncer/mcs-syncer/internal/syncer"
)

// TestFlagTablesMatchTheFlags: the flag tables of README.md and
// docs/configuration.md name every flag mcs-syncer registers and no other,
// each with its default, so that no flag or default changes without its
// docs. controller-runtime's zap flags are one row, without defaults.
func TestFlagTablesMatchTheFlags(t *testing.T) {
	fs := newFlagSet(&options{}, io.Discard)
	for _, doc := range []string{"README.md", filepath.Join("docs", "configuration.md")} {
		rows := flagTable(t, doc)
		if len(rows) < 10 {
			t.Fatalf("%s: read %d rows of its flag table: its format changed", doc, len(rows))
		}
		documented := map[string]bool{}
		for _, row := range rows {
			defaults := splitDefaults(row.defaults, len(row.flags))
			for i, name := range row.flags {
				documented[name] = true
				f := fs.Lookup(name)
				if f == nil {
					t.Errorf("%s's flag table names --%s, which mcs-syncer does not have", doc, name)
					continue
				}
				if !strings.HasPrefix(name, "zap-") && !sameDefault(defaults[i], f) {
					t.Errorf("%s's flag table gives --%s the default %q; the flag's is %q", doc, name, defaults[i], f.DefValue)
				}
			}
		}
		fs.VisitAll(func(f *flag.Flag) {
			if !documented[f.Name] && !(strings.HasPrefix(f.Name, "zap-") && documented["zap-log-level"]) {
				t.Errorf("--%s is a flag of mcs-syncer but not in %s's flag table", f.Name, doc)
			}
		})
	}
}

// flagRow is one row of a doc's flag table: the flags of its first column
// and its default column, backticks removed.
type flagRow struct {
	flags    []string
	defaults string
}

func flagTable(t *testing.T, doc string) []flagRow {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", doc))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(raw), "| flag | default | meaning |\n|---|---|---|\n")
	if !ok {
		t.Fatalf("%s: no flag table (| flag | default | meaning |)", doc)
	}
	var rows []flagRow
	for _, line := range strings.Split(table, "\n") {
		cells := strings.SplitN(line, "|", 4) // "", flags, default, meaning
		if !strings.HasPrefix(line, "| ") || len(cells) < 4 {
			break
		}
		row := flagRow{defaults: strings.TrimSpace(strings.ReplaceAll(cells[2], "`", ""))}
		for _, m := range regexp.MustCompile("`--([a-z0-9-]+)`").FindAllStringSubmatch(cells[1], -1) {
			row.flags = append(row.flags, m[1])
		}
		rows = append(rows, row)
	}
	return rows
}

// splitDefaults gives each of n flags of a row its default: the cell's
// comma-separated values in order, or the one value for all.
func splitDefaults(cell string, n int) []string {
	parts := strings.Split(cell, ", ")
	if len(parts) != n {
		parts = make([]string, n)
		for i := range parts {
			parts[i] = cell
		}
	}
	return parts
}

// sameDefault reports whether a doc's default (its first word; "empty"
// and "(required)" for an empty string, "off" for false) is the flag's.
func sameDefault(doc string, f *flag.Flag) bool {
	word, _, _ := strings.Cut(strings.TrimSpace(doc), " ")
	word = strings.TrimSuffix(word, ":")
	switch {
	case f.DefValue == "":
		return word == "empty" || word == "(required)"
	case f.DefValue == "false":
		return word == "false" || word == "off"
	}
	if want, err := time.ParseDuration(f.DefValue); err == nil {
		got, err := time.ParseDuration(word)
		return err == nil && got == want
	}
	return word == f.DefValue
}

// registeredMetrics returns what mcs-syncer registers besides
// controller-runtime's metrics: a syncer set up from a one-member config.
func registeredMetrics(t *testing.T) *describing {
	t.Helper()
	reg := &describing{names: map[string]bool{}, labels: map[string]string{}, help: map[string]string{}}
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
	return reg
}

// TestMetricsAreDocumented: docs/metrics.md names every metric mcs-syncer
// registers (syncer.New registers them all) with its labels and, opening
// its meaning, its Help, and none that it does not, so that a metric, a
// label or a Help cannot be added, renamed, reworded or removed without
// its line.
func TestMetricsAreDocumented(t *testing.T) {
	reg := registeredMetrics(t)
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, row := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(row, "| `mcs_syncer_") {
			continue
		}
		cells := strings.SplitN(row, "|", 5) // "", names, type, labels, meaning
		if len(cells) < 5 {
			t.Errorf("docs/metrics.md: row %q lacks a column", row)
			continue
		}
		var labels []string
		for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(cells[3], -1) {
			labels = append(labels, m[1])
		}
		for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(cells[1], -1) {
			documented[m[1]] = true
			if got, ok := reg.labels[m[1]]; ok && got != strings.Join(slices.Sorted(slices.Values(labels)), ",") {
				t.Errorf("docs/metrics.md gives %s the labels %v; it has {%s}", m[1], labels, got)
			}
			// The meaning opens with the Help that /metrics prints, so
			// that the two cannot say different things.
			if help, ok := reg.help[m[1]]; ok && !strings.HasPrefix(strings.TrimSpace(cells[4]), help) {
				t.Errorf("docs/metrics.md: %s's meaning does not open with its Help %q", m[1], help)
			}
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
	// Every other doc, alert and dashboard names only metrics that exist
	// (a histogram's series by their suffixes, a family by its prefix and *).
	_, docs := sourcesAndDocs(t, filepath.Join("..", ".."))
	mentions := regexp.MustCompile(`mcs_syncer_[a-z0-9_]*[a-z0-9](\*)?`)
	seen := 0
	for _, path := range docs {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mentions.FindAllStringSubmatch(string(raw), -1) {
			seen++
			if !metricExists(reg.names, m[0]) {
				t.Errorf("%s names %s, which mcs-syncer does not register", path, m[0])
			}
		}
	}
	if seen < 30 {
		t.Errorf("found %d mentions of metrics in the docs: the walk or the pattern is broken", seen)
	}
}

// metricExists reports whether name is a registered metric, one of a
// histogram's series (_bucket, _sum, _count), or a prefix* of some.
func metricExists(registered map[string]bool, name string) bool {
	if prefix, ok := strings.CutSuffix(name, "*"); ok {
		for r := range registered {
			if strings.HasPrefix(r, prefix) {
				return true
			}
		}
		return false
	}
	for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && registered[base] {
			return true
		}
	}
	return false
}

// describing is a Registerer that keeps the names of what it is given,
// and their labels (constant and variable, sorted, comma-separated).
type describing struct {
	names  map[string]bool
	labels map[string]string
	// help is each metric's Help, as /metrics says it.
	help map[string]string
}

func (d *describing) Register(c prometheus.Collector) error {
	descs := make(chan *prometheus.Desc)
	go func() { c.Describe(descs); close(descs) }()
	for desc := range descs {
		m := regexp.MustCompile(`fqName: "([^"]+)".*constLabels: \{(.*)\}, variableLabels: \{([^}]*)\}`).FindStringSubmatch(desc.String())
		if m == nil {
			continue
		}
		d.names[m[1]] = true
		if h := regexp.MustCompile(`help: ("(?:[^"\\]|\\.)*")`).FindStringSubmatch(desc.String()); h != nil {
			d.help[m[1]], _ = strconv.Unquote(h[1])
		}
		var labels []string
		for _, c := range regexp.MustCompile(`([a-z_]+)="`).FindAllStringSubmatch(m[2], -1) {
			labels = append(labels, c[1])
		}
		if m[3] != "" {
			labels = append(labels, strings.Split(m[3], ",")...)
		}
		slices.Sort(labels)
		d.labels[m[1]] = strings.Join(labels, ",")
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

// TestSecurityRowsNameTests: every row of docs/security.md's tables names a
// test, and every test it names (`TestXxx`) is a test function of the
// repository, so that the threat model cannot claim a proof that does not
// exist or was renamed.
func TestSecurityRowsNameTests(t *testing.T) {
	raw, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	err = filepath.WalkDir("../..", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".cache" || d.Name() == ".git" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`).FindAllStringSubmatch(string(src), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile("`(Test\\w+)`")
	rows := 0
	for i, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| it ") || strings.HasPrefix(line, "|---") {
			continue
		}
		rows++
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if len(named.FindAllString(cells[len(cells)-1], -1)) == 0 {
			t.Errorf("docs/security.md:%d: the row names no test in its last column: %s", i+1, line)
		}
	}
	if rows == 0 {
		t.Fatal("docs/security.md has no rows")
	}
	for _, m := range named.FindAllStringSubmatch(string(raw), -1) {
		if !defined[m[1]] {
			t.Errorf("docs/security.md names %s, which is no test function of the repository", m[1])
		}
	}
}
