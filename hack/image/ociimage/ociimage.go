package ociimage

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one entry of an image's only layer: a regular file (Data), or a
// symbolic link (Link) when Link is set.
type File struct {
	// Path is relative and clean ("bin/sh", not "/bin/sh").
	Path string
	Mode int64
	Data []byte
	Link string
}

// Image is what Build assembles: a one-layer linux image for this
// machine's architecture.
type Image struct {
	// Name is the reference the image is stored under, e.g.
	// "mcs-syncer:v0.3.0" or "mcs.test/pause:1".
	Name       string
	Entrypoint []string
	Env        []string
	// User is the config's user ("65532:65532"); empty runs as root.
	User string
	// Labels are the config's labels (org.opencontainers.image.version, ...).
	Labels map[string]string
	Files  []File
}

// epoch is every time in an image: its bytes depend on its inputs only.
var epoch = time.Unix(0, 0).UTC()

// Build assembles img with go-containerregistry: an OCI manifest and
// config, and one gzip-compressed layer holding img.Files and their parent
// folders.
func Build(img Image) (v1.Image, error) {
	layerTar, err := layerTar(img.Files)
	if err != nil {
		return nil, fmt.Errorf("ociimage: %s: %w", img.Name, err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer),
		// Once: the digest is computed over the compressed bytes, and the
		// same bytes are written into the archive.
		tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("ociimage: %s: %w", img.Name, err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	base, err = mutate.ConfigFile(base, &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Created:      v1.Time{Time: epoch},
		Config: v1.Config{
			Entrypoint: img.Entrypoint,
			Env:        img.Env,
			User:       img.User,
			Labels:     img.Labels,
			WorkingDir: "/",
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, fmt.Errorf("ociimage: %s: %w", img.Name, err)
	}
	out, err := mutate.Append(base, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "ociimage.Build"},
	})
	if err != nil {
		return nil, fmt.Errorf("ociimage: %s: %w", img.Name, err)
	}
	return out, nil
}

// WriteArchive builds img and writes it to file as an OCI image archive
// (through a temporary file, so a reader never sees half an archive). It
// returns the manifest's digest, the image's ID as `ctr images ls` and
// `crictl images --digests` show it.
func WriteArchive(file string, img Image) (v1.Hash, error) {
	ref, tag, err := canonicalName(img.Name)
	if err != nil {
		return v1.Hash{}, err
	}
	built, err := Build(img)
	if err != nil {
		return v1.Hash{}, err
	}
	digest, err := built.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	dir, err := os.MkdirTemp(filepath.Dir(file), ".ociimage-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(dir)
	lp, err := layout.Write(filepath.Join(dir, "layout"), empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := lp.AppendImage(built, layout.WithAnnotations(map[string]string{
		// containerd (ctr images import, kind load) and Docker 25+ name
		// the image by this annotation; the OCI one carries the tag.
		"io.containerd.image.name":          ref,
		"org.opencontainers.image.ref.name": tag,
	})); err != nil {
		return v1.Hash{}, fmt.Errorf("ociimage: %s: %w", img.Name, err)
	}
	if err := dockerManifest(lp, built, ref); err != nil {
		return v1.Hash{}, fmt.Errorf("ociimage: %s: %w", img.Name, err)
	}
	tmp := filepath.Join(dir, "archive.tar")
	if err := tarFolder(tmp, string(lp)); err != nil {
		return v1.Hash{}, fmt.Errorf("ociimage: %s: %w", img.Name, err)
	}
	return digest, os.Rename(tmp, file)
}

// canonicalName returns an image name in the full form containerd stores
// and the kubelet looks up: "mcs-syncer:v1" is
// "docker.io/library/mcs-syncer:v1" (a Pod's `image: mcs-syncer:v1` is
// normalized to that; an image imported under the short name is never
// found, and the Pod fails with ErrImagePull). A name without a tag gets
// "latest", as docker's does.
func canonicalName(s string) (full, tag string, err error) {
	t, err := name.NewTag(s)
	if err != nil {
		return "", "", fmt.Errorf("ociimage: image name %q: %w", s, err)
	}
	registry := t.RegistryStr()
	if registry == name.DefaultRegistry {
		// go-containerregistry says index.docker.io; containerd, Docker
		// and the kubelet say docker.io.
		registry = "docker.io"
	}
	return registry + "/" + t.RepositoryStr() + ":" + t.TagStr(), t.TagStr(), nil
}

// dockerManifest adds manifest.json, the index of a `docker save` archive,
// naming the layout's blobs: Docker engines before 25 load only that, and
// newer ones and containerd read it besides index.json.
func dockerManifest(lp layout.Path, img v1.Image, name string) error {
	cfg, err := img.ConfigName()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	entry := struct {
		Config   string
		RepoTags []string
		Layers   []string
	}{Config: blobPath(cfg), RepoTags: []string{name}}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		entry.Layers = append(entry.Layers, blobPath(d))
	}
	data, err := json.Marshal([]any{entry})
	if err != nil {
		return err
	}
	return lp.WriteFile("manifest.json", data, 0o644)
}

func blobPath(h v1.Hash) string { return path.Join("blobs", h.Algorithm, h.Hex) }

// tarFolder writes the files under dir into the tar file out, sorted, with
// the epoch as every time and no owner, so that equal folders give equal
// archives.
func tarFolder(out, dir string) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, p := range names {
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := os.Stat(p)
		if err != nil {
			return err
		}
		if info.IsDir() {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: filepath.ToSlash(rel) + "/", Mode: 0o755, ModTime: epoch}); err != nil {
				return err
			}
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := writeFile(tw, filepath.ToSlash(rel), 0o644, data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// layerTar returns the uncompressed layer: every file, with its parent
// folders, sorted by path.
func layerTar(files []File) ([]byte, error) {
	dirs := map[string]bool{}
	for _, f := range files {
		if strings.HasPrefix(f.Path, "/") || path.Clean(f.Path) != f.Path {
			return nil, fmt.Errorf("file path %q must be relative and clean", f.Path)
		}
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirNames := make([]string, 0, len(dirs))
	for d := range dirs {
		dirNames = append(dirNames, d)
	}
	sort.Strings(dirNames)
	for _, d := range dirNames {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	sorted := append([]File(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	for _, f := range sorted {
		if f.Link != "" {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: f.Path, Linkname: f.Link, Mode: 0o777, ModTime: epoch}); err != nil {
				return nil, err
			}
			continue
		}
		if err := writeFile(tw, f.Path, f.Mode, f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeFile(tw *tar.Writer, name string, mode int64, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: epoch}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}
