package controlplane

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// A generic control plane (KEP-4080) serves what a hub needs and nothing
// of a cluster's: namespaces, RBAC, CRDs, admission policies, leases and
// events, without Services, nodes or pods, and without the controllers
// and storage behind them. make tools builds it from k8s.io/kubernetes's
// sample (pkg/controlplane/apiserver/samples/generic). kwokctl starts a
// kube-apiserver; makeGeneric puts the generic control plane in its place
// with the same flags (certificates, service-account keys, etcd, audit),
// less those it does not have, so that every client keeps its address.

// GenericBinary is the generic control plane's binary in the BinDir.
const GenericBinary = "generic-controlplane"

// kubeAPIServerOnlyFlags are the flags of kube-apiserver that the generic
// control plane does not have: those of Services, nodes and kubelets.
var kubeAPIServerOnlyFlags = []string{
	"allow-privileged", "endpoint-reconciler-type",
	"kubelet-certificate-authority", "kubelet-client-certificate", "kubelet-client-key",
	"kubelet-preferred-address-types", "kubelet-timeout",
	"kubernetes-service-node-port", "service-cluster-ip-range", "service-node-port-range",
}

// genericArgs returns kube-apiserver's flags args as the generic control
// plane takes them: without kubeAPIServerOnlyFlags, and with the Node
// authorizer (which needs nodes and pods) left out of --authorization-mode.
func genericArgs(args []string) []string {
	var out []string
	for _, a := range args {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		switch {
		case slices.Contains(kubeAPIServerOnlyFlags, name):
		case name == "authorization-mode":
			modes := slices.DeleteFunc(strings.Split(value, ","), func(m string) bool { return m == "Node" })
			out = append(out, "--authorization-mode="+strings.Join(modes, ","))
		default:
			out = append(out, a)
		}
	}
	return out
}

// makeGeneric replaces the kube-apiserver that kwokctl started with the
// generic control plane, and returns once it answers.
func (cp *ControlPlane) makeGeneric(ctx context.Context) error {
	pids, err := cp.Pids()
	if err != nil {
		return err
	}
	args, err := processArgs(pids["kube-apiserver"])
	if err != nil {
		return fmt.Errorf("testbed: %s: kube-apiserver's flags: %w", cp.Name, err)
	}
	if err := cp.StopAPIServer(ctx); err != nil {
		return err
	}
	cp.genericArgs = genericArgs(args)
	return cp.startGeneric(ctx)
}

// startGeneric starts the generic control plane (under kube-apiserver's
// pid file, where StopAPIServer and the teardown look) and waits until it
// answers.
func (cp *ControlPlane) startGeneric(ctx context.Context) error {
	if port, err := cp.apiServerPort(); err == nil {
		releasePort(port) // held since StopAPIServer
	}
	if err := cp.startProcess("kube-apiserver", filepath.Join(cp.binDir, GenericBinary), cp.genericArgs); err != nil {
		return err
	}
	if err := cp.waitReady(ctx); err != nil {
		return fmt.Errorf("testbed: %s: the generic control plane did not answer (its log: %s): %w",
			cp.Name, filepath.Join(cp.LogDir(), "kube-apiserver.log"), err)
	}
	return nil
}

// ServeGeneric puts the generic control plane (generic true) or
// kube-apiserver in front of the control plane's etcd, with the same
// flags, data and address: one hub, served by each in turn, for figures of
// both under the same load. It returns once the new one answers.
func (cp *ControlPlane) ServeGeneric(ctx context.Context, generic bool) error {
	switch {
	case cp.HA != nil:
		return fmt.Errorf("testbed: %s: an HA control plane serves kube-apiserver only", cp.Name)
	case generic == (cp.genericArgs != nil):
		return nil
	case generic:
		return cp.makeGeneric(ctx)
	}
	if err := cp.StopAPIServer(ctx); err != nil {
		return err
	}
	cp.genericArgs = nil
	return cp.StartAPIServer(ctx)
}

// Generic reports whether the generic control plane serves it now.
func (cp *ControlPlane) Generic() bool { return cp.genericArgs != nil }
