// Package v1alpha1 holds mcs-syncer's own API types, group mcs-syncer.io,
// version v1alpha1: the PublishedExport that carries one member's export
// of one Service through a hub (or the members' own API servers), and the
// ClusterSetConfiguration file that names the members. It is the one input
// of controller-gen (`make generate`: DeepCopy, and PublishedExport's CRD
// into config/crd), and imports nothing of mcs-syncer's, so that every
// package that reads or writes these objects can depend on it alone.
//
// +groupName=mcs-syncer.io
package v1alpha1
