package ociimage

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

var sample = Image{
	Name:       "example.test/app:v1",
	Entrypoint: []string{"/app"},
	Env:        []string{"PATH=/"},
	User:       "65532:65532",
	Labels:     map[string]string{"org.opencontainers.image.version": "v1"},
	Files: []File{
		{Path: "app", Mode: 0o755, Data: []byte("#!/bin/true\n")},
		{Path: "etc/passwd", Mode: 0o644, Data: []byte("nonroot:x:65532:65532::/:/sbin/nologin\n")},
		{Path: "bin/sh", Link: "/app"},
	},
}

// TestArchiveIsReproducible: the same inputs give the same digest and the
// same archive bytes, written twice.
func TestArchiveIsReproducible(t *testing.T) {
	dir := t.TempDir()
	var archives [][]byte
	var digests []string
	for _, name := range []string{"a.tar", "b.tar"} {
		d, err := WriteArchive(filepath.Join(dir, name), sample)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		archives, digests = append(archives, data), append(digests, d.String())
	}
	if digests[0] != digests[1] || !bytes.Equal(archives[0], archives[1]) {
		t.Errorf("two builds differ: digests %v, archives equal %v", digests, bytes.Equal(archives[0], archives[1]))
	}
	other := sample
	other.Labels = map[string]string{"org.opencontainers.image.version": "v2"}
	d, err := WriteArchive(filepath.Join(dir, "c.tar"), other)
	if err != nil {
		t.Fatal(err)
	}
	if d.String() == digests[0] {
		t.Error("another version has the same digest: the label did not reach the config")
	}
}

// TestArchiveReadsBack unpacks an archive and reads it as an OCI image
// layout with go-containerregistry, as containerd reads it: the index
// names the image, the config carries the user, entrypoint and labels, and
// the layer holds the files; manifest.json names the same blobs.
func TestArchiveReadsBack(t *testing.T) {
	dir := t.TempDir()
	want, err := WriteArchive(filepath.Join(dir, "img.tar"), sample)
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "layout")
	untar(t, filepath.Join(dir, "img.tar"), root)
	index, err := layout.ImageIndexFromPath(root)
	if err != nil {
		t.Fatal(err)
	}
	im, err := index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Digest != want ||
		im.Manifests[0].Annotations["io.containerd.image.name"] != "example.test/app:v1" ||
		im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v1" {
		t.Fatalf("index: %+v, want one manifest %s named %s", im.Manifests, want, sample.Name)
	}
	img, err := index.Image(want)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532:65532" || cfg.Config.Entrypoint[0] != "/app" || cfg.Config.Labels["org.opencontainers.image.version"] != "v1" || cfg.OS != "linux" {
		t.Errorf("config: %+v", cfg.Config)
	}
	files := map[string]*tar.Header{}
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h
	}
	if h := files["app"]; h == nil || h.Mode != 0o755 {
		t.Errorf("layer: app is %+v, want an executable", h)
	}
	if h := files["bin/sh"]; h == nil || h.Linkname != "/app" {
		t.Errorf("layer: bin/sh is %+v, want a link to /app", h)
	}
	if files["etc/"] == nil && files["etc"] == nil {
		t.Error("layer: no etc/ folder entry")
	}

	data, err := os.ReadFile(filepath.Join(root, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var docker []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(data, &docker); err != nil {
		t.Fatal(err)
	}
	if len(docker) != 1 || docker[0].RepoTags[0] != "example.test/app:v1" || len(docker[0].Layers) != 1 {
		t.Fatalf("manifest.json: %s", data)
	}
	for _, blob := range append(docker[0].Layers, docker[0].Config) {
		if _, err := os.Stat(filepath.Join(root, blob)); err != nil {
			t.Errorf("manifest.json names %s: %v", blob, err)
		}
	}
}

// TestNamesAreCanonical: the archive names an image as containerd stores
// it and the kubelet looks it up, or a Pod's `image: mcs-syncer:v1` would
// never find the imported image (ErrImagePull, seen on the testbed).
func TestNamesAreCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"mcs-syncer:v1":             "docker.io/library/mcs-syncer:v1",
		"mcs-syncer":                "docker.io/library/mcs-syncer:latest",
		"me/mcs-syncer:v1":          "docker.io/me/mcs-syncer:v1",
		"docker.io/library/a:1":     "docker.io/library/a:1",
		"mcs.test/pause:1":          "mcs.test/pause:1",
		"localhost:5000/mcs:v2":     "localhost:5000/mcs:v2",
		"registry.example/a/b/c:v3": "registry.example/a/b/c:v3",
	} {
		if got, _, err := canonicalName(in); err != nil || got != want {
			t.Errorf("canonicalName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "Upper/case:1", "a:b:c", "mcs@sha256:abc"} {
		if _, _, err := canonicalName(bad); err == nil {
			t.Errorf("canonicalName(%q): no error", bad)
		}
	}
}

func TestBadPathIsRefused(t *testing.T) {
	for _, p := range []string{"/abs", "a/../b", "a/"} {
		img := sample
		img.Files = []File{{Path: p, Mode: 0o644}}
		if _, err := Build(img); err == nil {
			t.Errorf("path %q: built, want an error", p)
		}
	}
}

func untar(t *testing.T, archive, dst string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dst, h.Name)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
