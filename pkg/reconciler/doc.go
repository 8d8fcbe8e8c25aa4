// Package reconciler is a generic, reusable EndpointSlice reconciler: given
// an owner object and the endpoints it should have, it computes the
// EndpointSlices to create, update and delete with minimal churn, and
// applies them. It is the idea of KEP-3685 (the Kubernetes reconciler made
// importable) and KEP-4770 (made generic), written anew; it knows nothing
// of Multi-Cluster Services and imports only client-go, apimachinery, the
// core API types and Prometheus' client library.
//
// # Use
//
// Build one Reconciler per controller with New (a client, the managed-by
// value, options), then per owner call Reconcile with an Input: the owner
// (any object: a Service, a ServiceImport, a custom resource) and its
// GroupVersionKind, the desired endpoints as EndpointGroups, the supported
// address types, the existing slices (listed from an informer cache by the
// managed-by label), a Labeler for the slices' labels and annotations, and
// the trigger time. DesiredFromServicePods and ServiceLabels serve the
// Kubernetes EndpointSlice controller's own use case (Service + Pods).
//
// Reconcile is Plan followed by Apply, and both are public (KEP-3685 item
// 4): Plan returns the writes without writing anything or changing any
// state but its memo (it reads the tracker); a caller may inspect or decorate them before
// Apply sends them. Apply is called for empty plans too: it writes nothing
// then, but it keeps the metrics true (a reconciler that only ever saw empty
// plans, after a restart, still reports its owners' endpoints and slices).
// GroupSlices turns slices read elsewhere (another cluster's) into desired
// groups, with one rule for duplicates (see EndpointGroup); a SliceGrouper
// does the same again and again for one Service, reading only the slices
// that changed since its last call. WithIncrementalPlans does the like for
// plans: an owner's next plan reads only the desired endpoints that moved
// since its last call and the slices that hold them, and is the plan made
// without it.
//
// # Invariants
//
//   - Every slice holds endpoints of one address type and one port set, at
//     most the configured maximum (default 100).
//   - Slices are named generateName "<owner>-", carry a controller owner
//     reference with the owner's GVK, the label
//     endpointslice.kubernetes.io/managed-by=<managed-by> and the labels of
//     the Labeler (set exactly), the Labeler's annotations (merged: others'
//     annotations survive) and, when a trigger time is given,
//     endpoints.kubernetes.io/last-change-trigger-time.
//   - Slices whose managed-by label is not this reconciler's are never
//     touched. With WithOwnershipEnforced, slices of another owner are
//     deleted and never reused.
//   - Plans are deterministic: the same input, in any order, gives the same
//     plan byte for byte. Planning again over the applied result gives an
//     empty plan. Inputs and informer objects are never modified.
//   - A failed write does not stop the others; Apply returns them joined.
//   - Apply writes every create, then every update, then every delete; with
//     WithConcurrentWrites, several of one kind at once, never two kinds.
//   - After writing, the Tracker knows each slice's generation; a later
//     Plan over an informer cache that has not caught up fails with
//     ErrStaleCache and writes nothing. Callers feed it delete events
//     (Tracker.Observed) and may use Tracker.ShouldSync to ignore the echo
//     of their own writes (which it does not, once a plan was refused as
//     stale, until a plan is not: that plan waits for the echo).
//
// Endpoint conditions (ready, serving, terminating; KEP-1672), hostname,
// nodeName, zone, hints and targetRef are written as given. With
// WithTrafficDistribution the reconciler computes hints from the owner's
// trafficDistribution instead, or with a rule of the caller's (Input.Hints),
// or, with Input.Topology, topology-aware hints
// (service.kubernetes.io/topology-mode: Auto) proportional to the zones'
// CPU (ZoneCPU), as kube-controller-manager gives them.
package reconciler
