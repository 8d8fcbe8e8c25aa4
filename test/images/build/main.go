// Command build writes the testbed's image archives (see package images)
// into a folder; hack/tools/build.sh runs it from `make tools`.
//
// Usage: go run ./test/images/build -out DIR [-busybox PATH]
package main

import (
	"flag"
	"log"

	"github.com/mcs-syncer/mcs-syncer/test/images"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
)

func main() {
	out := flag.String("out", "", "folder to write the image archives to")
	busybox := flag.String("busybox", "/bin/busybox", "a statically linked busybox")
	flag.Parse()
	if *out == "" {
		log.Fatal("build: -out is required")
	}
	root, err := host.RepoRoot()
	if err != nil {
		log.Fatal(err)
	}
	if err := images.Build(root, *out, *busybox); err != nil {
		log.Fatal(err)
	}
}
