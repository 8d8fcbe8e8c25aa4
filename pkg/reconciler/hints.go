package reconciler

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// hintsFor returns the hints an endpoint gets under trafficDistribution:
// ready endpoints with a zone get a hint for their zone (PreferClose,
// PreferSameZone) or for their zone and node (PreferSameNode); every other
// endpoint, and every endpoint under any other value, gets none.
func hintsFor(ep *discoveryv1.Endpoint, trafficDistribution *string) *discoveryv1.EndpointHints {
	if trafficDistribution == nil || !ptr.Deref(ep.Conditions.Ready, false) || ptr.Deref(ep.Zone, "") == "" {
		return nil
	}
	switch *trafficDistribution {
	case corev1.ServiceTrafficDistributionPreferClose, corev1.ServiceTrafficDistributionPreferSameZone:
		return &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: *ep.Zone}}}
	case corev1.ServiceTrafficDistributionPreferSameNode:
		h := &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: *ep.Zone}}}
		if node := ptr.Deref(ep.NodeName, ""); node != "" {
			h.ForNodes = []discoveryv1.ForNode{{Name: node}}
		}
		return h
	}
	return nil
}
