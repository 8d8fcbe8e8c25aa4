#!/usr/bin/env bash
# A 3-cluster clusterset on kind (east, west and north: the kind clusters
# mcs-east, mcs-west and mcs-north), with mcs-syncer installed from its
# image by the steps of docs/user-guide.md, run as they are written there:
# per-cluster mode (kustomize's steps), or with MODE=hub hub mode through a
# fourth kind cluster, hub (Helm's steps). README.md beside this file says
# what it needs.
#
#   hack/kind/clusterset.sh images  build the node image (hack/kind/images.sh)
#   hack/kind/clusterset.sh up      create the clusters and install mcs-syncer
#                                   (converges: run it again to finish a run)
#   hack/kind/clusterset.sh check   the demo's check: a pod in north asks
#                                   web.demo.svc.clusterset.local and is
#                                   answered by pods of east and west
#   hack/kind/clusterset.sh down    delete what up made, the Docker engine it
#                                   started included
#   hack/kind/clusterset.sh e2e     up, check and down in per-cluster mode,
#                                   then in hub mode (make kind-e2e;
#                                   KIND_E2E_MODES=hub: hub mode alone, as
#                                   CI runs it); fails if the host's network
#                                   (links, routes, iptables rules) is not
#                                   left as it was
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${MCS_TOOLS_DIR:-$root/.cache/bin}
cache=${MCS_KIND_CACHE:-$root/.cache/kind}
state=${KIND_STATE_DIR:-$cache/state}
members=(east west north)
mode=${MODE:-per-cluster}
kind_version=v0.33.0
kind=$cache/bin/kind
kubectl=$bin/kubectl
export KIND_NODE_IMAGE=${KIND_NODE_IMAGE:-mcs-kind-node:v1.36.3}

# shellcheck source=hack/lib/demo-app.sh
. "$root/hack/lib/demo-app.sh"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# Pod and service CIDRs of each cluster: none overlap, so pods reach the
# other clusters' pods through routes between the nodes.
pod_cidr() { case $1 in east) echo 10.10.0.0/16 ;; west) echo 10.20.0.0/16 ;; north) echo 10.30.0.0/16 ;; hub) echo 10.40.0.0/16 ;; esac }
svc_cidr() { case $1 in east) echo 10.110.0.0/16 ;; west) echo 10.120.0.0/16 ;; north) echo 10.130.0.0/16 ;; hub) echo 10.140.0.0/16 ;; esac }

# set_mode MODE: the clusters of a mode, the members and in hub mode the hub.
set_mode() {
	mode=$1
	case $mode in
	per-cluster) clusters=("${members[@]}") ;;
	hub) clusters=("${members[@]}" hub) ;;
	*)
		echo "MODE=$mode: want per-cluster or hub" >&2
		exit 2
		;;
	esac
}
node() { echo "mcs-$1-control-plane"; }
node_ip() { docker inspect -f '{{.NetworkSettings.Networks.kind.IPAddress}}' "$(node "$1")"; }
k() {
	local c=$1
	shift
	"$kubectl" --kubeconfig "$state/kubeconfig" --context "$c" "$@"
}

# --- The Docker engine ------------------------------------------------------
#
# A Docker engine of the user's (DOCKER_HOST, or Docker's own socket) is used
# as it is. Otherwise this script starts one of its own, with its socket in
# $state/docker and its images in $cache/docker (kept by down, so the node
# image is built again only when its inputs change). It leaves the host's
# network alone: no iptables rules (the host's FORWARD policy stays as it
# is, and the testbed of make e2e works beside it), no docker0 bridge, no IP
# forwarding switched on. The nodes talk over the kind network's bridge,
# pods across clusters through the nodes' own routes.

engine_dir=$state/docker
engine_data=$cache/docker

# (Every return here says its status: a bare return in a function that the
# EXIT trap's down calls returns the status of the command that failed
# before the trap, and set -e then ends down there.)
use_engine() {
	if [ -n "${DOCKER_HOST:-}" ] || docker info >/dev/null 2>&1; then
		return 0
	fi
	export DOCKER_HOST=unix://$engine_dir/docker.sock
}

