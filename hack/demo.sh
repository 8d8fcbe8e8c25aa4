#!/usr/bin/env bash
# make demo: a 3-cluster clusterset (east, west, north) on this machine,
# mcs-syncer running in central mode, and a sample app exported from east
# and west on the clusters' real nodes; then shows what north imports, what
# its CoreDNS answers, and ends with a pod in north sending requests to
# web.demo.svc.clusterset.local, printing which cluster answered each.
#
# MODE=hub (make demo MODE=hub) runs it in hub mode instead: a hub API
# server besides the clusters, and one mcs-syncer per member that
# publishes its exports into the hub and reads the others from there.
#
# IN_CLUSTER=1 runs mcs-syncer as Pods instead of processes: its image is
# built (make image) and imported into every real node's containerd, and
# the Install steps of docs/user-guide.md for MODE (central, per-cluster or
# hub) are run as written there, in $STATE_DIR/install.
#
# The clusterset stays up for you to look around; `make demo-down` stops it
# (and mcs-syncer). Ctrl-C while this script runs stops everything too.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
state=${STATE_DIR:-$root/.cache/testbed}
bin=${MCS_TOOLS_DIR:-$root/.cache/bin}
testbed="$root/bin/testbed"
kubectl="$bin/kubectl"
# mcs-syncer runs from the tools folder, so the testbed's teardown (which
# stops every process of its pid files whose executable lies there) stops it.
syncer="$bin/mcs-syncer"

cleanup() {
	echo
	echo "Interrupted: stopping everything."
	"$testbed" down --state "$state" --bin "$bin"
	exit 130
}
trap cleanup INT TERM

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
# shellcheck source=hack/lib/demo-app.sh
. "$root/hack/lib/demo-app.sh"

mode=${MODE:-central}

if [ -n "${IN_CLUSTER:-}" ]; then
	case $mode in
	central | per-cluster) up_flags=() ;;
	hub) up_flags=(--hub) ;;
	*)
		echo "MODE=$mode: want central, per-cluster or hub" >&2
		exit 2
		;;
	esac
	say "Starting the clusterset (east, west, north${up_flags[*]:+ and a hub})"
	"$testbed" up "${up_flags[@]}" --state "$state" --bin "$bin"

	say "Building mcs-syncer's image (docs/user-guide.md: Install, 1) and importing it into every real node"
	(cd "$root" && bash -euo pipefail -c "$(docs_block build-image)")
	for c in east west north; do
		ctr --address "$state/nodes/$c/containerd/containerd.sock" -n k8s.io images import --snapshotter native "$root/bin/mcs-syncer.tar"
	done

	say "Installing mcs-syncer as Pods, $mode mode, as docs/user-guide.md says (in $state/install)"
	mkdir -p "$state/install"
	cp -r "$root/config" "$root/hack" "$state/install/"
	(cd "$state/install" && PATH="$bin:$PATH" KUBECONFIG="$state/kubeconfig" bash -euo pipefail -c "$(docs_block "install-$mode")")
	mode=in-cluster
fi

if [ "$mode" != in-cluster ]; then
	say "Building mcs-syncer"
	# Stamped as make build stamps it, so that /members, kubectl mcs status
	# and the metrics say which commit runs (not "dev", "unknown").
	version=$(cd "$root" && git describe --tags --always --dirty 2>/dev/null || echo dev)
	revision=$(cd "$root" && git rev-parse HEAD 2>/dev/null || echo unknown)
	pkg=github.com/mcs-syncer/mcs-syncer/internal/version
	(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags "-X $pkg.Version=$version -X $pkg.Revision=$revision" -o "$syncer" ./cmd/mcs-syncer)
fi

case $mode in
in-cluster) ;;
central)
	say "Starting the clusterset (east, west, north)"
	"$testbed" up --state "$state" --bin "$bin"

	say "Starting mcs-syncer (central mode; log: $state/mcs-syncer.log)"
	setsid "$syncer" --clusterset-config "$state/clusterset.yaml" \
		--metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 \
		>"$state/mcs-syncer.log" 2>&1 < /dev/null &
	echo $! >"$state/mcs-syncer.pid"
	;;
