package ociimage

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// GoBinary builds the Go package pkg (e.g. "./cmd/mcs-syncer") of the
// module in srcDir into a static, stripped binary with reproducible bytes
// (no cgo, -trimpath, no build ID, no VCS stamp) and returns it; ldflags are added to
// the linker's.
func GoBinary(srcDir, pkg string, ldflags ...string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "ociimage-go-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "bin")
	flags := "-s -w -buildid="
	for _, f := range ldflags {
		flags += " " + f
	}
	// -buildvcs=false: Go records the checkout (commit, time, modified)
	// only in some builds of one tree (seen: not when the build cache
	// served the packages), which changed the bytes; the revision is
	// stamped through ldflags instead.
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags", flags, "-o", out, pkg)
	cmd.Dir = srcDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ociimage: go build %s: %w\n%s", pkg, err, msg)
	}
	return os.ReadFile(out)
}
