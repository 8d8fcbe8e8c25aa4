// Package publish carries a member's exports to the other members without
// them reading the member's Services and EndpointSlices.
//
// A member's own mcs-syncer (per-cluster mode) publishes each of its
// exports as one PublishedExport object (mcs-syncer.io/v1alpha1): the
// exported spec of the Service and its endpoints, as the export watcher put
// them into the Store. The objects live in one namespace of a publication
// server: the member's own API server (direct mode) or a hub API server
// that every member writes into (hub mode). Other members read them with a
// watch on that namespace selected by the source-cluster label, so what
// they read grows with what is exported, never with the member's other
// objects.
//
// Besides its exports, a publisher writes its cluster's marker (a
// PublishedExport named after the cluster, with no Service) once it has
// published every export of a full pass and withdrawn every stale one. A
// reader counts the cluster as synced (clusterset.Store.MarkSynced) only
// after it has seen the marker: until then what it holds of the cluster may
// be partial, and nothing is withdrawn on its account. (A consumer
// switching from direct to hub mode before the member publishes into the
// hub therefore keeps the member's endpoints.)
//
// A publication is input from another cluster: the reader checks every
// field it uses (Decode) and withdraws, with a log line and a metric, what
// does not pass.
//
// PublishedExport's DeepCopy (zz_generated.deepcopy.go) and CRD
// (config/crd/mcs-syncer.io_publishedexports.yaml) are generated from
// types.go by controller-gen: make generate.
//
// +groupName=mcs-syncer.io
// +versionName=v1alpha1
package publish
