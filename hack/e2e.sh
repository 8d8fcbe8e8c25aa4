#!/usr/bin/env bash
# Runs the end-to-end tests (./test/e2e/...) as two go test processes at
# once, each on a testbed of its own (a real-node network slot each, as
# `make test` beside `make e2e` takes): most of their time is waiting (for a
# grace, an alert, a rollout, a probe), so that two at once take about two
# thirds of the time that one after the other does on 2 cores. The second
# process runs SECOND (a -run pattern of about half the time: the data
# plane, the installed and the largest Services), the first every other
# test and the differential test of pkg/reconciler. The second's output is
# written to its log, printed when both have ended. E2E_SHARDS=1 runs them
# all in one process, as before.
# Environment: GO_TEST, E2E_TIMEOUT, MCS_TOOLS_DIR (set by the Makefile),
# E2E_SHARDS (default 2), CACHE (where the second's log goes).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

second='^(TestInstalledFromTheDocs|TestAnyServiceSize|TestDataPlane.*|TestRefusedSliceWritesBackOff|TestMemberDownAlertOnARealPrometheus)$'
go_test=${GO_TEST:-go test -count=1}
timeout=${E2E_TIMEOUT:-45m}

if [ "${E2E_SHARDS:-2}" = 1 ]; then
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
