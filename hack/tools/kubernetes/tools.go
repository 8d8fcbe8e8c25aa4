//go:build tools

// Package tools pins the Kubernetes control-plane commands that the testbed
// runs. It is never compiled into mcs-syncer; build.sh builds the commands.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
