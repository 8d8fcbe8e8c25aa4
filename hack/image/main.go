// Command image builds mcs-syncer's container image without a container
// engine (`make image` runs it): the static binary, stamped with its
// version and revision, as the only file besides /etc/passwd, running as
// the non-root user 65532, written as an OCI image archive. Load it with
// `ctr -n k8s.io images import`, `docker load -i` or
// `kind load image-archive`. The same commit and version give the same
// digest, which it prints.
//
// Usage: go run ./hack/image -out bin/mcs-syncer.tar -name mcs-syncer:v0.1.0 -version v0.1.0 [-revision <commit>]
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/mcs-syncer/mcs-syncer/hack/image/ociimage"
)

const versionPkg = "github.com/mcs-syncer/mcs-syncer/internal/version"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("out", "", "the archive to write (required)")
	name := flag.String("name", "", "the image's reference, e.g. mcs-syncer:v0.1.0 (required)")
	version := flag.String("version", "", "the version mcs-syncer --version prints (required)")
	revision := flag.String("revision", "", "the source revision (default: git rev-parse HEAD)")
	flag.Parse()
	switch {
	case flag.NArg() > 0:
		return fmt.Errorf("unexpected argument %q (all settings are flags)", flag.Arg(0))
	case *out == "" || *name == "" || *version == "":
		return errors.New("-out, -name and -version are required")
	case strings.ContainsAny(*version, " \t\n'\""):
		return fmt.Errorf("-version %q: no spaces or quotes", *version)
	}
	if *revision == "" {
		head, err := exec.Command("git", "rev-parse", "HEAD").Output()
		if err != nil {
			return fmt.Errorf("-revision not given and git rev-parse HEAD failed: %w", err)
		}
		*revision = strings.TrimSpace(string(head))
	}
	digest, err := build(".", *out, *name, *version, *revision)
	if err != nil {
		return err
	}
	fmt.Printf("%s %s %s\n", *out, *name, digest)
	return nil
}

// build compiles mcs-syncer from the module in srcDir, stamped with
// version and revision, and writes its image, named name, to the archive
// out. It returns the image's digest.
func build(srcDir, out, name, version, revision string) (v1.Hash, error) {
	bin, err := ociimage.GoBinary(srcDir, "./cmd/mcs-syncer",
		"-X "+versionPkg+".Version="+version, "-X "+versionPkg+".Revision="+revision)
	if err != nil {
		return v1.Hash{}, err
	}
	return ociimage.WriteArchive(out, ociimage.Image{
		Name:       name,
		Entrypoint: []string{"/mcs-syncer"},
		User:       "65532:65532",
		Labels: map[string]string{
			"org.opencontainers.image.title":    "mcs-syncer",
			"org.opencontainers.image.version":  version,
			"org.opencontainers.image.revision": revision,
			"org.opencontainers.image.source":   "https://github.com/mcs-syncer/mcs-syncer",
		},
		Files: []ociimage.File{
			{Path: "mcs-syncer", Mode: 0o755, Data: bin},
			// A name for the user, for tools that look it up; the Pod's
			// runAsUser needs none.
			{Path: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
			{Path: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		},
	})
}
