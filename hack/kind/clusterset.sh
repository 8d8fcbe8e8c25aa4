#!/usr/bin/env bash
# A 3-cluster clusterset on kind, with mcs-syncer in per-cluster mode.
# NOT exercised by CI (our build machines have no Docker engine); see
# README.md. Idempotent: run it again to converge.
#
#   hack/kind/clusterset.sh up     create/converge east, west, north
#   hack/kind/clusterset.sh down   delete them
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
clusters=(east west north)
image=${IMAGE:-mcs-syncer:latest}
kubectl=${KUBECTL:-kubectl}

# Non-overlapping pod and service CIDRs per cluster.
pod_cidr() { case $1 in east) echo 10.10.0.0/16 ;; west) echo 10.20.0.0/16 ;; north) echo 10.30.0.0/16 ;; esac; }
svc_cidr() { case $1 in east) echo 10.110.0.0/16 ;; west) echo 10.120.0.0/16 ;; north) echo 10.130.0.0/16 ;; esac; }
node() { echo "mcs-$1-control-plane"; }
k() { local c=$1; shift; "$kubectl" --context "kind-mcs-$c" "$@"; }

create() {
	local c=$1
	if kind get clusters | grep -qx "mcs-$c"; then
		return
	fi
	kind create cluster --name "mcs-$c" --config - <<KIND
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  podSubnet: $(pod_cidr "$c")
  serviceSubnet: $(svc_cidr "$c")
KIND
}

# Pods of every cluster reach the pods of the others through the nodes.
routes() {
	local a b ip
	for a in "${clusters[@]}"; do
		for b in "${clusters[@]}"; do
			[ "$a" = "$b" ] && continue
			ip=$(docker inspect -f '{{.NetworkSettings.Networks.kind.IPAddress}}' "$(node "$b")")
			docker exec "$(node "$a")" ip route replace "$(pod_cidr "$b")" via "$ip"
		done
	done
}

# CoreDNS answers clusterset.local from ServiceImports.
coredns() {
	local c=$1 corefile
	corefile=$(k "$c" -n kube-system get configmap coredns -o jsonpath='{.data.Corefile}')
	if ! grep -q 'multicluster clusterset.local' <<<"$corefile"; then
		local old='kubernetes cluster.local in-addr.arpa ip6.arpa {'
		local new=$'kubernetes cluster.local clusterset.local in-addr.arpa ip6.arpa {\n       multicluster clusterset.local'
		corefile=${corefile/"$old"/"$new"}
		k "$c" -n kube-system create configmap coredns --from-literal=Corefile="$corefile" --dry-run=client -o yaml | k "$c" apply -f -
	fi
	k "$c" apply -f - <<RBAC
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
	k "$c" -n kube-system rollout restart deployment coredns
}

# A read-only kubeconfig of cluster c for the other members' mcs-syncers.
remote_kubeconfig() {
	local c=$1 token server ca
	k "$c" create namespace mcs-system --dry-run=client -o yaml | k "$c" apply -f -
	k "$c" -n mcs-system create serviceaccount mcs-syncer-remote --dry-run=client -o yaml | k "$c" apply -f -
	k "$c" create clusterrolebinding mcs-syncer-remote-reader --clusterrole mcs-syncer-remote-reader \
		--serviceaccount mcs-system:mcs-syncer-remote --dry-run=client -o yaml | k "$c" apply -f -
	token=$(k "$c" -n mcs-system create token mcs-syncer-remote --duration 8760h)
	server="https://$(node "$c"):6443"
	ca=$(k "$c" config view --raw --minify -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
	cat <<KUBECONFIG
apiVersion: v1
kind: Config
clusters: [{name: $c, cluster: {server: "$server", certificate-authority-data: $ca}}]
users: [{name: mcs-syncer-remote, user: {token: $token}}]
contexts: [{name: $c, context: {cluster: $c, user: mcs-syncer-remote}}]
current-context: $c
KUBECONFIG
}

deploy() {
	local c=$1 other dir
	dir=$(mktemp -d)
	{
		echo "clusterset: kind"
		echo "members:"
		for other in "${clusters[@]}"; do
			if [ "$other" = "$c" ]; then
				echo "- {id: $other, inCluster: true}"
			else
				remote_kubeconfig "$other" >"$dir/$other.kubeconfig"
				echo "- {id: $other, kubeconfig: $other.kubeconfig}"
			fi
		done
	} >"$dir/clusterset.yaml"
	k "$c" apply -k "$root/config/rbac"
	k "$c" create namespace mcs-system --dry-run=client -o yaml | k "$c" apply -f -
	k "$c" -n mcs-system create secret generic mcs-syncer-clusterset --from-file "$dir" --from-literal local-cluster="$c" \
		--dry-run=client -o yaml | k "$c" apply -f -
	"$kubectl" kustomize "$root/config/overlays/per-cluster" |
		sed "s|image: mcs-syncer:latest|image: $image|" | k "$c" apply -f -
	rm -rf "$dir"
}

up() {
	local c
	for c in "${clusters[@]}"; do create "$c"; done
	routes
	make -C "$root" image IMAGE="$image" IMAGE_ARCHIVE="$root/bin/mcs-syncer.tar"
	for c in "${clusters[@]}"; do
		kind load image-archive "$root/bin/mcs-syncer.tar" --name "mcs-$c"
		k "$c" apply -k "$root/config/crd"
		k "$c" apply -k "$root/config/rbac"
		coredns "$c"
	done
	for c in "${clusters[@]}"; do deploy "$c"; done
	echo "Clusterset up: contexts kind-mcs-east, kind-mcs-west, kind-mcs-north."
}

down() {
	local c
	for c in "${clusters[@]}"; do kind delete cluster --name "mcs-$c"; done
}

case ${1:-} in
up) up ;;
down) down ;;
*)
	echo "usage: $0 up|down" >&2
	exit 2
	;;
esac
