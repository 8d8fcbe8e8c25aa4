package testbed

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcs-syncer/mcs-syncer/test/testbed/realnode"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/workloads"
)

// realNodeTestTimeout bounds a real-node test: generous, as a bound, not a
// goal: in CI (2026-11-30) these tests ran five times slower than in a
// rehearsal on the same machine, and a cluster's start alone may take
// minutes then (controlplane's waitCreated waits up to four).
const realNodeTestTimeout = 10 * time.Minute

// needRealNodes returns the binary folder of `make tools`, or skips t when
// a real node cannot run here (binaries, Debian packages or root missing).
func needRealNodes(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short (make unit): real nodes run in make test")
	}
	opts := Options{Clusters: []string{"solo"}, StateDir: t.TempDir(), RealNodes: true}
	if err := opts.defaults(); errors.Is(err, ErrNoBinaries) {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	return opts.BinDir
}

// hostState is what a testbed with real nodes in stateDir must leave as it
// found it: the host's links, routes, network namespaces, iptables rules,
// top-level cgroups and mounts; except iproute2's /run/netns (made once
// per boot: netnsDirMount) and what belongs to other testbeds with real
// nodes that may run beside the test (make test beside make e2e): their names
// carry another state folder's hash, their mounts lie under their nodes.
func hostState(t *testing.T, stateDir string) string {
	t.Helper()
	ours := "mcs" + realnode.NetID(stateDir)
	others := regexp.MustCompile(`mcs[0-9a-f]{6}`)
	theirs := func(line string) bool {
		for _, name := range others.FindAllString(line, -1) {
			if name != ours {
				return true
			}
		}
		return strings.Contains(line, "/nodes/") && !strings.Contains(line, stateDir)
	}
	var b strings.Builder
	for _, cmd := range [][]string{
		{"ip", "-o", "link", "show"},
		{"ip", "route", "show", "table", "all"},
		{"ip", "netns", "list"},
		{"iptables-save"},
	} {
		out, err := exec.Command(cmd[0], cmd[1:]...).Output()
		if err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "#") {
				continue // iptables-save's timestamps
			}
			if i := strings.Index(line, " ["); i >= 0 && cmd[0] == "iptables-save" {
				line = line[:i] // a chain's packet counters
			}
			if !theirs(line) {
				b.WriteString(line + "\n")
			}
		}
	}
	entries, err := os.ReadDir("/sys/fs/cgroup/pids")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && !theirs(e.Name()) {
			b.WriteString("cgroup " + e.Name() + "\n")
		}
	}
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		if !theirs(line) && !netnsDirMount(line) {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// netnsDirMount says whether a line of /proc/self/mounts is /run/netns
// mounted on itself: the first `ip netns add` after a boot makes that
// mount (a shared one, so that each namespace's mount under it propagates)
// and iproute2 never undoes it; every later add reuses it. So it is the
// host's, made once, not a testbed's leftover (on a host where no testbed
// had run, the first one "changed" the host with it: issue 55). The
// namespaces' own mounts, /run/netns/<name>, are still compared.
func netnsDirMount(line string) bool {
	fields := strings.Fields(line)
	return len(fields) > 1 && fields[1] == "/run/netns"
}

// runPod runs the client image on the cluster's real node and checks that
// exec reaches it (API server to kubelet to containerd).
func runPod(ctx context.Context, t *testing.T, c *Cluster) {
	t.Helper()
	cs, err := c.Kubernetes()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, workloads.ClientPod("default", "client"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	Eventually(ctx, t, "the pod to run on "+c.RealNode.Name, func() error {
		p, err := cs.CoreV1().Pods("default").Get(ctx, "client", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName != c.RealNode.Name {
			return errors.New(string(p.Status.Phase) + " on " + p.Spec.NodeName)
		}
		return nil
	})
	out, err := c.Exec(ctx, "default", "client", "sh", "-c", "echo $((6*7))")
	if err != nil || strings.TrimSpace(out) != "42" {
		t.Fatalf("exec: %q, %v", out, err)
	}
}

// TestRealNodeLeavesHostClean: a real node runs a pod, and Stop leaves the
// host's network, iptables, cgroups and mounts as they were.
func TestRealNodeLeavesHostClean(t *testing.T) {
	bin := needRealNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), realNodeTestTimeout)
	defer cancel()
	state := t.TempDir()
	before := hostState(t, state)
	cs, err := Start(ctx, Options{Clusters: []string{"solo"}, StateDir: state, BinDir: bin, RealNodes: true, TeardownOnExit: true})
	if err != nil {
		t.Fatal(err)
	}
	// On failure too: the next tests need the host's network free (Stop
	// twice is harmless).
	t.Cleanup(func() { _ = cs.Stop(context.Background()) })
	runPod(ctx, t, cs.Clusters[0])
	if hostState(t, state) == before {
		t.Error("the host looks the same with a real node running: hostState sees nothing")
	}
	stopLeavesHost(ctx, t, cs, before)
}

// TestSecondUpCleansLeftovers: a testbed left running (as after a crash of
// `testbed up`'s caller) is removed by the next Start on the same folder.
func TestSecondUpCleansLeftovers(t *testing.T) {
	bin := needRealNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), realNodeTestTimeout)
	defer cancel()
	state := t.TempDir()
	before := hostState(t, state)
	first, err := Start(ctx, Options{Clusters: []string{"solo"}, StateDir: state, BinDir: bin, RealNodes: true})
	if err != nil {
		t.Fatal(err)
	}
	runPod(ctx, t, first.Clusters[0])
	second, err := Start(ctx, Options{Clusters: []string{"solo"}, StateDir: state, BinDir: bin, RealNodes: true, TeardownOnExit: true})
	if err != nil {
		_ = Down(ctx, state, bin)
		t.Fatalf("second Start on a folder with a running testbed: %v", err)
	}
	runPod(ctx, t, second.Clusters[0])
	stopLeavesHost(ctx, t, second, before)
}

