#!/usr/bin/env bash
# Builds kubectl-mcs for each platform that krew installs it on, one
# archive each (the binary and the README), and writes the krew plugin
# manifest (mcs.yaml) that names them with their sha256, at the address
# they are to be published under (KREW_URI_BASE, default the GitHub
# release of VERSION). Install from the files here, before they are
# published:
#   kubectl krew install --manifest=bin/krew/mcs.yaml --archive=bin/krew/kubectl-mcs_linux_amd64.tar.gz
# Usage: hack/krew/release.sh VERSION [OUT_DIR] (default bin/krew);
# PLATFORMS (os/arch, space-separated) narrows the platforms.
set -euo pipefail
cd "$(dirname "$0")/../.."

version=${1:?usage: hack/krew/release.sh VERSION [OUT_DIR]}
out=${2:-bin/krew}
base=${KREW_URI_BASE:-https://github.com/mcs-syncer/mcs-syncer/releases/download/$version}
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
ldflags="-s -w -buildid= -X github.com/mcs-syncer/mcs-syncer/internal/version.Version=$version -X github.com/mcs-syncer/mcs-syncer/internal/version.Revision=$revision"

mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

platforms=()
for platform in ${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64}; do
	os=${platform%/*}
	arch=${platform#*/}
	bin=kubectl-mcs
	[ "$os" = windows ] && bin=kubectl-mcs.exe
	dir="$work/${os}_$arch"
	mkdir -p "$dir"
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$dir/$bin" ./cmd/kubectl-mcs
	cp README.md "$dir/"
	files=("$bin" README.md)
	# kubectl's completion of the plugin (a shell script: not on windows);
	# krew does not put it on the PATH (krew#812), the user does.
	if [ "$os" != windows ]; then
		cp cmd/kubectl-mcs/kubectl_complete-mcs "$dir/"
		files+=(kubectl_complete-mcs)
	fi
	archive="kubectl-mcs_${os}_$arch.tar.gz"
	# Reproducible: fixed owner, order and times.
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$dir" -cf - "${files[@]}" | gzip -n >"$out/$archive"
	sum=$(sha256sum "$out/$archive" | cut -d' ' -f1)
	platforms+=("  - selector:
      matchLabels:
        os: $os
        arch: $arch
    uri: $base/$archive
    sha256: $sum
    bin: $bin")
done

{
	cat <<MANIFEST
apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: mcs
spec:
  version: $version
  homepage: https://github.com/mcs-syncer/mcs-syncer
  shortDescription: Status and diagnosis of MCS clustersets
  description: |
    kubectl mcs reads a clusterset of mcs-syncer (KEP-1645 Multi-Cluster
    Services) from its members: status reports each member's health and
    every exported Service's import into each member, with the endpoints
    imported from each source against those it exports, and exits non-zero
    when anything is not converged; diagnose checks the MCS CRDs, CoreDNS,
    overlapping CIDRs, mcs-syncer's versions and the members' clocks;
    gather writes a support bundle; export and unexport write and delete
    ServiceExports.
  platforms:
MANIFEST
	printf '%s\n' "${platforms[@]}"
} >"$out/mcs.yaml"
echo "$out/mcs.yaml: kubectl-mcs $version for ${#platforms[@]} platforms"
