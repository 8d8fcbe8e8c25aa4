package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		{nil, "Usage:"},
		{[]string{"statuses"}, "Usage:"},
		{[]string{"status", "web"}, `"web": want namespace/name`},
		{[]string{"status", "a/b", "c/d"}, "one namespace/name at most"},
		{[]string{"status", "a/b", "-o", "json", "c/d"}, "one namespace/name at most"},
		{[]string{"status", "-o", "table", "--kubeconfig", empty}, `invalid value "table" for flag -o: want text, wide, json or yaml`},
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

// TestParseFlagsAnywhere: flags may come after the positional arguments,
// as kubectl takes them; after "--" everything is positional.
func TestParseFlagsAnywhere(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		positional string
		output     string
	}{
		{[]string{"demo/web", "-o", "json"}, "demo/web", "json"},
		{[]string{"-o", "yaml", "demo/web"}, "demo/web", "yaml"},
		{[]string{"a", "-o", "json", "b"}, "a b", "json"},
		{[]string{"-o", "json", "--", "-x", "y"}, "-x y", "json"},
		{nil, "", "text"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		var o options
		o.register(fs)
		got, err := parse(fs, tc.args)
		if err != nil || strings.Join(got, " ") != tc.positional || o.output != tc.output {
			t.Errorf("%q: positional %q, -o %s, %v; want %q and %s", tc.args, got, o.output, err, tc.positional, tc.output)
		}
	}
}
