// Package clusterset holds the shared vocabulary and state of a clusterset
// (KEP-1645), used by both the export and the import side:
//
//   - ClusterID: a member's ID, one or two DNS-1123 labels (KEP-1645),
//     validated at start-up.
//   - Membership: what the export and import sides ask of the members
//     while mcs-syncer runs (who they are, whether each answers); the
//     runtime side that answers it is internal/membership.
//   - ExportedService: what one cluster exports under one namespace/name:
//     the ServiceExport's age, the exported spec, and the endpoints grouped
//     in the type pkg/reconciler takes.
//   - Store: the exports of every cluster, keyed by namespace/name,
//     notifying subscribers of the keys that changed.
//   - Feedback: what the readers of the exports learn of their fate (an
//     import blocked, an export not published), back to the export side.
//   - Merge: the pure rules that turn all exports of one namespace/name into
//     one ServiceImport spec and the conflicts between them (oldest export
//     wins, ties by cluster ID).
//
// It holds no controller plumbing (internal/plumbing has it) and imports
// no controller-runtime.
package clusterset
