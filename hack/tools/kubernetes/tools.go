//go:build tools

// Package tools pins the Kubernetes commands that the testbed runs: the
// control plane, kubelet and kube-proxy for its real nodes, and kubeadm for
// the kind node image (hack/kind). It is never
// compiled into mcs-syncer; build.sh builds the commands.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
