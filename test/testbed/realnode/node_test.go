package realnode

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
)

func TestCheckHostNamesMissingPackages(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := CheckHost(t.TempDir())
	if !errors.Is(err, host.ErrNoBinaries) {
		t.Fatalf("error %v, want host.ErrNoBinaries", err)
	}
	for _, want := range []string{"kubelet (make tools)", "containerd (Debian package containerd)", "runc (Debian package runc)", "pause.tar (make tools)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}
