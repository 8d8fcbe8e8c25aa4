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
//
// --zone-minimums turns on the library's WithZoneMinimums, which upstream
// does not have.
package main

import (
	"flag"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/examples/internal/run"
)

func main() {
	zoneMinimums := flag.Bool("zone-minimums", false, "keep every zone's topology-aware hints at its minimum, rewriting slices whose kept hints leave a zone below it (kube-controller-manager does not)")
	run.Main("endpointslice", "endpointslice.example.com", func(s run.Setup) (run.Controller, error) { return newController(s, *zoneMinimums) })
}
