package controlplane

import (
	"os"
	"slices"
	"testing"
)

func TestWithFlag(t *testing.T) {
	args := []string{"--etcd-servers=http://127.0.0.1:1", "--secure-port=6443", "--v=2"}
	got := withFlag(args, "etcd-servers", "http://127.0.0.1:2,http://127.0.0.1:3")
	want := []string{"--secure-port=6443", "--v=2", "--etcd-servers=http://127.0.0.1:2,http://127.0.0.1:3"}
	if !slices.Equal(got, want) {
		t.Errorf("replaced: %q, want %q", got, want)
	}
	if got := withFlag(args, "bind-address", "127.0.0.1"); !slices.Equal(got, append(slices.Clone(args), "--bind-address=127.0.0.1")) {
		t.Errorf("added: %q", got)
	}
	// A flag whose name starts like another's is left alone.
	if got := withFlag([]string{"--secure-port-x=1"}, "secure-port", "2"); !slices.Equal(got, []string{"--secure-port-x=1", "--secure-port=2"}) {
		t.Errorf("prefix: %q", got)
	}
	if args[0] != "--etcd-servers=http://127.0.0.1:1" {
		t.Errorf("the input was modified: %q", args)
	}
}

func TestProcessArgs(t *testing.T) {
	got, err := processArgs(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, os.Args[1:]) {
		t.Errorf("processArgs(self) = %q, want %q", got, os.Args[1:])
	}
	if _, err := processArgs(0); err == nil {
		t.Error("processArgs(0): no error")
	}
}

func TestFreePorts(t *testing.T) {
	ports, err := freePorts(8)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 8 || len(slices.Compact(slices.Sorted(slices.Values(ports)))) != 8 {
		t.Errorf("freePorts(8) = %v, want 8 distinct ports", ports)
	}
}
