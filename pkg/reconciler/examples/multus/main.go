// Command multus keeps EndpointSlices of Services on a secondary network, as
// Multus' service controllers do: a Service with a selector and the annotation
// k8s.v1.cni.cncf.io/service-network: <network> gets slices of its pods'
// addresses on that network (their k8s.v1.cni.cncf.io/network-status) in place
// of the pod IPs, the rest as the EndpointSlice controller makes it. Label the
// Service service.kubernetes.io/service-proxy-name: kube-proxy leaves it then.
//
//	multus --kubeconfig ~/.kube/config
package main

import "github.com/mcs-syncer/mcs-syncer/pkg/reconciler/examples/internal/run"

func main() {
	run.Main("multus", "multus-endpointslice.example.com", func(s run.Setup) (run.Controller, error) { return newController(s) })
}
