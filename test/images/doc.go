// Package images assembles the container images that the testbed's real
// nodes run, as OCI image archives that `ctr images import` loads into a
// node's containerd. No registry is reachable where the testbed runs, so
// every image a test, the demo or the kubelet (the sandbox image) uses is
// built here from files on this machine: the programs in this folder,
// built with `go build`, and Debian's static busybox for a shell.
//
// The images (names are what pods refer to, with imagePullPolicy
// IfNotPresent):
//   - Pause (mcs.test/pause:1): the pod sandbox; sleeps until a signal.
//   - Server (mcs.test/netserver:1): answers every TCP connection, HTTP
//     request and UDP datagram with one line naming its cluster, pod and IP.
//   - Client (mcs.test/netclient:1): busybox (sh, nc, nslookup, ...) and
//     probe, which asks a server, an HTTP URL or DNS with Go's resolver.
//
// The archives are written by hack/image/ociimage, the builder of
// mcs-syncer's own image, and are reproducible: the same inputs give the
// same bytes.
package images