// TestRealNodeFailureIsNamed: a kubelet that fails stops Start with one
// message naming it and its log, and nothing is left behind.
func TestRealNodeFailureIsNamed(t *testing.T) {
	bin := needRealNodes(t)
	ctx, cancel := context.WithTimeout(context.Background(), realNodeTestTimeout)
	defer cancel()
	// The teardown stops only processes whose executable lies in the
	// binary folder: hard links keep them there without copying.
	bad, err := os.MkdirTemp(filepath.Dir(bin), "bad-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(bad) })
	for _, b := range append(append([]string{}, Binaries...), realnode.Binaries...) {
		if b == "kubelet" {
			continue // a link would let the broken one below overwrite the real one
		}
		if err := os.Link(filepath.Join(bin, b), filepath.Join(bad, b)); err != nil {
			t.Skipf("hard link in %s: %v", bad, err)
		}
	}
	if err := os.WriteFile(filepath.Join(bad, "kubelet"), []byte("#!/bin/sh\necho 'kubelet: broken on purpose' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(bin, "images"), filepath.Join(bad, "images")); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	before := hostState(t, state)
	_, err = Start(ctx, Options{Clusters: []string{"solo"}, StateDir: state, BinDir: bad, RealNodes: true})
	if err == nil || !strings.Contains(err.Error(), "kubelet exited; see ") || !strings.Contains(err.Error(), "kubelet.log") {
		t.Fatalf("Start with a failing kubelet: %v, want an error naming kubelet and its log", err)
	}
	if after := hostState(t, state); after != before {
		t.Errorf("the host changed:\n%s", diffLines(before, after))
	}
}

// stopLeavesHost stops cs and checks that the host is as hostState saw it
// before.
func stopLeavesHost(ctx context.Context, t *testing.T, cs *Clusterset, before string) {
	t.Helper()
	if err := cs.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if after := hostState(t, cs.StateDir); after != before {
		t.Errorf("the host changed:\n%s", diffLines(before, after))
	}
}

// diffLines lists the lines only in a (-) or only in b (+).
func diffLines(a, b string) string {
	count := map[string]int{}
	for _, l := range strings.Split(a, "\n") {
		count[l]++
	}
	for _, l := range strings.Split(b, "\n") {
		count[l]--
	}
	var out []string
	for l, n := range count {
		if n > 0 {
			out = append(out, "- "+l)
		} else if n < 0 {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}
