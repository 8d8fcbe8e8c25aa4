#!/usr/bin/env bash
# Tests kubectl-mcs's krew manifest with krew itself: release.sh writes
# the manifest and the linux/amd64 archive into a temporary folder, krew
# (built from hack/tools/krew) installs the plugin from them into a krew
# root of its own, as `kubectl krew install --manifest --archive` does,
# and the installed kubectl-mcs answers.
set -euo pipefail
cd "$(dirname "$0")/../.."

cache=${CACHE:-$PWD/.cache}
krew="$cache/krew/krew"
(cd hack/tools/krew && go build -o "$krew" sigs.k8s.io/krew/cmd/krew)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
PLATFORMS=linux/amd64 hack/krew/release.sh v0.0.0-test "$work/out" >/dev/null
export KREW_ROOT="$work/root" KREW_NO_UPGRADE_CHECK=1
"$krew" install --manifest="$work/out/mcs.yaml" --archive="$work/out/kubectl-mcs_linux_amd64.tar.gz"
# krew records what it installed in a receipt (krew list reads them, once
# an index is there).
grep -q "version: v0.0.0-test" "$KREW_ROOT/receipts/mcs.yaml" || { echo "krew wrote no receipt of mcs v0.0.0-test"; exit 1; }
# Without a command, kubectl-mcs prints its usage and exits 2.
code=0
"$KREW_ROOT/bin/kubectl-mcs" >"$work/usage" 2>&1 || code=$?
if [ "$code" -ne 2 ] || ! grep -q "kubectl mcs \[command\]" "$work/usage"; then
	echo "the installed kubectl-mcs: exit $code"; cat "$work/usage"; exit 1
fi
# kubectl_complete-mcs is in the plugin's folder (krew does not link it:
# krew#812) and completes through the installed kubectl-mcs.
store="$KREW_ROOT/store/mcs/v0.0.0-test"
if ! PATH="$KREW_ROOT/bin:$PATH" "$store/kubectl_complete-mcs" st | grep -q "^status"; then
	echo "$store/kubectl_complete-mcs does not complete st to status"; ls -l "$store"; exit 1
fi
echo "krew installed kubectl-mcs from hack/krew/release.sh's manifest and archive"