# has_cap_sys_resource: the bounding set holds CAP_SYS_RESOURCE (bit 24).
has_cap_sys_resource() {
	local bounding
	bounding=$(awk '/^CapBnd:/ {print $2}' /proc/self/status)
	(((16#$bounding >> 24) & 1))
}

start_engine() {
	use_engine
	[ "$DOCKER_HOST" = "unix://$engine_dir/docker.sock" ] || return 0
	docker info >/dev/null 2>&1 && return 0
	command -v dockerd >/dev/null || {
		echo "no Docker engine: apt-get install docker.io (or set DOCKER_HOST)" >&2
		exit 1
	}
	mkdir -p "$engine_dir" "$engine_data"
	local args=(--iptables=false --ip6tables=false --ip-masq=false --ip-forward=false --bridge=none
		--data-root "$engine_data" --exec-root "$engine_dir/exec" --pidfile "$engine_dir/dockerd.pid"
		--host "$DOCKER_HOST")
	if ! has_cap_sys_resource; then
		echo "this host withholds CAP_SYS_RESOURCE: privileged containers run through hack/kind/runc-without-sys-resource"
		args+=(--add-runtime "mcs-runc=$here/runc-without-sys-resource" --default-runtime mcs-runc)
	fi
	echo "starting a Docker engine of this script's own (log: $engine_dir/dockerd.log)"
	setsid dockerd "${args[@]}" >"$engine_dir/dockerd.log" 2>&1 </dev/null &
	for _ in $(seq 1 60); do
		docker info >/dev/null 2>&1 && return 0
		sleep 1
	done
	tail -20 "$engine_dir/dockerd.log" >&2
	echo "the Docker engine did not answer within a minute" >&2
	exit 1
}

stop_engine() {
	[ -f "$engine_dir/dockerd.pid" ] || return 0
	local pid
	pid=$(cat "$engine_dir/dockerd.pid")
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 1 60); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 1
	done
	# Whatever it left mounted under its folders goes before they do.
	awk -v a="$engine_dir/" -v b="$engine_data/" 'index($2, a) == 1 || index($2, b) == 1 {print $2}' /proc/mounts |
		sort -r | xargs -r -n1 umount -l
	rm -rf "$engine_dir"
}

# --- The clusters -----------------------------------------------------------

kind_binary() {
	if [ "$("$kind" version 2>/dev/null | awk '{print $2}')" != "$kind_version" ]; then
		echo "building kind $kind_version (sigs.k8s.io/kind, from the Go module proxy)"
		mkdir -p "$(dirname "$kind")"
		GOBIN=$(dirname "$kind") go install "sigs.k8s.io/kind@$kind_version"
	fi
}

# create makes the member's kind cluster, trying three times: kind gives a
# new node container a fixed 30 seconds to print its first line (the
# entrypoint's "detected cgroup v1"), and on a loaded machine the third
# node of a CI run once took longer ("could not find a log line that
# matches"); kind deletes the half-made node itself before it fails.
create() {
	local c=$1 attempt
	for attempt in 1 2 3; do
		create_once "$c" && return 0
		echo "kind could not create mcs-$c (attempt $attempt of 3); load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
		"$kind" delete cluster --name "mcs-$c" >/dev/null 2>&1 || true
	done
	return 1
}

create_once() {
	local c=$1
	if "$kind" get clusters 2>/dev/null | grep -qx "mcs-$c"; then
		return 0
	fi
	# kind's own network plugin (kindnetd) is an image no registry here
	# serves: the nodes get the CNI bridge plugin instead (network below).
	# The kubelet of Kubernetes 1.35 and later refuses cgroup v1 unless told.
	# kubeadm waits for the control plane as long as a loaded machine takes
	# (its defaults, 4 minutes and 1 minute, were seen to run out at load 20).
	"$kind" create cluster --name "mcs-$c" --image "$KIND_NODE_IMAGE" \
		--kubeconfig "$state/kind-$c.kubeconfig" --config - <<KIND
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  disableDefaultCNI: true
  podSubnet: $(pod_cidr "$c")
  serviceSubnet: $(svc_cidr "$c")
kubeadmConfigPatches:
- |
  kind: KubeletConfiguration
  failCgroupV1: false
- |
  kind: InitConfiguration
  timeouts:
    controlPlaneComponentHealthCheck: 15m0s
    kubeletHealthCheck: 15m0s
    kubernetesAPICall: 5m0s
KIND
}

# kubeconfigs writes $state/kubeconfig with a context per member, named
# after it, at the address of its control plane container: the address
# mcs-syncer's Pods in the other clusters reach it at too.
kubeconfigs() {
	local c files=()
	for c in "${clusters[@]}"; do
		"$kind" get kubeconfig --name "mcs-$c" --internal |
			sed -e "s#https://$(node "$c"):6443#https://$(node_ip "$c"):6443#" -e "s/kind-mcs-$c/$c/g" >"$state/$c.kubeconfig"
		files+=("$state/$c.kubeconfig")
	done
	KUBECONFIG=$(
		IFS=:
		echo "${files[*]}"
	) "$kubectl" config view --flatten >"$state/kubeconfig"
}

# network gives every node the CNI bridge plugin on its pod CIDR and routes
# to the other clusters' pod CIDRs through their nodes, and labels it as a
# real node (the demo's pods ask for one).
network() {
	local a b cidr
	for a in "${clusters[@]}"; do
		# kube-controller-manager gives the node its pod CIDR some seconds
		# after kind returns (seen empty once, and the CNI plugin then
		# failed every sandbox with "invalid CIDR address").
		cidr=""
		for _ in $(seq 1 120); do
			cidr=$(k "$a" get node "$(node "$a")" -o jsonpath='{.spec.podCIDR}')
			[ -n "$cidr" ] && break
			sleep 1
		done
		if [ -z "$cidr" ]; then
			echo "$a: the node has no pod CIDR after 2 minutes" >&2
			return 1
		fi
		docker exec -i "$(node "$a")" sh -c 'cat > /etc/cni/net.d/10-mcs-kind.conflist' <<CNI
{
  "cniVersion": "1.0.0",
  "name": "mcs-kind",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$cidr"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
CNI
		for b in "${clusters[@]}"; do
			[ "$a" = "$b" ] || docker exec "$(node "$a")" ip route replace "$(pod_cidr "$b")" via "$(node_ip "$b")"
		done
		k "$a" label node --all --overwrite mcs-syncer.io/real-node=true >/dev/null
	done
	for a in "${clusters[@]}"; do
		if ! k "$a" wait --for=condition=Ready node --all --timeout=5m >/dev/null; then
			k "$a" describe nodes >&2 || true
			return 1
		fi
	done
}

# coredns makes CoreDNS authoritative for clusterset.local from the
# ServiceImports (the kubernetes plugin's multicluster option, in the
# project's CoreDNS build) and lets it read them. Its forward to the node's
# resolver goes: that resolver is Docker's, on the node's loopback, where a
# pod asking it asks itself.
coredns() {
	local c=$1 corefile
	corefile=$(k "$c" -n kube-system get configmap coredns -o jsonpath='{.data.Corefile}')
	if ! grep -q 'multicluster clusterset.local' <<<"$corefile"; then
		corefile=$(awk '
			/^ *kubernetes cluster.local / { sub(/cluster.local /, "cluster.local clusterset.local "); print; print "       multicluster clusterset.local"; next }
			/^ *forward \. / { skip = 1 }
			skip { if ($0 ~ /^ *}/) skip = 0; next }
			{ print }' <<<"$corefile")
		k "$c" -n kube-system create configmap coredns --from-literal=Corefile="$corefile" \
			--dry-run=client -o yaml | k "$c" replace -f - >/dev/null
	fi
	k "$c" apply -f - >/dev/null <<RBAC
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: coredns-multicluster}
rules:
- apiGroups: [multicluster.x-k8s.io]
  resources: [serviceimports]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: coredns-multicluster}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: coredns-multicluster}
subjects:
- {kind: ServiceAccount, name: coredns, namespace: kube-system}
RBAC
	k "$c" -n kube-system rollout restart deployment coredns >/dev/null
	if ! k "$c" -n kube-system rollout status deployment coredns --timeout 5m >/dev/null; then
		echo "$c: CoreDNS did not roll out; its pods, events and logs:" >&2
		k "$c" -n kube-system get pods -o wide >&2 || true
		k "$c" -n kube-system get events --sort-by=.lastTimestamp >&2 || true
		k "$c" -n kube-system logs -l k8s-app=kube-dns --all-containers --prefix --tail 20 >&2 || true
		return 1
	fi
}

