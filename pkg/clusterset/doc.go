// Package clusterset holds the shared vocabulary and state of a clusterset
// (KEP-1645), used by both the export and the import side:
//
//   - ClusterID: a member's ID, a DNS-1123 label, validated at start-up.
//   - Config: the membership file (LoadConfig): the clusterset's name and,
//     per member, its ID and how to reach it (kubeconfig path and context,
//     or in-cluster). See config/samples/clusterset.yaml.
//   - Members: one controller-runtime cluster.Cluster per member, started
//     and stopped with the manager, with each member's connection state
//     (connected or not, and since when), exported as the metric
//     mcs_syncer_member_connected{cluster} and queryable by the import side.
//     The state comes from probes of the member's /readyz: at once when one
//     of its informers' watches fails, every HealthInterval while connected
//     (client-go retries refused connections inside its reflectors without
//     reporting them, so watch errors alone miss a dead API server), and
//     with backoff while disconnected.
//   - ExportedService: what one cluster exports under one namespace/name:
//     the ServiceExport's age, the exported spec, and the endpoints grouped
//     in the type pkg/reconciler takes.
//   - Store: the exports of every cluster, keyed by namespace/name,
//     notifying subscribers of the keys that changed.
//   - Merge: the pure rules that turn all exports of one namespace/name into
//     one ServiceImport spec and the conflicts between them (oldest export
//     wins, ties by cluster ID).
package clusterset
