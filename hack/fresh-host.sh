#!/usr/bin/env bash
# Runs a command as on a host where no testbed ever ran: in a new mount
# namespace (private, so nothing it mounts reaches the host) without
# iproute2's /run/netns mount, which the first `ip netns add` after a boot
# makes and every later testbed finds already there. A test that compares
# the host before and after a testbed once took that mount for a leftover
# on every new machine, and no machine that had run a testbed could see it
# (issue 55). Needs root and util-linux's unshare.
#
#   bash hack/fresh-host.sh make test
set -euo pipefail
if [ $# -eq 0 ]; then
	echo "usage: $0 COMMAND [ARG...]" >&2
	exit 2
fi
if [ "${MCS_FRESH_HOST:-}" != 1 ]; then
	exec env MCS_FRESH_HOST=1 unshare --mount --propagation private -- bash "$0" "$@"
fi
# Inside: /run/netns unmounted (lazily: namespaces of testbeds beside
# this one keep their own view), so the first `ip netns add` mounts it
# again, here only.
while grep -q ' /run/netns ' /proc/self/mounts; do
	umount -l /run/netns
done
exec "$@"