images() {
	mkdir -p "$state"
	start_engine
	kind_binary
	say "Building the kind node image $KIND_NODE_IMAGE (hack/kind/images.sh)"
	"$here/images.sh"
}

up() {
	mkdir -p "$state"
	start_engine
	images

	say "Creating the clusters (${clusters[*]})"
	local c
	for c in "${clusters[@]}"; do create "$c"; done
	kubeconfigs
	network
	say "CoreDNS answers clusterset.local"
	# The MCS CRDs first: CoreDNS's multicluster option watches ServiceImports.
	for c in "${members[@]}"; do
		k "$c" apply -k "$root/config/crd" >/dev/null
		coredns "$c"
	done

	say "Building mcs-syncer's image and loading it into the nodes (docs/user-guide.md: Install, 1)"
	(cd "$root" && bash -euo pipefail -c "$(docs_block build-image)")
	for c in "${members[@]}"; do
		"$kind" load image-archive "$root/bin/mcs-syncer.tar" --name "mcs-$c"
		# The demo's app and client (test/images).
		"$kind" load image-archive "$bin/images/netserver.tar" --name "mcs-$c"
		"$kind" load image-archive "$bin/images/netclient.tar" --name "mcs-$c"
	done

	rm -rf "$state/install"
	mkdir -p "$state/install"
	cp -r "$root/config" "$root/hack" "$state/install/"
	if [ "$mode" = hub ]; then
		install_with_helm
	else
		say "Installing mcs-syncer in $mode mode with kustomize, as docs/user-guide.md says (in $state/install)"
		(cd "$state/install" && PATH="$bin:$PATH" KUBECONFIG="$state/kubeconfig" bash -euo pipefail -c "$(docs_block "install-$mode")")
	fi
	echo "Clusterset up: KUBECONFIG=$state/kubeconfig, contexts ${clusters[*]}."
}

