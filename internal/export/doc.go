// Package export holds the export watcher: one per member cluster, on that
// cluster's cache. For every ServiceExport it builds the
// clusterset.ExportedService (the Service's exported spec, the
// ServiceExport's exportedLabels/exportedAnnotations and the endpoints of
// all the Service's EndpointSlices, whoever manages them), puts it into the
// Store, withdraws it when the ServiceExport or the Service goes or becomes
// invalid, and writes the ServiceExport's status.
//
// Invariants:
//   - EndpointSlices that carry multicluster.kubernetes.io/service-name
//     (imported slices) never enter the watcher's cache (ConfigureCache), so
//     an import is never exported again.
//   - Slices and Services of Services that are not exported cause no
//     reconcile.
//   - Endpoints keep their addresses, ready/serving/terminating conditions,
//     hostname, nodeName, zone, hints and targetRef.
//   - A change of one slice reads that slice only (groupers.go): the
//     export shares the cache's endpoints, which nothing writes, and is
//     what reconciler.GroupSlices would make of all the Service's slices.
//   - Status is written through the status subresource, and only when a
//     condition changed: Valid (True/Valid; False/NoService,
//     InvalidServiceType), Ready (True/Exported once in the Store;
//     False/Pending while invalid), Conflict (from clusterset.Merge over the
//     Store: True with the standard reasons comma-joined and a message naming
//     the field and the winning cluster, on every constituent export;
//     False/NoConflicts). With Options.WriteStatus off (another mcs-syncer
//     owns that cluster) no status is written.
package export
