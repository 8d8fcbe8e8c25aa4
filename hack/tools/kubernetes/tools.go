//go:build tools

// Package tools pins the Kubernetes commands that the testbed runs: the
// control plane, kubelet and kube-proxy for its real nodes, and kubeadm for
// the kind node image (hack/kind), and the KEP-4080 generic control plane
// (a lighter hub). It is never
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
	// The generic control plane's command is a main package; its server
	// package pins what it builds from.
	_ "k8s.io/kubernetes/pkg/controlplane/apiserver/samples/generic/server"
)
