package testbed

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
)

func TestOptionsRejectBadClusterNames(t *testing.T) {
	bin := fakeBinDir(t)
	for _, tc := range []struct {
		clusters []string
		want     string
	}{
		{[]string{"East"}, `cluster name "East"`},
		{[]string{"east", "east"}, `cluster name "east" given twice`},
		{[]string{"a.b"}, `cluster name "a.b"`},
		{[]string{strings.Repeat("x", 64)}, "must be no more than 63 characters"},
	} {
		opts := Options{Clusters: tc.clusters, StateDir: t.TempDir(), BinDir: bin}
		err := opts.defaults()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("clusters %v: error %v, want one containing %q", tc.clusters, err, tc.want)
		}
	}
}

func TestOptionsNameMissingBinaries(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "etcd"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	opts := Options{StateDir: t.TempDir(), BinDir: bin}
	err := opts.defaults()
	if err == nil {
		t.Fatal("no error for a binary folder that lacks the binaries")
	}
	for _, want := range []string{"kube-apiserver", "kwokctl", "coredns", "make tools", "MCS_TOOLS_DIR"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "etcd,") || strings.HasSuffix(err.Error(), "etcd") {
		t.Errorf("error %q names etcd, which is there", err)
	}
}

func TestOptionsDefaults(t *testing.T) {
	opts := Options{StateDir: t.TempDir(), BinDir: fakeBinDir(t)}
	if err := opts.defaults(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(opts.Clusters, ",") != "east,west,north" || opts.Zones != 2 || opts.NodesPerZone != 1 {
		t.Errorf("defaults: clusters %v, zones %d, nodes per zone %d", opts.Clusters, opts.Zones, opts.NodesPerZone)
	}
}

func TestDownOfMissingFolderSucceeds(t *testing.T) {
	if err := Down(context.Background(), filepath.Join(t.TempDir(), "gone"), t.TempDir()); err != nil {
		t.Fatal(err)
	}
}

// TestDownStopsOnlyTestbedProcesses: Down stops a process whose pid file is
// in the state folder and whose executable is a testbed binary, leaves alone
// a process whose pid file is there but whose executable is not (a reused
// pid), and removes the state folder.
func TestDownStopsOnlyTestbedProcesses(t *testing.T) {
	state, bin := stateDir(t), t.TempDir()
	ours := startSleep(t, copyExecutable(t, "sleep", bin), filepath.Join(state, "a", "pids", "ours.pid"))
	foreign := startSleep(t, mustLookPath(t, "sleep"), filepath.Join(state, "foreign.pid"))

	if err := Down(context.Background(), state, bin); err != nil {
		t.Fatal(err)
	}
	if err := ours.Wait(); err == nil {
		t.Error("the testbed's process exited by itself; want it killed by Down")
	}
	if !host.ProcessAlive(foreign.Process.Pid) {
		t.Error("Down killed a process that is not the testbed's")
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("state folder still there: %v", err)
	}
}

// TestDownLeavesForeignFoldersAlone: a non-empty folder without the
// testbed's marker (a mistyped --state) is refused and left as it is.
func TestDownLeavesForeignFoldersAlone(t *testing.T) {
	dir := t.TempDir()
	precious := filepath.Join(dir, "precious.txt")
	if err := os.WriteFile(precious, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Down(context.Background(), dir, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "not a testbed state folder") {
		t.Errorf("Down of a foreign folder: %v, want a refusal", err)
	}
	if _, err := os.Stat(precious); err != nil {
		t.Errorf("Down touched a foreign folder: %v", err)
	}
}

// TestWatchdogTearsDownWhenItsPipeCloses: the watchdog tears the testbed
// down once the writer of its pipe is gone, as when the process that
// started the testbed dies.
func TestWatchdogTearsDownWhenItsPipeCloses(t *testing.T) {
	state, bin := stateDir(t), t.TempDir()
	ours := startSleep(t, copyExecutable(t, "sleep", bin), filepath.Join(state, "ours.pid"))
	cs := &Clusterset{StateDir: state, BinDir: bin}
	if err := cs.startWatchdog(); err != nil {
		t.Fatal(err)
	}
	if !host.ProcessAlive(ours.Process.Pid) {
		t.Fatal("the watchdog tore down before its pipe closed")
	}
	if err := cs.Stop(context.Background()); err != nil { // closes the pipe
		t.Fatal(err)
	}
	if host.ProcessAlive(ours.Process.Pid) {
		t.Error("the testbed's process still runs after the watchdog's teardown")
	} else if err := ours.Wait(); err == nil {
		t.Error("the testbed's process exited by itself; want it killed by the watchdog")
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("state folder still there: %v", err)
	}
}

// stateDir returns a folder marked as a testbed's state folder.
func stateDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, stateMarker), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// fakeBinDir returns a folder with an executable file for every binary.
func fakeBinDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, b := range Binaries {
		if err := os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func mustLookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not found: %v", name, err)
	}
	return p
}

func copyExecutable(t *testing.T, name, dir string) string {
	t.Helper()
	raw, err := os.ReadFile(mustLookPath(t, name))
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, name)
	if err := os.WriteFile(dst, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// startSleep starts `path 600` and records its pid in pidFile; the process
// is killed when the test ends.
func startSleep(t *testing.T, path, pidFile string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(path, "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if err := os.MkdirAll(filepath.Dir(pidFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	return cmd
}
