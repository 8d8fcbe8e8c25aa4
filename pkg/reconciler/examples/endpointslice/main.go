// Command endpointslice is the Kubernetes EndpointSlice controller rebuilt
// on pkg/reconciler: Services with a selector, their Pods and the Nodes
// become EndpointSlices, as kube-controller-manager's
// endpointslice-controller makes them (labels, named target ports,
// publishNotReadyAddresses, terminating endpoints per KEP-1672, hostnames,
// dual-stack, headless Services, placeholders, trafficDistribution and
// topology-aware hints), under a managed-by value of its own so that it can
// run beside the original. The repository's differential test
// (test/e2e/diffkcm) runs both on one cluster and compares their slices.
//
//	endpointslice --kubeconfig ~/.kube/config --managed-by endpointslice.example.com
package main

import "github.com/mcs-syncer/mcs-syncer/pkg/reconciler/examples/internal/run"

func main() {
	run.Main("endpointslice", "endpointslice.example.com", func(s run.Setup) (run.Controller, error) { return newController(s) })
}
