package reconciler

import (
	"cmp"
	"maps"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// overloadThreshold is how far below its share of the endpoints a zone may
// fall before topology-aware hints are given up (upstream's 20 %).
const overloadThreshold = 0.2

// TopologyModeAuto reports whether a Service's annotations ask for
// topology-aware hints: service.kubernetes.io/topology-mode (or the
// deprecated service.kubernetes.io/topology-aware-hints, which wins when
// both are set) is "Auto" or "auto".
func TopologyModeAuto(annotations map[string]string) bool {
	v, ok := annotations[corev1.DeprecatedAnnotationTopologyAwareHints]
	if !ok {
		v = annotations[corev1.AnnotationTopologyMode]
	}
	return v == "Auto" || v == "auto"
}

// ZoneCPU sums the allocatable CPU (in millicores) of the ready nodes per
// zone, leaving out control-plane nodes, as kube-controller-manager's
// topology cache does. It returns nil, meaning no topology-aware hints,
// when a counted node has no zone label or no CPU, or fewer than two zones
// have CPU.
func ZoneCPU(nodes []*corev1.Node) map[string]int64 {
	byZone := map[string]int64{}
	for _, n := range nodes {
		if _, ok := n.Labels["node-role.kubernetes.io/control-plane"]; ok {
			continue
		}
		if _, ok := n.Labels["node-role.kubernetes.io/master"]; ok {
			continue
		}
		if !nodeReady(n) {
			continue
		}
		zone := n.Labels[corev1.LabelTopologyZone]
		cpu := n.Status.Allocatable.Cpu().MilliValue()
		if zone == "" || cpu == 0 {
			return nil
		}
		byZone[zone] += cpu
	}
	if len(byZone) < 2 {
		return nil
	}
	return byZone
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TopologyHints returns the hints rule (for Input.Hints, with
// WithTrafficDistribution) of topology-aware hints, computed per address
// type over all of desired: each ready endpoint is hinted to its own zone,
// then endpoints of zones holding more than their share of the CPU
// (zoneCPU, from ZoneCPU) are hinted to zones holding less, until each
// zone is within half an endpoint of its share. As upstream, no endpoint
// of an address type gets hints when zoneCPU is nil, when there are fewer
// ready endpoints than zones, when a ready endpoint has no zone, or when a
// zone's minimum (its share less the 20 % overload threshold, rounded up)
// cannot be met.
//
// Which endpoints move is decided by address order, so the rule depends on
// desired alone; upstream decides by the order of its slices and keeps the
// hints of slices it does not rewrite, so the two may hint different
// endpoints of a zone, always in the same numbers per zone.
func TopologyHints(zoneCPU map[string]int64, desired []EndpointGroup) func(*discoveryv1.Endpoint) *discoveryv1.EndpointHints {
	hinted := map[string]string{} // first address -> zone
	byType := map[discoveryv1.AddressType][]*discoveryv1.Endpoint{}
	for i := range desired {
		g := &desired[i]
		for j := range g.Endpoints {
			ep := &g.Endpoints[j]
			if ptr.Deref(ep.Conditions.Ready, false) && len(ep.Addresses) > 0 {
				byType[g.AddressType] = append(byType[g.AddressType], ep)
			}
		}
	}
	for _, ready := range byType {
		for addr, zone := range allocateZones(zoneCPU, ready) {
			hinted[addr] = zone
		}
	}
	return func(ep *discoveryv1.Endpoint) *discoveryv1.EndpointHints {
		if len(ep.Addresses) == 0 || !ptr.Deref(ep.Conditions.Ready, false) {
			return nil
		}
		zone, ok := hinted[ep.Addresses[0]]
		if !ok {
			return nil
		}
		return &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}}
	}
}

// allocateZones hints the ready endpoints of one address type: it returns
// each endpoint's hinted zone by its first address, or nil for none.
func allocateZones(zoneCPU map[string]int64, ready []*discoveryv1.Endpoint) map[string]string {
	n := len(ready)
	if zoneCPU == nil || len(zoneCPU) > n {
		return nil
	}
	var total int64
	for _, cpu := range zoneCPU {
		total += cpu
	}
	target := map[string]float64{}
	minimumSum := 0
	for zone, cpu := range zoneCPU {
		share := float64(cpu) / float64(total) * float64(n)
		minimum := int(math.Ceil(share * (1 / (1 + overloadThreshold))))
		minimumSum += minimum
		if minimumSum > n {
			return nil
		}
		target[zone] = math.Max(share, float64(minimum))
	}

	slices.SortFunc(ready, func(a, b *discoveryv1.Endpoint) int { return cmp.Compare(a.Addresses[0], b.Addresses[0]) })
	hinted := make(map[string]string, n)
	count := map[string]int{}
	for _, ep := range ready {
		zone := ptr.Deref(ep.Zone, "")
		if zone == "" {
			return nil
		}
		hinted[ep.Addresses[0]] = zone
		count[zone]++
	}

	give, receive := transfers(target, count)
	for _, ep := range ready {
		from := hinted[ep.Addresses[0]]
		if give[from] == 0 {
			continue
		}
		to := ""
		for _, z := range slices.Sorted(maps.Keys(receive)) {
			if receive[z] > 0 {
				to = z
				break
			}
		}
		if to == "" {
			break
		}
		hinted[ep.Addresses[0]] = to
		give[from]--
		receive[to]--
	}
	return hinted
}

// transfers returns how many hints each zone gives and receives: one at a
// time from the zone furthest above its target to the zone furthest below,
// while both are at least half a hint away (upstream's
// getGivingAndReceivingZones; ties go to the zone named first).
func transfers(target map[string]float64, count map[string]int) (give, receive map[string]int) {
	above, below := map[string]float64{}, map[string]float64{}
	for zone, t := range target {
		switch c := float64(count[zone]); {
		case c > t:
			above[zone] = c - t
		case c < t:
			below[zone] = t - c
		}
	}
	give, receive = map[string]int{}, map[string]int{}
	for {
		from, excess := most(above)
		to, lack := most(below)
		if from == "" || to == "" || (excess < 1 && lack < 1) || excess < 0.5 || lack < 0.5 {
			return give, receive
		}
		give[from]++
		above[from]--
		receive[to]++
		below[to]--
	}
}

func most(zones map[string]float64) (string, float64) {
	zone, n := "", 0.0
	for _, z := range slices.Sorted(maps.Keys(zones)) {
		if zones[z] > n {
			zone, n = z, zones[z]
		}
	}
	return zone, n
}
