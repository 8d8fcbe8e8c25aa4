#!/usr/bin/env bash
# hack/kubeconfig.sh CONTEXT SERVICEACCOUNT FILE [DURATION]
#
# Writes FILE: a kubeconfig of the cluster of kubectl context CONTEXT (its
# server address and CA, as your kubeconfig has them) with a token of the
# ServiceAccount mcs-system/SERVICEACCOUNT there, valid for DURATION
# (default 8760h, a year; the API server may cap it). mcs-syncer reads the
# kubeconfigs of its clusterset Secret again when they change, so a token
# written anew before it expires replaces it without a restart.
#
# The server address must be one that mcs-syncer's Pods can reach: if your
# kubeconfig's is not (127.0.0.1 of a kind cluster, say), pass a context
# whose is.
set -euo pipefail

if [ $# -lt 3 ] || [ $# -gt 4 ]; then
	echo "usage: $0 CONTEXT SERVICEACCOUNT FILE [DURATION]" >&2
	exit 2
fi
context=$1 sa=$2 file=$3 duration=${4:-8760h}
kubectl=${KUBECTL:-kubectl}

field() { "$kubectl" config view --raw --minify --flatten --context "$context" -o jsonpath="{.clusters[0].cluster.$1}"; }
server=$(field server)
if [ -z "$server" ]; then
	echo "$0: context $context has no cluster server in your kubeconfig" >&2
	exit 1
fi
token=$("$kubectl" --context "$context" -n mcs-system create token "$sa" --duration "$duration")
ca=$(mktemp)
trap 'rm -f "$ca"' EXIT
field certificate-authority-data | base64 -d >"$ca"

rm -f "$file"
args=(--kubeconfig "$file")
if [ -s "$ca" ]; then
	"$kubectl" config set-cluster "$context" "${args[@]}" --server "$server" --certificate-authority "$ca" --embed-certs >/dev/null
else
	"$kubectl" config set-cluster "$context" "${args[@]}" --server "$server" >/dev/null
fi
if tls_name=$(field tls-server-name) && [ -n "$tls_name" ]; then
	"$kubectl" config set-cluster "$context" "${args[@]}" --tls-server-name "$tls_name" >/dev/null
fi
"$kubectl" config set-credentials "$sa" "${args[@]}" --token "$token" >/dev/null
"$kubectl" config set-context "$context" "${args[@]}" --cluster "$context" --user "$sa" >/dev/null
"$kubectl" config use-context "$context" "${args[@]}" >/dev/null
echo "$file: $context as mcs-system/$sa ($server)"
