#!/bin/sh
# Tears a testbed down: stops every process whose pid file lies under the
# state folder and whose executable is one of the testbed's binaries, then
# removes the state folder. It is the one teardown used by Stop, by the
# watchdog that runs when the process that started the testbed dies, and by
# `testbed down`.
#
# usage: teardown.sh STATE_DIR BIN_DIR
# With TESTBED_WAIT_STDIN=1 it first waits for end of input on stdin: the
# watchdog's stdin is a pipe whose only writer is the process that started
# the testbed, so end of input means that process is gone.
set -u
state=$1
bin=$2

if [ "${TESTBED_WAIT_STDIN:-}" = 1 ]; then
	trap '' INT TERM HUP
	cat >/dev/null
fi

# Only ever remove a folder that Start made: it holds the marker. An empty
# folder is simply removed; anything else is refused, so that a mistyped
# --state can never wipe a folder of the user's.
if [ -d "$state" ] && [ ! -e "$state/.mcs-testbed" ] && [ -n "$(ls -A "$state")" ]; then
	echo "teardown: $state is not a testbed state folder (no .mcs-testbed marker); leaving it alone" >&2
	exit 1
fi

# The real nodes (package test/testbed/realnode): every name they use
# carries a hash of the state folder, so what a crashed testbed left is found
# even when its folder is gone. Their processes (containerd, shims, kubelet,
# kube-proxy, the pods) all live in the cgroup mcs<id> of the pids
# hierarchy; their mounts in mount namespaces that end with them; their
# iptables rules, routes and sysctls in their network namespaces.
id=$(printf %s "$state" | sha256sum | cut -c1-6)
net=mcs$id
i=0
while [ -d "/sys/fs/cgroup/pids/$net" ] && [ $i -lt 100 ]; do
	procs=$(find "/sys/fs/cgroup/pids/$net" -name cgroup.procs -exec cat {} + 2>/dev/null)
	[ -z "$procs" ] && break
	# shellcheck disable=SC2086 # one pid per word
	kill -9 $procs 2>/dev/null
	sleep 0.1
	i=$((i + 1))
done
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$net-"); do
	# shellcheck disable=SC2046 # one pid per word
	kill -9 $(ip netns pids "$ns" 2>/dev/null) 2>/dev/null
	ip netns del "$ns"
done
ip link del "$net" 2>/dev/null
for h in /sys/fs/cgroup/*/; do
	[ -d "$h$net" ] || continue
	i=0
	# A cgroup whose last process just exited can refuse rmdir for a moment.
	until find "$h$net" -depth -type d -exec rmdir {} + 2>/dev/null || [ $i -ge 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
done

[ -d "$state" ] || exit 0
if [ ! -e "$state/.mcs-testbed" ]; then
	rmdir "$state"
	exit 0
fi

# ours PID: true if PID runs one of our binaries (guards against pid reuse).
ours() {
	exe=$(readlink "/proc/$1/exe" 2>/dev/null) || return 1
	case "$exe" in
	"$bin"/* | "$state"/*) return 0 ;;
	esac
	return 1
}

# SIGKILL: the state is thrown away, so a graceful shutdown buys nothing,
# and killed all at once the components wait on each other (kube-apiserver
# on etcd) for many seconds.
pids=""
while read -r f; do
	[ -n "$f" ] || continue
	pid=$(cat "$f" 2>/dev/null)
	case "$pid" in '' | *[!0-9]*) continue ;; esac
	if ours "$pid"; then
		pids="$pids $pid"
		kill -9 "$pid" 2>/dev/null
	fi
done <<EOF
$(find "$state" -name '*.pid' 2>/dev/null)
EOF

# running PID: true until PID has exited (gone, or a zombie). The exe link
# is no test: an exiting process loses it before it stops running.
running() {
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
	[ -n "$st" ] && [ "$st" != Z ]
}

# Wait (up to 10 s) until they have exited before the folder they use goes.
i=0
while [ $i -lt 100 ]; do
	alive=""
	for pid in $pids; do
		running "$pid" && alive="$alive $pid"
	done
	[ -z "$alive" ] && break
	sleep 0.1
	i=$((i + 1))
done

rm -rf "$state"
