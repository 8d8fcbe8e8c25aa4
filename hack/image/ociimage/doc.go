// Package ociimage builds this repository's container images without a
// container engine: reproducible one-layer images assembled with
// go-containerregistry and written as OCI image archives (an OCI image
// layout in a tar file, with the manifest.json that `docker save` adds),
// which `ctr images import`, `docker load` and `kind load image-archive`
// read.
//
// mcs-syncer's own image (hack/image, `make image`) and the testbed's
// images for the real nodes (test/images) are both built here. The same
// inputs give the same bytes, so the same commit gives the same digest:
// every time in the archive is the Unix epoch, files are sorted, and the
// layer is compressed with Go's deterministic gzip.
package ociimage
