// Package diffkcm is the differential test of pkg/reconciler against
// kube-controller-manager: on one testbed cluster, kube-controller-manager's
// endpointslice-controller runs as usual and the library's example
// controller (pkg/reconciler/examples/endpointslice) runs beside it under
// its own managed-by value. A seeded random workload changes Services,
// Pods and their readiness; after each step settles, every Service's slices
// of the two controllers are compared after normalisation. A difference
// fails the test with the seed, the step and the diff; differences that are
// deliberate are known by name (see explained in compare_test.go and the
// library's README).
//
// DIFFKCM_STEPS sets the number of steps (default 150; `make diff-kcm` runs
// 2,000) and DIFFKCM_SEED the seed (default: the clock, printed), so that a
// failure can be replayed. DIFFKCM_ZONE_MINIMUMS=1 runs ours with the
// library's WithZoneMinimums (--zone-minimums), which kube-controller-manager
// does not have: ours must then keep every zone at its minimum, and writes
// more.
package diffkcm
