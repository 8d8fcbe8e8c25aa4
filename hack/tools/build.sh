#!/usr/bin/env bash
# Builds the real components the testbed runs into a git-ignored cache:
#   kube-apiserver kube-controller-manager kube-scheduler kubectl  (k8s.io/kubernetes)
#   kubelet kube-proxy  (k8s.io/kubernetes, for the real nodes)
#   kubeadm             (k8s.io/kubernetes, for the kind node image)
#   generic-controlplane (k8s.io/kubernetes's KEP-4080 sample, a lighter hub)
#   etcd                                                           (go.etcd.io/etcd/server/v3)
#   kwok kwokctl                                                   (sigs.k8s.io/kwok)
#   coredns                                                        (github.com/coredns/coredns)
#   helm                                                           (helm.sh/helm/v4, for the chart's tests)
#
# Each component is its own Go module under hack/tools/<component>, pinned by
# its go.mod/go.sum: their dependency graphs disagree (grpc, OpenTelemetry,
# etcd client versions), and one shared module would build none of them at the
# versions their authors tested.
#
# Idempotent: a binary is rebuilt only when the go.mod/go.sum of its module or
# this script change (a stamp file records their hash), so a warm run takes
# well under a second.
#
# Environment:
#   MCS_TOOLS_DIR   use binaries already present there; build nothing
#                   (all of the names above must exist and be executable)
#   MCS_TOOLS_CACHE where to build to (default: <repo>/.cache/bin)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

components="kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy kubeadm generic-controlplane etcd kwok kwokctl coredns helm"

if [ -n "${MCS_TOOLS_DIR:-}" ]; then
	missing=""
	for c in $components; do
		[ -x "$MCS_TOOLS_DIR/$c" ] || missing="$missing $c"
	done
	if [ -n "$missing" ]; then
		echo "MCS_TOOLS_DIR=$MCS_TOOLS_DIR lacks executable:$missing" >&2
		exit 1
	fi
	[ -f "$MCS_TOOLS_DIR/images/pause.tar" ] || echo "MCS_TOOLS_DIR=$MCS_TOOLS_DIR has no images/: real nodes need them (go run ./test/images/build -out \$MCS_TOOLS_DIR/images)" >&2
	echo "using binaries from MCS_TOOLS_DIR=$MCS_TOOLS_DIR"
	exit 0
fi

out=${MCS_TOOLS_CACHE:-$root/.cache/bin}
mkdir -p "$out"

kube_version=v1.36.3
kube_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	kube_ldflags="$kube_ldflags -X $pkg.gitVersion=$kube_version"
	kube_ldflags="$kube_ldflags -X $pkg.gitMajor=1 -X $pkg.gitMinor=36"
	kube_ldflags="$kube_ldflags -X $pkg.gitTreeState=clean"
	kube_ldflags="$kube_ldflags -X $pkg.buildDate=2026-01-01T00:00:00Z"
done
kwok_ldflags="-s -w -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${kube_version#v}"

# build MODULE_DIR LDFLAGS NAME=PACKAGE...
build() {
	local dir=$1 ldflags=$2
	shift 2
	local stamp
	stamp="$out/.stamp-$(basename "$dir")"
	local want
	want=$(cat "$here/$dir/go.mod" "$here/$dir/go.sum" "$0" | sha256sum | cut -d' ' -f1)
	local all_there=1
	for spec in "$@"; do
		[ -x "$out/${spec%%=*}" ] || all_there=0
	done
	if [ "$all_there" = 1 ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
		echo "up to date: $*"
		return
	fi
	for spec in "$@"; do
		local name=${spec%%=*} pkg=${spec#*=}
		echo "building $name ($pkg)"
		local start=$SECONDS
		(cd "$here/$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/$name.tmp" "$pkg")
		mv "$out/$name.tmp" "$out/$name"
		echo "built $name in $((SECONDS - start))s"
	done
	echo "$want" > "$stamp"
}

build etcd "-s -w" etcd=.
build kwok "$kwok_ldflags" kwok=sigs.k8s.io/kwok/cmd/kwok kwokctl=sigs.k8s.io/kwok/cmd/kwokctl
build coredns "-s -w" coredns=github.com/coredns/coredns
build helm "-s -w" helm=helm.sh/helm/v4/cmd/helm
build kubernetes "$kube_ldflags" \
	kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
	kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
	kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
	kubectl=k8s.io/kubernetes/cmd/kubectl \
	kubelet=k8s.io/kubernetes/cmd/kubelet \
	kube-proxy=k8s.io/kubernetes/cmd/kube-proxy \
	kubeadm=k8s.io/kubernetes/cmd/kubeadm \
	generic-controlplane=k8s.io/kubernetes/pkg/controlplane/apiserver/samples/generic

# The images of the real nodes (test/images): built from this repository's
# programs and Debian's static busybox, rebuilt when either changes.
busybox=/bin/busybox
if [ ! -x "$busybox" ] || readelf -l "$busybox" 2>/dev/null | grep -q INTERP; then
	echo "the real nodes' client image needs a static busybox at $busybox: apt-get install busybox-static" >&2
	exit 1
fi
stamp="$out/.stamp-images"
want=$(cat "$root"/go.sum "$root"/test/images/*.go "$root"/test/images/*/*.go "$root"/hack/image/ociimage/*.go "$busybox" "$0" | sha256sum | cut -d' ' -f1)
if [ -f "$out/images/pause.tar" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
	echo "up to date: images"
else
	echo "building images (test/images)"
	(cd "$root" && go run ./test/images/build -out "$out/images" -busybox "$busybox")
	echo "$want" > "$stamp"
fi
echo "binaries in $out"
