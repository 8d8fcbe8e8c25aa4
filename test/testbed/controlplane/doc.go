// Package controlplane starts one Kubernetes control plane of the testbed
// with kwokctl's binary runtime: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok (which plays the
// kubelets of fake nodes), from the binaries of `make tools`. It registers
// the fake nodes (zones, pod CIDRs), installs the MCS CRDs, hands out
// clients and stops and starts the API server for fault tests.
//
// A ControlPlane knows nothing of real nodes, DNS or the clusterset: the
// package testbed puts those together.
package controlplane
