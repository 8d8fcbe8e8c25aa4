package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// TestUsageErrors: what the command cannot run with exits 2 and says why.
func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.kubeconfig")
	if err := os.WriteFile(empty, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{nil, "Usage:\n  kubectl mcs [command]"},
		{[]string{"statuses"}, `unknown command "statuses" for "kubectl mcs"`},
		{[]string{"status", "web"}, `"web": want namespace/name, or name with -n namespace`},
		{[]string{"status", "-n", "demo"}, "--namespace demo: name the Service too"},
		{[]string{"status", "a/b", "-n", "c"}, `"a/b" is in namespace a, not --namespace c`},
		{[]string{"status", "a/b", "c/d"}, "accepts at most 1 arg(s), received 2"},
		// Flags between the arguments are flags, as kubectl takes them;
		// after "--", everything is an argument.
		{[]string{"status", "a/b", "-o", "json", "c/d"}, "accepts at most 1 arg(s), received 2"},
		{[]string{"status", "-o", "json", "--", "-x"}, `"-x": want namespace/name`},
		{[]string{"status", "-o", "table", "--kubeconfig", empty}, `invalid argument "table" for "-o, --output" flag: want text, wide, json or yaml`},
		{[]string{"status", "--kubeconfig", empty, "--request-timeout", "soon"}, `--request-timeout: "soon": want a duration`},
		{[]string{"status", "--kubeconfig", empty, "--context", "east"}, "name the members with --contexts"},
		{[]string{"status", "--syncer", ""}, "want host:port or a URL"},
		{[]string{"status", "--bogus"}, "unknown flag: --bogus\nSee 'kubectl mcs status --help' for usage."},
		{[]string{"diagnose", "extra"}, "no arguments"},
		{[]string{"diagnose", "--kubeconfig", empty}, "no context"},
		{[]string{"status", "--kubeconfig", empty}, "no context"},
		{[]string{"status", "--kubeconfig", empty, "--contexts", "east"}, `no context "east"`},
		{[]string{"status", "--clusterset-config", filepath.Join(dir, "missing.yaml")}, "missing.yaml"},
		{[]string{"status", "--clusterset-config", "c.yaml", "--kubeconfig", empty}, "not both"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(t.Context(), tc.args, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), tc.says) {
			t.Errorf("%v: exit %d, %q; want %d and %q", tc.args, code, stderr.String(), exitUsage, tc.says)
		}
	}
}

// TestUnreachableMemberIsNotConverged: a member whose API server does not
// answer makes the report not converged (exit 1), named.
func TestUnreachableMemberIsNotConverged(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
contexts:
- name: east
  context: {cluster: c, user: u}
users:
- name: u
  user: {token: t}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"status", "--kubeconfig", kubeconfig, "-o", "json"}, &stdout, &stderr)
	if code != exitFailed || !strings.Contains(stderr.String(), "member east cannot be read") || !strings.Contains(stdout.String(), `"id": "east"`) {
		t.Errorf("exit %d\nstdout %s\nstderr %s", code, stdout.String(), stderr.String())
	}
}

// TestRequestTimeout: --request-timeout is read as kubectl reads it (a
// duration, or whole seconds) and bounds each request of a member,
// within the command's --timeout; 0 leaves the default.
func TestRequestTimeout(t *testing.T) {
	for _, tc := range []struct {
		flag  string
		total time.Duration
		want  time.Duration
	}{
		{"0", time.Minute, requestTimeout},
		{"3s", time.Minute, 3 * time.Second},
		{"7", time.Minute, 7 * time.Second},
		{"2m", 30 * time.Second, 30 * time.Second},
	} {
		f := kubeFlags{overrides: clientcmd.ConfigOverrides{Timeout: tc.flag}}
		perRequest, err := f.requestTimeout()
		if err != nil {
			t.Fatalf("%s: %v", tc.flag, err)
		}
		if got := requestWithin(&rest.Config{Timeout: perRequest}, tc.total); got != tc.want {
			t.Errorf("--request-timeout %s within %s: %s, want %s", tc.flag, tc.total, got, tc.want)
		}
	}
	if _, err := (&kubeFlags{overrides: clientcmd.ConfigOverrides{Timeout: "-1s"}}).requestTimeout(); err == nil {
		t.Error("--request-timeout -1s: no error")
	}
}

// TestCompletion: the shell completes commands, flags, -o's values, and
// the contexts of the kubeconfig for --context, and for --contexts and
// --from after what was typed; through cobra's __complete, which `kubectl
// mcs completion` scripts and kubectl_complete-mcs call.
func TestCompletion(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
contexts:
- {name: west, context: {cluster: c}}
- {name: east, context: {cluster: c}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"st"}, []string{"status\t"}},
		{[]string{"status", "--ti"}, []string{"--timeout\t"}},
		{[]string{"status", "-o", ""}, []string{"text", "wide", "json", "yaml"}},
		{[]string{"export", "web", "-o", ""}, []string{"name", "json", "yaml"}},
		{[]string{"unexport", "--kubeconfig", kubeconfig, "--context", ""}, []string{"east", "west"}},
		{[]string{"status", "--kubeconfig", kubeconfig, "--contexts", "west,"}, []string{"west,east"}},
		{[]string{"verify", "--kubeconfig", kubeconfig, "--from", ""}, []string{"east", "west"}},
	} {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), append([]string{"__complete"}, tc.args...), &stdout, &stderr)
		lines := strings.Split(stdout.String(), "\n")
		for _, w := range tc.want {
			if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, w) }) {
				t.Errorf("%q: exit %d, %q lacks %q (stderr %s)", tc.args, code, stdout.String(), w, stderr.String())
			}
		}
		if strings.Contains(stdout.String(), "west,west") {
			t.Errorf("%q: %q offers a context listed already", tc.args, stdout.String())
		}
	}
}

// TestUserGuideNamesEveryFlag: docs/user-guide.md names every command of
// kubectl mcs (`kubectl mcs <command>`) and every flag of each (`--flag`,
// or -x for one with a shorthand), so that a flag cannot be added or
// renamed without its documentation.
func TestUserGuideNamesEveryFlag(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "user-guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	guide := string(raw)
	root := newRootCommand(t.Context(), io.Discard, io.Discard, new(int))
	checked := 0
	named := func(command string, f *pflag.Flag) {
		if f.Name == "help" {
			return
		}
		checked++
		long := regexp.MustCompile(`--` + f.Name + `([^a-z0-9-]|$)`).MatchString(guide)
		if !long && (f.Shorthand == "" || !strings.Contains(guide, "-"+f.Shorthand+" ")) {
			t.Errorf("docs/user-guide.md does not name kubectl mcs %s's flag --%s", command, f.Name)
		}
	}
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) { named("(every command)", f) })
	for _, cmd := range root.Commands() {
		if cmd.Name() == "help" {
			continue
		}
		if !strings.Contains(guide, "kubectl mcs "+cmd.Name()) {
			t.Errorf("docs/user-guide.md does not name kubectl mcs %s", cmd.Name())
		}
		cmd.LocalFlags().VisitAll(func(f *pflag.Flag) { named(cmd.Name(), f) })
	}
	if checked < 20 {
		t.Fatalf("checked %d flags: the command tree changed", checked)
	}
}
