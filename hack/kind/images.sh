#!/usr/bin/env bash
# Builds the kind node image mcs-kind-node:<Kubernetes version> into the
# Docker engine at DOCKER_HOST, without a registry: no kindest/node image can
# be pulled here, so everything comes from Debian's packages and the
# binaries that `make tools` built from Go modules.
#
#   - a Debian root filesystem (debootstrap, from the host's own apt
#     sources) with systemd, containerd, runc, iptables and the CNI plugins;
#   - hack/kind/node/: its entrypoint, containerd's configuration and the
#     kubelet's systemd units, all written for this project;
#   - kubeadm, kubelet and kubectl;
#   - the images kubeadm runs, preloaded in /kind/images: the control
#     plane, etcd, CoreDNS (with the multicluster option) and pause from
#     hack/kind/images, and kube-proxy on the Debian root filesystem (it
#     needs iptables).
#
# Cached: the root filesystem in $MCS_KIND_CACHE (default .cache/kind), keyed
# by its package list and apt source; the image itself is rebuilt only when
# one of its inputs changed (a hash of them is the image's label
# io.mcs-syncer.kind.inputs).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${MCS_TOOLS_DIR:-$root/.cache/bin}
cache=${MCS_KIND_CACHE:-$root/.cache/kind}
kube_version=v1.36.3
image=${KIND_NODE_IMAGE:-mcs-kind-node:$kube_version}
packages=systemd,systemd-sysv,dbus,containerd,runc,iptables,iproute2,ca-certificates,procps,kmod,socat,conntrack,ethtool,util-linux,mount,containernetworking-plugins

# The host's Debian suite and archive, as apt has them.
suite=${DEBIAN_SUITE:-$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release)}
mirror=${DEBIAN_MIRROR:-$(grep -hs -m1 -E '^URIs: .*/debian/?$' /etc/apt/sources.list.d/*.sources |
	awk '{print $2}' | head -1)}
[ -n "$mirror" ] || mirror=$(grep -hs -m1 -E '^deb [^ ]+ '"$suite"' ' /etc/apt/sources.list | awk '{print $2}')
if [ -z "$mirror" ]; then
	echo "images.sh: no Debian archive in /etc/apt (set DEBIAN_MIRROR)" >&2
	exit 1
fi

binaries=(kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy etcd coredns)
for b in "${binaries[@]}"; do
	[ -x "$bin/$b" ] || {
		echo "images.sh: $bin/$b is missing: run make tools" >&2
		exit 1
	}
done

inputs=$(
	{
		echo "$packages $suite $mirror $image"
		cat "$0" "$here/images/main.go" "$root/test/images/pause/"*.go
		(cd "$here/node" && find . -type f | sort | xargs sha256sum)
		(cd "$bin" && sha256sum "${binaries[@]}")
	} | sha256sum | cut -c1-16
)
if [ "$(docker image inspect -f '{{index .Config.Labels "io.mcs-syncer.kind.inputs"}}' "$image" 2>/dev/null)" = "$inputs" ]; then
	echo "up to date: $image"
	exit 0
fi

mkdir -p "$cache"
base="$cache/rootfs-$(echo "$packages $suite $mirror" | sha256sum | cut -c1-16).tar"
if [ ! -f "$base" ]; then
	echo "debootstrap $suite from $mirror (once; cached in $base)"
	tmp=$(mktemp -d "$cache/debootstrap.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	debootstrap --variant=minbase --include="$packages" "$suite" "$tmp" "$mirror" >"$cache/debootstrap.log" 2>&1 || {
		tail -20 "$cache/debootstrap.log" >&2
		exit 1
	}
	chroot "$tmp" apt-get clean
	rm -rf "$tmp"/var/lib/apt/lists/* "$tmp"/var/log/*.log
	tar -C "$tmp" -cf "$base.tmp" .
	mv "$base.tmp" "$base"
	rm -rf "$tmp"
	trap - EXIT
fi

work=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
rootfs=$work/rootfs
mkdir -p "$rootfs"
tar -C "$rootfs" -xf "$base"

echo "building the control plane's images (hack/kind/images)"
mkdir -p "$rootfs/kind/images"
(cd "$root" && go run ./hack/kind/images -bin "$bin" -out "$rootfs/kind/images" -kubernetes-version "$kube_version")

echo "building kube-proxy's image on the Debian root filesystem, less what only a node runs"
proxy=$("$bin/kubeadm" config images list --kubernetes-version "$kube_version" | grep /kube-proxy:)
mkdir -p "$work/proxy"
tar -C "$work/proxy" -xf "$base" --exclude='./usr/bin/containerd*' --exclude=./usr/bin/ctr \
	--exclude=./usr/sbin/runc --exclude=./usr/lib/cni --exclude=./usr/lib/systemd \
	--exclude=./usr/share/doc --exclude=./usr/share/man --exclude=./usr/share/locale
install -D -m 0755 "$bin/kube-proxy" "$work/proxy/usr/local/bin/kube-proxy"
tar -C "$work/proxy" -c . | docker import - "$proxy" >/dev/null
docker save -o "$rootfs/kind/images/kube-proxy.tar" "$proxy"
docker image rm "$proxy" >/dev/null

echo "assembling the node's root filesystem"
cp -a "$here/node/." "$rootfs/"
install -m 0755 "$bin/kubeadm" "$bin/kubelet" "$bin/kubectl" "$rootfs/usr/bin/"
echo "$kube_version" >"$rootfs/kind/version"
mkdir -p "$rootfs/etc/cni/net.d" "$rootfs/opt/cni"
ln -sfn /usr/lib/cni "$rootfs/opt/cni/bin"
chroot "$rootfs" systemctl enable --quiet containerd.service mcs-kind-images.service kubelet.service
# No consoles or logins in a node.
chroot "$rootfs" systemctl mask --quiet getty@tty1.service serial-getty@.service systemd-logind.service

echo "importing $image into the Docker engine"
tar -C "$rootfs" -c . | docker import \
	--change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
	--change 'ENV container=docker' \
	--change "LABEL io.mcs-syncer.kind.inputs=$inputs" \
	- "$image" >/dev/null
echo "built $image (inputs $inputs)"