# install_with_helm installs hub mode with Helm, as docs/user-guide.md's
# "Install with Helm" says: its chart built by its build-chart block, then
# its helm-hub block. The members hold the CRDs already (applied above, for
# CoreDNS): the block runs hack/lib/adopting-helm's helm, which adds
# --take-ownership to `helm install`, as the user guide says for clusters
# where config/ was applied with kubectl.
install_with_helm() {
	say "Building the chart and installing mcs-syncer in hub mode with Helm, as docs/user-guide.md says (in $state/install)"
	(cd "$root" && PATH="$bin:$PATH" bash -euo pipefail -c "$(docs_block build-chart)")
	mkdir -p "$state/install/bin"
	cp "$root/bin/mcs-syncer-0.1.0.tgz" "$state/install/bin/"
	(cd "$state/install" && HELM="$bin/helm" PATH="$root/hack/lib/adopting-helm:$bin:$PATH" KUBECONFIG="$state/kubeconfig" \
		bash -euo pipefail -c "$(docs_block helm-hub)")
}

kn() { k north -n demo "$@"; }

# diagnose prints what a failed check needs: the exports' and the import's
# conditions, north's imported slices, and every mcs-syncer's recent log.
diagnose() {
	local c
	say "Diagnostics"
	for c in east west; do
		echo "--- $c: serviceexport web, endpointslices of web"
		k "$c" -n demo get serviceexport web -o yaml 2>&1 | sed -n '/^status:/,$p'
		k "$c" -n demo get endpointslices -l kubernetes.io/service-name=web -o wide 2>&1
	done
	echo "--- north: serviceimport web, imported endpointslices"
	k north -n demo get serviceimport web -o yaml 2>&1 | sed -n '/^spec:/,$p'
	k north -n demo get endpointslices -l multicluster.kubernetes.io/service-name=web -o wide --show-labels 2>&1
	for c in "${members[@]}"; do
		echo "--- $c: mcs-syncer's pods and their last 60 log lines"
		k "$c" -n mcs-system get pods -o wide 2>&1
		k "$c" -n mcs-system logs -l app.kubernetes.io/name=mcs-syncer --prefix --tail 60 2>&1
	done
}

