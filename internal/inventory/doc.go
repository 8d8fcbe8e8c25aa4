// Package inventory reads a clusterset's members from a cluster inventory:
// the ClusterProfiles of SIG-Multicluster's cluster inventory API
// (KEP-4322, multicluster.x-k8s.io/v1alpha1), which cluster managers such
// as Open Cluster Management and GKE Fleet write, and reaches their
// clusters as KEP-4322 asks (its credential plugins, which it took in from
// KEP-5339):
// through a profile's access provider (its server and CA) and the exec
// credential plugin that the consumer's provider config names for that
// provider, with the arguments and variables of the profile's
// exec/additional-args and exec/additional-envs extensions where the
// provider's policies allow them (cluster-inventory-api v0.1.2).
//
// The few types needed are written here (types.go) from the KEP and the
// API's CRD: the sigs.k8s.io/cluster-inventory-api module is not served by
// the module proxies this project is built from. Profiles are read as
// unstructured objects and converted, so a field this package does not
// name is ignored, as a newer API's would be.
//
// internal/membership turns each profile Read returns into a member
// (reached through ProviderConfig.AccessOf), as it does an entry of the
// clusterset config.
package inventory
