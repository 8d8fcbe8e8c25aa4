// Package mcsapi knows the versions of the MCS API (ServiceExport and
// ServiceImport of multicluster.x-k8s.io) that a member may serve, and
// which one a member serves now.
//
// mcs-api moved its CRDs' storage to v1beta1 at v0.5.0; a cluster that
// installed them earlier serves v1alpha1 only. The two versions have the
// same schema (mcs-api's CRDs convert between them with strategy None), so
// mcs-syncer's code uses one set of Go types, mcs-api's v1beta1, and a
// member's scheme (Scheme) says which version its client and cache speak
// on the wire. Served asks a member's discovery which one to speak,
// preferring v1beta1.
package mcsapi
