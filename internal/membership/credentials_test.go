package membership

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/credentials"
)

// execKubeconfig writes a kubeconfig of server whose user's credentials
// come from an exec plugin, a shell script of body.
func execKubeconfig(t *testing.T, dir, name, server, body string) {
	t.Helper()
	plugin := filepath.Join(dir, name+".plugin")
	if err := os.WriteFile(plugin, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	raw := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %s, insecure-skip-tls-verify: true}
users:
- name: u
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: %s, interactiveMode: Never}
contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
`, server, plugin)
	if err := os.WriteFile(filepath.Join(dir, name), []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCredentialPluginsHaveADeadline: a member whose credential plugin
// never returns, and one whose plugin fails, are failed with causes that
// name the plugin (its timeout; its exit status and stderr) within the
// probe's deadline, neither holds /readyz, and the Set stops at once
// though a plugin still runs.
func TestCredentialPluginsHaveADeadline(t *testing.T) {
	var servers []*httptest.Server
	for range 2 {
		s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
		}))
		defer s.Close()
		servers = append(servers, s)
	}
	dir := t.TempDir()
	execKubeconfig(t, dir, "east.kubeconfig", servers[0].URL, "exec sleep 600")
	execKubeconfig(t, dir, "west.kubeconfig", servers[1].URL, "echo 'error: profile prod has expired' >&2\nexit 2")
	path := filepath.Join(dir, "clusterset.yaml")
	raw := configHeader + "clusterset: prod\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n- id: west\n  kubeconfig: west.kubeconfig\n"
	if err := os.WriteFile(path, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	set, err := NewSet(path, cfg, Options{
		Scheme: runtime.NewScheme(), Credentials: &credentials.Plugins{Timeout: 2 * time.Second},
		RetryInterval: 10 * time.Millisecond, MaxRetryInterval: 50 * time.Millisecond,
		Engage: func(clusterset.ClusterID, cluster.Cluster) ([]func(context.Context) error, error) {
			return nil, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- set.Start(ctx) }()

	poll(t, "west failed, naming its plugin's status and stderr", wantState(set, "west", Failed, "exited with status 2: error: profile prod has expired"))
	poll(t, "east failed, naming its plugin's timeout", wantState(set, "east", Failed, "did not return within 2s"))
	if st, _ := set.Status("east"); !strings.Contains(st.Cause, "east.kubeconfig.plugin") {
		t.Errorf("east's cause %q does not name the plugin", st.Cause)
	}
	poll(t, "ready, though no member could be engaged", func() error {
		if ready, lines := set.Readiness(); !ready {
			return fmt.Errorf("not ready: %q", lines)
		}
		return nil
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the Set did not stop within 15 s of its context's end")
	}
}
