package imports

import (
	"context"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// Local cluster first (clusterset.LocalClusterFirstAnnotation), through
// the standard objects and kube-proxy alone. kube-proxy on a node of zone
// Z sends a port's traffic only to the ready endpoints hinted for Z when
// every ready endpoint of the port has a zone hint and at least one is
// hinted for Z, and to every ready endpoint otherwise (pkg/proxy,
// topologyModeFromHints). So while the consumer has ready endpoints of its
// own:
//
//   - its own ready endpoints are hinted for every zone of its nodes (""
//     among them when a node has no zone label: kube-proxy then looks for
//     the zone ""),
//   - every other cluster's ready endpoints for otherClusterZone, a zone
//     that no node has,
//
// and each node of the consumer sends to its own cluster only. When the
// consumer has no ready endpoint of its own (or none on some port), no
// endpoint of that port is hinted for any node's zone and kube-proxy falls
// back to every cluster's: the switch happens in the reconcile that
// imports the consumer's own endpoints as unready. A node whose zone is
// not among the hints (one the informer has not seen yet, or beyond the
// API's eight zones per hint) falls back to every cluster as well: the
// rule narrows traffic to ready local endpoints, it never drops any.
// While the rule applies it replaces trafficDistribution's; when the
// consumer has no ready endpoint of its own, trafficDistribution applies
// across clusters (hints.go).

// otherClusterZone is the zone hint of other clusters' endpoints while the
// local cluster comes first: a valid label value that names no real zone.
const otherClusterZone = "mcs-syncer.io.other-cluster"

// maxZoneHints is the API's limit of zones in one endpoint's hints.
const maxZoneHints = 8

// localFirstHints returns the hint rule of each source cluster's
// endpoints, or nil when the import does not put the local cluster first
// now: it does not ask to, the consumer has no ready endpoint of its own
// among those imported (local), or the zones of its nodes (sorted) are not
// known.
func localFirstHints(merged clusterset.Merged, local []reconciler.EndpointGroup, zones []string, consumer clusterset.ClusterID) func(source clusterset.ClusterID) func(*discoveryv1.Endpoint) *discoveryv1.EndpointHints {
	if !merged.Spec.LocalClusterFirst || len(zones) == 0 || !anyReady(local) {
		return nil
	}
	own := make([]discoveryv1.ForZone, 0, min(len(zones), maxZoneHints))
	for _, z := range zones[:min(len(zones), maxZoneHints)] {
		own = append(own, discoveryv1.ForZone{Name: z})
	}
	return func(source clusterset.ClusterID) func(*discoveryv1.Endpoint) *discoveryv1.EndpointHints {
		forZones := []discoveryv1.ForZone{{Name: otherClusterZone}}
		if source == consumer {
			forZones = own
		}
		return func(ep *discoveryv1.Endpoint) *discoveryv1.EndpointHints {
			if !ptr.Deref(ep.Conditions.Ready, false) {
				return nil
			}
			return &discoveryv1.EndpointHints{ForZones: slices.Clone(forZones)}
		}
	}
}

// zonesFor returns the zones of the consumer's nodes when merged asks for
// the local cluster first and they are known (nil otherwise): the slices'
// plan needs them for nothing else.
func (c *Controller) zonesFor(ctx context.Context, merged clusterset.Merged) []string {
	if !merged.Spec.LocalClusterFirst || c.zones == nil {
		return nil
	}
	zones, known := c.zones.Zones(ctx)
	if !known {
		return nil
	}
	return zones
}

func anyReady(groups []reconciler.EndpointGroup) bool {
	for _, g := range groups {
		for _, ep := range g.Endpoints {
			if ptr.Deref(ep.Conditions.Ready, false) {
				return true
			}
		}
	}
	return false
}
