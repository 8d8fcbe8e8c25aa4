#!/usr/bin/env bash
# Runs the end-to-end tests (./test/e2e/...): by default in one go test
# process, one test after another on one testbed. E2E_SHARDS=2 runs them as
# two processes at once, each on a testbed of its own (a real-node network
# slot each): the second runs $second (a -run pattern of about half the
# time: the data plane, the installed and the largest Services), the first
# every other test and the differential test of pkg/reconciler; the
# second's output goes to its log, printed when both have ended.
#
# Two at once is not the default: on 2 cores they would take about 35 min
# (stopped after 30 with 8 tests and diffkcm left) where one
# takes 42 (2026-11-28), with a load average of 15-23, under which
# TestInstalledFromTheDocs saw 2 of its 600 requests (1 s timeout each)
# fail during the upgrade; flaky is failing. On a machine with more cores
# it is worth trying.
# Environment: GO_TEST, E2E_TIMEOUT, MCS_TOOLS_DIR (set by the Makefile),
# E2E_SHARDS (default 1), CACHE (where the second's log goes).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

second='^(TestInstalledFromTheDocs|TestAnyServiceSize|TestDataPlane.*|TestRefusedSliceWritesBackOff|TestMemberDownAlertOnARealPrometheus)$'
go_test=${GO_TEST:-go test -count=1}
timeout=${E2E_TIMEOUT:-45m}

if [ "${E2E_SHARDS:-1}" = 1 ]; then
	# shellcheck disable=SC2086 # GO_TEST is a command line
	exec $go_test -p 1 -v -timeout "$timeout" ./test/e2e/...
fi

mkdir -p "${CACHE:-.cache}"
log="${CACHE:-.cache}/e2e-second.log"
# Compiled first, once, into the build cache: two go test processes
# compiling the same packages at once would each do it.
built=$(mktemp -d)
go test -c -o "$built/" ./test/e2e/... || exit 1
rm -rf "$built"
echo "e2e: the second process (-run '$second') writes to $log, printed when it ends"
# shellcheck disable=SC2086
$go_test -p 1 -v -timeout "$timeout" -run "$second" ./test/e2e/ >"$log" 2>&1 &
second_pid=$!
trap 'kill "$second_pid" 2>/dev/null' INT TERM
# shellcheck disable=SC2086
$go_test -p 1 -v -timeout "$timeout" -skip "$second" ./test/e2e/...
first=$?
wait "$second_pid"
second_code=$?
echo "== the second process of the end-to-end tests (-run '$second'), exit $second_code:"
cat "$log"
echo "e2e: first process exit $first, second exit $second_code"
[ "$first" = 0 ] && [ "$second_code" = 0 ]
