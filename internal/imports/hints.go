package imports

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// Topology hints of imported endpoints. A source cluster's own hints were
// computed by its EndpointSlice controller for its own zones and nodes;
// they mean nothing to a consumer and never reach it. The import's
// reconcilers manage hints (reconciler.WithTrafficDistribution) from the
// ServiceImport's trafficDistribution, over the union of every cluster's
// endpoints:
//
//   - PreferSameZone (and PreferClose, its former name): each ready
//     endpoint with a zone is hinted for that zone, as the Kubernetes
//     EndpointSlice controller does. kube-proxy on a consumer node in zone
//     Z then sends traffic to the ready endpoints of zone Z of any cluster,
//     and to every endpoint when there is none (or when some ready endpoint
//     has no zone).
//   - PreferSameNode: the same zone hints and no node hints: a node name of
//     another cluster names no node of the consumer (kind-based clustersets
//     share node names), so the preference falls back to the zone.
//   - unset, or a value this version does not know: no hints at all.

// importTrafficDistribution is the trafficDistribution the import's
// reconcilers compute hints for.
func importTrafficDistribution(td *string) *string {
	switch ptr.Deref(td, "") {
	case corev1.ServiceTrafficDistributionPreferClose, corev1.ServiceTrafficDistributionPreferSameZone,
		corev1.ServiceTrafficDistributionPreferSameNode:
		return ptr.To(corev1.ServiceTrafficDistributionPreferSameZone)
	}
	return nil
}
