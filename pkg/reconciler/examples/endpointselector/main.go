// Command endpointselector keeps the EndpointSlices of EndpointSelectors
// (gateway.networking.x-k8s.io/v1alpha1, Gateway API's GEP-3539 line): the
// pods a label selector chooses, on the selector's ports, without a Service.
// It reads one as a headless dual-stack Service for DesiredFromServicePods.
//
//	endpointselector --kubeconfig ~/.kube/config
package main

import "github.com/mcs-syncer/mcs-syncer/pkg/reconciler/examples/internal/run"

func main() {
	run.Main("endpointselector", "endpointselector.example.com", func(s run.Setup) (run.Controller, error) { return newController(s) })
}
