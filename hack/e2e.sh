#!/usr/bin/env bash
# Runs the end-to-end tests (./test/e2e/...) as two go test processes at
# once, each on a testbed of its own (a real-node network slot each). The
# second runs $second: the tests that mostly wait (out a member's grace, an
# alert's for, a minute of refused writes, an HA hub's failover) and burn
# little CPU, about 15 min of them; the first every other test, then the
# differential test of pkg/reconciler (test/e2e/diffkcm, 1.5 min). (With
# diffkcm in the second, as until 2026-11-30, the second ended 3 min after
# the first: 944 s against 909 + 99 + 131 s of the generic hub's tests.)
# Measured on 2 cores (2026-11-30, make e2e E2E_GENERIC_HUB=1 as CI runs
# it, in a fresh-clone .ci/run): 1,058 s in all, the first 825 + 100 s,
# the second 914 + 135 s (on 2026-11-28: 35 min, on a slower day). A
# waiting test of about a minute moved from $second to the first would
# even them out. The second's output goes to its log, printed when both
# have ended. E2E_SHARDS=1 runs every test in one
# process, one after another on one testbed. E2E_GENERIC_HUB=1 runs the
# hub-mode tests ($HUB_TESTS) again with the hub served by the KEP-4080
# generic control plane (make e2e-generic-hub) after the second's tests,
# in its process's time (or after all of them, with E2E_SHARDS=1).
#
# The second once held the data plane, the installed and the largest
# Services (CPU-bound): on 2 cores the two then took about 35 min where one
# took 42, with a load average of 15-23, under which
# TestInstalledFromTheDocs saw 2 of its 600 requests fail during the
# upgrade; flaky is failing. Waiting tests beside the CPU-bound ones add a
# testbed's idle load and little else.
# Environment: GO_TEST, E2E_TIMEOUT, MCS_TOOLS_DIR (set by the Makefile),
# E2E_SHARDS (default 2), E2E_GENERIC_HUB and HUB_TESTS (a -run pattern),
# CACHE (where the second's log goes).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

second='^(TestUnreachableMemberIsWithdrawnAfterGrace|TestRefusedSliceWritesBackOff|TestMemberDownAlertOnARealPrometheus|TestLeaseOutsideTheMembers|TestWipedHubRecovers|TestHubFailover|TestHubOutageWithdrawsNothing|TestStoppedMemberIsWithdrawnThroughTheHub|TestMarkerAheadIsRenewedAnyway|TestMembersFromClusterProfiles|TestNeverMarkedMemberHoldsOthersForTheGraceOnly|TestMembershipFollowsTheConfig|TestForbiddenAfterSyncHoldsOnlyItsOwn|TestForbiddenMemberHoldsOthersForTheGraceOnly|TestLiveMembershipChanges|TestTestbedAPIServerStopAndRestart|TestMemberDownAtStartJoinsWhenItStarts|TestHungCredentialPlugin|TestKillDuringImportConverges|TestOversizedAnnotations|TestBrokenConversionWebhookIsNotSilent|TestDeletedPartsKeepEveryEndpoint)$'
go_test=${GO_TEST:-go test -count=1}
timeout=${E2E_TIMEOUT:-45m}

# generic_hub: the hub-mode tests on a generic control plane's hub, when
# E2E_GENERIC_HUB=1.
generic_hub() {
	[ "${E2E_GENERIC_HUB:-}" = 1 ] || return 0
	echo "== the hub-mode tests (-run '${HUB_TESTS:?}') with the hub served by the generic control plane"
	# shellcheck disable=SC2086 # GO_TEST is a command line
	MCS_E2E_HUB=generic $go_test -p 1 -v -timeout "$timeout" -run "$HUB_TESTS" ./test/e2e/
}

# failures LOG...: each failed test of the go test -v logs with its last
# 20 file:line lines (go test -v prints t.Log's and t.Error's alike), so
# that the end of the output says why: a failure's message is otherwise
# somewhere in tens of thousands of lines, and a tool that shows a run's
# end shows the last test's.
failures() {
	awk '
		/^=== (RUN|CONT|NAME) / { cur = $3; next }
		/^ *--- FAIL: / { for (i = 1; i < NF; i++) if ($i == "FAIL:") failed[$(i + 1)] = 1; next }
		/^ +[A-Za-z0-9_]+_test\.go:[0-9]+: / && cur != "" { n[cur]++; line[cur, n[cur]] = substr($0, 1, 500) }
		END {
			for (t in failed) {
				if (!(t in n)) continue
				print "--- FAIL: " t
				for (i = (n[t] > 20 ? n[t] - 19 : 1); i <= n[t]; i++) print line[t, i]
			}
		}' "$@"
}

if [ "${E2E_SHARDS:-2}" = 1 ]; then
	# shellcheck disable=SC2086
	$go_test -p 1 -v -timeout "$timeout" ./test/e2e/... || exit
	generic_hub
	exit
fi

# A name in $second that no test has any more would silently run nothing.
for name in $(tr -d '^()$' <<<"$second" | tr '|' ' '); do
	grep -q "^func $name(" test/e2e/*_test.go || { echo "hack/e2e.sh: \$second names $name, which test/e2e has not" >&2; exit 1; }
done

mkdir -p "${CACHE:-.cache}"
log="${CACHE:-.cache}/e2e-second.log"
first_log="${CACHE:-.cache}/e2e-first.log"
# Compiled first, once, into the build cache: two go test processes
# compiling the same packages at once would each do it.
built=$(mktemp -d)
go test -c -o "$built/" ./test/e2e/... || exit 1
rm -rf "$built"
echo "e2e: the second process (-run '$second') writes to $log, printed when it ends"
# shellcheck disable=SC2086
{
	$go_test -p 1 -v -timeout "$timeout" -run "$second" ./test/e2e/
	code=$?
	generic_hub || code=$?
	exit "$code"
} >"$log" 2>&1 &
second_pid=$!
trap 'kill "$second_pid" 2>/dev/null' INT TERM
# shellcheck disable=SC2086
{
	$go_test -p 1 -v -timeout "$timeout" -skip "$second" ./test/e2e/
	code=$?
	$go_test -v -timeout "$timeout" ./test/e2e/diffkcm/ || code=$?
	exit "$code"
} 2>&1 | tee "$first_log"
first=${PIPESTATUS[0]}
wait "$second_pid"
second_code=$?
echo "== the second process of the end-to-end tests (-run '$second'), exit $second_code:"
cat "$log"
if [ "$first" != 0 ] || [ "$second_code" != 0 ]; then
	echo "== the failed tests, each with its last lines of t.Log and t.Error (both processes; whole in $first_log and $log):"
	failures "$first_log" "$log"
fi
echo "e2e: first process exit $first, second exit $second_code"
[ "$first" = 0 ] && [ "$second_code" = 0 ]
