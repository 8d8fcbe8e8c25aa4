// Command mirroring is the Kubernetes EndpointSlice mirroring controller
// rebuilt on pkg/reconciler: the Endpoints of Services without a selector
// become EndpointSlices, as kube-controller-manager's
// endpointslicemirroring-controller makes them (the Endpoints' labels and
// annotations, repacked subsets, at most 1,000 addresses per subset, the
// skip-mirror label and leader-election records honoured), under a
// managed-by value of its own so that it can run beside the original. The
// repository's differential test (test/e2e/diffkcm) compares the two.
//
//	mirroring --kubeconfig ~/.kube/config --managed-by mirroring.example.com
package main

import "github.com/mcs-syncer/mcs-syncer/pkg/reconciler/examples/internal/run"

func main() {
	run.Main("mirroring", "mirroring.example.com", func(s run.Setup) (run.Controller, error) { return newController(s) })
}
