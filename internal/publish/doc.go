// Package publish carries a member's exports to the other members without
// them reading the member's Services and EndpointSlices.
//
// A member's own mcs-syncer (per-cluster and hub mode) publishes each of
// its exports as PublishedExport objects (api/v1alpha1): a head (the
// exported spec of the Service, and the IDs of its parts) and parts of at
// most 100 endpoints each (parts.go), or, for an export of at most 100,
// its head alone holding them, from what the export watcher put into the
// Store. While a member whose readers predate parts is in the
// clusterset, an export is published whole instead: one object, its
// endpoints in its head. The objects live in one namespace of a
// publication server: the member's own API server (direct mode) or a hub
// API server that every member writes into (hub mode). Other members read
// them with a watch on that namespace selected by the source-cluster
// label, so what they read grows with what is exported, never with the
// member's other objects.
//
// Besides its exports, a publisher writes its cluster's marker (a
// PublishedExport named after the cluster, with no Service) once it has
// published every export of a full pass and withdrawn every stale one, and
// renews it as a heartbeat. A reader counts the cluster as synced
// (clusterset.Store.MarkSynced) only after it has seen the marker: until
// then what it holds of the cluster may be partial, and nothing is
// withdrawn on its account. (A consumer switching from direct to hub mode
// before the member publishes into the hub therefore keeps the member's
// endpoints.)
//
// A publication is input from another cluster: the reader checks every
// field it uses (Decode, DecodePart), withdraws with a log line and a
// metric what does not pass, and holds at most so many publications and
// bytes of one member (ReaderOptions).
//
// The PublishedExport type, its DeepCopy and its CRD are in api/v1alpha1
// and config/crd (make generate).
package publish
