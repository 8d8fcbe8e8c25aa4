// Package reconciler will hold mcs-syncer's generic, reusable EndpointSlice
// reconciler (the idea of KEP-3685 and KEP-4770): given an owner object and
// the endpoints it should have, it computes the EndpointSlices to create,
// update and delete with minimal churn, and applies them. It knows nothing of
// Multi-Cluster Services and imports only client-go, apimachinery, the core
// API types and Prometheus' client library.
//
// It is filled by the reconciler issue; nothing here yet.
package reconciler
