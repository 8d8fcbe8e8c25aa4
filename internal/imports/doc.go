// Package imports holds the import controller: one per consumer cluster. For every namespace/name
// that some member exports it keeps, in the consumer:
//
//   - a ServiceImport of the same namespace/name, spec from
//     clusterset.Merge, status.clusters the exporting clusters, Ready and
//     endpointSliceObjects Present; deleted when nobody exports. A namespace
//     the consumer does not have is not created: the import is skipped (and
//     counted) until the namespace appears;
//   - for ClusterSetIP imports, the derived Service "derived-" + the first
//     10 characters of lower-case base32hex(sha256("<ns>/<name>")):
//     selector-less, type ClusterIP, owned by the ServiceImport, named in the
//     ServiceImport's multicluster.kubernetes.io/derived-service
//     annotation; its ClusterIPs become the ServiceImport's spec.ips;
//   - EndpointSlices through pkg/reconciler (one reconcile per source
//     cluster; owner the ServiceImport; ownership enforced), labelled
//     multicluster.kubernetes.io/service-name=<name>,
//     multicluster.kubernetes.io/source-cluster=<cluster>,
//     endpointslice.kubernetes.io/managed-by=<managed-by> and, for
//     ClusterSetIP only, kubernetes.io/service-name=<derived Service>, so
//     kube-proxy routes the clusterset IP. Slices not managed by
//     mcs-syncer are never touched.
//
// A reconcile reads, plans and applies: plan.go computes each object as it
// must be from what was read, with no client (planServiceImport,
// planDerivedService, the per-source reconciler inputs, planStatus); the
// apply functions write what differs, in the order the objects depend on
// each other, and record what they wrote.
//
// Members disconnected for longer than the grace period contribute nothing
// (their endpoints, and the import if they were its only exporter, are
// withdrawn) until they are back. An unchanged world costs no write.
package imports
