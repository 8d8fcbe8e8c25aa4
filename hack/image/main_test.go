//go:build reproducibility

// The reproducibility check builds mcs-syncer from nothing (-a): minutes on
// 2 cores, more beside other work. It runs in `make image-repro`, with a
// timeout chosen for a cold build, not in make unit or make test.

package main

import (
	"archive/tar"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestSameCommitSameDigest builds mcs-syncer's image twice from this
// tree, the second time with every package rebuilt (-a, so Go's build
// cache cannot hand back the first binary): the digests are equal. A third
// build with another version differs, and its binary prints that version.
func TestSameCommitSameDigest(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	first, err := build(root, filepath.Join(dir, "a.tar"), "mcs-syncer:v9.9.9", "v9.9.9", "0123abc")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOFLAGS", "-a")
	second, err := build(root, filepath.Join(dir, "b.tar"), "mcs-syncer:v9.9.9", "v9.9.9", "0123abc")
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Errorf("the same tree built twice: digests %s and %s", first, second)
	}
	t.Setenv("GOFLAGS", "")
	other, err := build(root, filepath.Join(dir, "c.tar"), "mcs-syncer:v9.9.10", "v9.9.10", "0123abc")
	if err != nil {
		t.Fatal(err)
	}
	if other == first {
		t.Error("another version gave the same digest")
	}
	bin := extract(t, filepath.Join(dir, "c.tar"), "mcs-syncer")
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), "mcs-syncer v9.9.10 (revision 0123abc, ") {
		t.Errorf("the image's binary says %q", out)
	}
}

// extract reads the archive as `docker load` does (its manifest.json,
// through go-containerregistry's tarball reader) and writes the image's
// file name into a temporary executable, returning its path.
func extract(t *testing.T, archive, name string) string {
	t.Helper()
	img, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in the image: %v", name, err)
		}
		if h.Name == name {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(p, data, 0o755); err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
}
