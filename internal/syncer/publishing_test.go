package syncer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/mcs-syncer/mcs-syncer/internal/membership"
	"github.com/mcs-syncer/mcs-syncer/internal/publish"
)

// TestHubKubeconfigRotation: a token written into the hub's kubeconfig
// reaches the publisher without a restart: what publishes through the
// hub is stopped and built again with the new token; a kubeconfig that
// cannot be read stops nothing that runs and is read again; a runner that
// fails ends the runnable with its error.
func TestHubKubeconfigRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hub.kubeconfig")
	writeToken := func(token string) {
		t.Helper()
		kc := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: https://127.0.0.1:1}\nusers:\n- name: u\n  user: {token: " + token + "}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n"
		if err := os.WriteFile(path+".tmp", []byte(kc), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	writeToken("first")
	var mu sync.Mutex
	var tokens []string
	running := 0
	fail := make(chan error, 1)
	build := func(rc *rest.Config) ([]func(context.Context) error, *publish.Publisher, error) {
		mu.Lock()
		defer mu.Unlock()
		tokens = append(tokens, rc.BearerToken)
		return []func(context.Context) error{func(ctx context.Context) error {
			mu.Lock()
			running++
			mu.Unlock()
			defer func() { mu.Lock(); running--; mu.Unlock() }()
			select {
			case <-ctx.Done():
				return nil
			case err := <-fail:
				return err
			}
		}}, nil, nil
	}
	state := func() (int, []string) {
		mu.Lock()
		defer mu.Unlock()
		return running, append([]string(nil), tokens...)
	}
	want := func(what string, check func(int, []string) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			n, got := state()
			if check(n, got) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d running, tokens %v", what, n, got)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	p := &publishing{}
	done := make(chan error, 1)
	go func() { done <- p.throughHub(&membership.Hub{Kubeconfig: path}, build)(t.Context()) }()
	want("built with the first token", func(n int, got []string) bool { return n == 1 && fmt.Sprint(got) == "[first]" })

	writeToken("second")
	want("rebuilt with the second token", func(n int, got []string) bool { return n == 1 && fmt.Sprint(got) == "[first second]" })

	if err := os.WriteFile(path, []byte("not: [a kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}
	want("nothing runs on a kubeconfig that cannot be read", func(n int, got []string) bool { return n == 0 && len(got) == 2 })
	writeToken("third")
	want("rebuilt once it can be read", func(n int, got []string) bool { return n == 1 && fmt.Sprint(got) == "[first second third]" })

	fail <- errors.New("cache stopped")
	select {
	case err := <-done:
		if err == nil || err.Error() != "cache stopped" {
			t.Errorf("ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a failed runner did not end the runnable")
	}
}
