# shellcheck shell=bash
# The demo's checks, sourced by hack/demo.sh (the testbed) and
# hack/kind/clusterset.sh (kind): the sample app of config/samples/demo runs
# in east and west, its client pod in north. Each function takes the name of
# a function that runs kubectl against north's namespace demo. Both set
# $root, the project's folder.

# docs_block TAG prints the block of docs/user-guide.md marked ```sh TAG:
# the demo builds and installs exactly as the guide says.
docs_block() {
	awk -v start='```sh '"$1" '$0 == start { on = 1; next } on && $0 == "```" { exit } on' "${root:?}/docs/user-guide.md"
}

# wait_imported KN waits (up to 5 minutes: the pods start, then the
# exports travel, on a machine that may be busy) until north holds 4 ready
# endpoints of web, 2 from each exporter, and says how long it took.
wait_imported() {
	local kn=$1 ready seen=-1 start=$SECONDS
	while [ $((SECONDS - start)) -lt 300 ]; do
		ready=$("$kn" get endpointslices -l multicluster.kubernetes.io/service-name=web \
			-o jsonpath='{range .items[*]}{range .endpoints[*]}{.conditions.ready}{"\n"}{end}{end}' 2>/dev/null | grep -c true || true)
		if [ "$ready" -ge 4 ]; then
			echo "north imported 4 ready endpoints of web in $((SECONDS - start))s"
			return 0
		fi
		if [ "$ready" != "$seen" ]; then
			echo "  north holds $ready ready endpoints of web after $((SECONDS - start))s"
			seen=$ready
		fi
		sleep 1
	done
	echo "north imported $ready ready endpoints of web after 5 minutes; want 4" >&2
	return 1
}

# both_answer KN sends requests from north's client pod to
# web.demo.svc.clusterset.local until both exporters have answered,
# printing who answered each; it fails if one never does.
both_answer() {
	local kn=$1 answered=" " i cluster pod ip
	# kube-proxy programs the clusterset IP within a second or two of the
	# import; wait for the first answer before counting.
	for _ in $(seq 1 60); do
		"$kn" exec client -- /probe -timeout 1s http http://web.demo.svc.clusterset.local/ >/dev/null 2>&1 && break
		sleep 1
	done
	# At most 40 requests: kube-proxy picks at random, so 8 in a row from one
	# cluster happen, 40 do not.
	for i in $(seq 1 40); do
		# netserver answers "<cluster> <pod> <pod IP> tcp/8080".
		read -r cluster pod ip _ < <("$kn" exec client -- /probe http http://web.demo.svc.clusterset.local/ 2>&1)
		printf '  request %d: answered by cluster %-5s pod %s (%s)\n' "$i" "$cluster" "$pod" "$ip"
		[[ $answered == *" $cluster "* ]] || answered="$answered$cluster "
		if [ "$i" -ge 8 ] && [[ $answered == *" east "* && $answered == *" west "* ]]; then
			return 0
		fi
	done
	echo "FAILED: answered by${answered}only; want east and west" >&2
	return 1
}