hub)
	say "Starting the clusterset (east, west, north) and a hub"
	"$testbed" up --hub --state "$state" --bin "$bin"

	for c in east west north; do
		say "Starting $c's own mcs-syncer (hub mode; config: $state/hub/$c.yaml; log: $state/mcs-syncer-$c.log)"
		setsid "$syncer" --clusterset-config "$state/hub/$c.yaml" --local-cluster "$c" \
			--metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 \
			>"$state/mcs-syncer-$c.log" 2>&1 < /dev/null &
		echo $! >"$state/mcs-syncer-$c.pid"
	done
	;;
*)
	echo "MODE=$mode: want central or hub" >&2
	exit 2
	;;
esac

say "Deploying the sample app (Deployment + Service + ServiceExport 'web' and 'web-headless') in east and west"
for c in east west; do
	sed "s/SOURCE_CLUSTER/$c/g" "$root/config/samples/demo/app.yaml" | "$kubectl" --kubeconfig "$state/$c.kubeconfig" apply -f - >/dev/null
done
"$kubectl" --kubeconfig "$state/north.kubeconfig" create namespace demo >/dev/null

k() { "$kubectl" --kubeconfig "$state/north.kubeconfig" -n demo "$@"; }
say "Waiting for north to import both clusters' endpoints"
wait_imported k

say "north: ServiceImports"
k get serviceimports
say "north: ServiceImport web"
k get serviceimport web -o yaml | sed -n '/^spec:/,$p'
say "north: imported EndpointSlices (one group per source cluster)"
k get endpointslices -l endpointslice.kubernetes.io/managed-by=mcs \
	-L multicluster.kubernetes.io/source-cluster -L kubernetes.io/service-name

say "north's CoreDNS"
echo "web.demo.svc.clusterset.local          -> $("$testbed" lookup --state "$state" --cluster north web.demo.svc.clusterset.local)   (the clusterset IP)"
echo "web-headless.demo.svc.clusterset.local -> $("$testbed" lookup --state "$state" --cluster north web-headless.demo.svc.clusterset.local)   (pod IPs of east and west)"

say "A pod in north (on north's real node) asks web.demo.svc.clusterset.local"
"$kubectl" --kubeconfig "$state/north.kubeconfig" apply -f "$root/config/samples/demo/client.yaml" >/dev/null
k wait --for=condition=Ready pod/client --timeout=120s >/dev/null
echo "its resolv.conf: $(k exec client -- cat /etc/resolv.conf | tr '\n' ' ')"
echo "nslookup web.demo.svc.clusterset.local (in the pod):"
k exec client -- nslookup web.demo.svc.clusterset.local | sed -n '/^Name:/,$p' | sed 's/^/    /'
both_answer k

cat <<MSG

Look around:
  KUBECONFIG=$state/east.kubeconfig  $kubectl get serviceexports -n demo -o yaml
  KUBECONFIG=$state/north.kubeconfig $kubectl get serviceimports,endpointslices -n demo
  $testbed status --state $state
  $testbed lookup --state $state --cluster west web.demo.svc.clusterset.local
  KUBECONFIG=$state/north.kubeconfig $kubectl exec -n demo client -- /probe -n 10 tcp web.demo.svc.clusterset.local:80
  KUBECONFIG=$state/north.kubeconfig $kubectl exec -it -n demo client -- sh
  mcs-syncer log: $state/mcs-syncer*.log, or as Pods: KUBECONFIG=$state/kubeconfig $kubectl --context north -n mcs-system logs deploy/mcs-syncer
  hub mode: KUBECONFIG=$state/hub.kubeconfig $kubectl get publishedexports -n mcs-system

Stop everything: make demo-down
MSG