check() {
	use_engine
	say "The demo's app in east and west, its client in north"
	local c
	for c in east west; do
		sed "s/SOURCE_CLUSTER/$c/g" "$root/config/samples/demo/app.yaml" | k "$c" apply -f - >/dev/null
	done
	k north create namespace demo --dry-run=client -o yaml | k north apply -f - >/dev/null
	k north apply -f "$root/config/samples/demo/client.yaml" >/dev/null
	wait_imported kn || {
		diagnose
		return 1
	}
	kn get serviceimports
	kn wait --for=condition=Ready pod/client --timeout=3m >/dev/null
	say "north's CoreDNS, from the client pod"
	kn exec client -- nslookup web.demo.svc.clusterset.local | sed -n '/^Name:/,$p'
	say "Requests from north to web.demo.svc.clusterset.local"
	both_answer kn
	mcs_status
}

# mcs_status runs kubectl mcs status on the demo's Service, over a context
# per member, until it reports every import converged (a minute at most:
# the exports' Ready conditions may follow the traffic by some seconds).
mcs_status() {
	say "kubectl mcs status demo/web"
	(cd "$root" && go build -o "$state/kubectl-mcs" ./cmd/kubectl-mcs)
	local i
	for i in $(seq 1 30); do
		if "$state/kubectl-mcs" status demo/web --kubeconfig "$state/kubeconfig" --contexts east,west,north >"$state/mcs-status.txt" 2>&1; then
			cat "$state/mcs-status.txt"
			return 0
		fi
		sleep 2
	done
	cat "$state/mcs-status.txt"
	echo "FAILED: kubectl mcs status did not report demo/web converged after $i tries" >&2
	return 1
}

# remove_kind_network removes the network kind made for the nodes: the
# engine keeps its bridge on the host until the network is removed, even when
# the engine stops. Removal is tried for a while, because the engine may still
# hold a deleted node's endpoint for a moment (a fresh-clone CI run once left
# the bridge behind while the error was thrown away).
remove_kind_network() {
	docker network inspect kind >/dev/null 2>&1 || return 0
	local err
	for _ in $(seq 1 30); do
		err=$(docker network rm kind 2>&1 >/dev/null) && return 0
		docker network inspect kind >/dev/null 2>&1 || return 0
		sleep 1
	done
	echo "the kind network could not be removed: $err" >&2
	docker network inspect kind >&2 || true
}

# delete_clusters deletes every kind cluster of this script (mcs-*, of any
# mode), listing them again until none is left. A fresh-clone CI run once
# skipped mcs-east on the way down (its listing came back without it, the
# error thrown away): its node held the kind network, and the next mode's up
# took the old cluster for its own.
delete_clusters() {
	local out left c
	for _ in $(seq 1 5); do
		if ! out=$("$kind" get clusters 2>&1); then
			echo "kind get clusters: $out" >&2
			sleep 2
			continue
		fi
		left=$(grep '^mcs-' <<<"$out" || true)
		[ -z "$left" ] && return 0
		for c in $left; do
			"$kind" delete cluster --name "$c" --kubeconfig "$state/kind-${c#mcs-}.kubeconfig" || true
		done
	done
	echo "kind clusters still there after five rounds of deletion: ${left:-unknown (kind get clusters failed)}" >&2
	return 1
}

down() {
	use_engine
	local status=0
	if docker info >/dev/null 2>&1 && [ -x "$kind" ]; then
		delete_clusters || status=1
		remove_kind_network
	fi
	stop_engine
	rm -rf "$state"
	return $status
}

# host_network prints what the host's network is made of: its links, routes
# and iptables rules (the nodes' own live in their network namespaces).
host_network() {
	ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort
	ip route show table all | sort
	iptables -S 2>/dev/null | sort
	ip6tables -S 2>/dev/null | sort
}

e2e() {
	local before after m start=$SECONDS
	before=$(host_network)
	trap down EXIT
	for m in ${KIND_E2E_MODES:-per-cluster hub}; do
		set_mode "$m"
		up
		check
		say "Deleting the clusters ($m mode)"
		down
	done
	trap - EXIT
	after=$(host_network)
	if [ "$before" != "$after" ]; then
		echo "FAILED: the host's network is not as it was before up:" >&2
		diff <(echo "$before") <(echo "$after") >&2 || true
		exit 1
	fi
	echo "kind e2e passed in $((SECONDS - start))s; the host's links, routes and iptables rules are as they were"
}

set_mode "$mode"
case ${1:-} in
images) images ;;
up) up ;;
check) check ;;
down) down ;;
e2e) e2e ;;
*)
	echo "usage: $0 images|up|check|down|e2e" >&2
	exit 2
	;;
esac
