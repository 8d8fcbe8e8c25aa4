package reconciler

import (
	"maps"
	"math"
	"math/bits"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
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

// Topology is what topology-aware hints (service.kubernetes.io/topology-mode:
// Auto) are computed from; see Input.Topology.
type Topology struct {
	// ZoneCPU is the allocatable CPU of each zone, in millicores (from
	// ZoneCPU). Nil means the nodes do not tell, and no endpoint gets
	// hints.
	ZoneCPU map[string]int64
}

// allocation is how many hints a zone should get: its share of the CPU
// (desired, at least its minimum), and the bounds that keep every zone's
// endpoints within the 20 % overload threshold.
type allocation struct {
	minimum, maximum int
	desired          float64
}

// allocations returns each zone's allocation for n ready endpoints, or nil
// when hints cannot be given: no CPU information, fewer endpoints than
// zones, or minimums that add up to more than n (upstream's
// getAllocations).
func allocations(zoneCPU map[string]int64, n int) map[string]allocation {
	if len(zoneCPU) < 2 || len(zoneCPU) > n {
		return nil
	}
	var total int64
	for _, cpu := range zoneCPU {
		total += cpu
	}
	out := make(map[string]allocation, len(zoneCPU))
	minimumSum := 0
	for zone, cpu := range zoneCPU {
		share := float64(cpu) / float64(total) * float64(n)
		minimum := int(math.Ceil(share * (1 / (1 + overloadThreshold))))
		minimumSum += minimum
		if minimumSum > n {
			return nil
		}
		out[zone] = allocation{minimum: minimum, desired: math.Max(share, float64(minimum))}
	}
	for zone, a := range out {
		a.maximum = a.minimum + n - minimumSum
		out[zone] = a
	}
	return out
}

// topologyHints sets the hints of one address type's slices as
// kube-controller-manager's topology cache does (AddHints), so that the two
// write the same numbers of hints per zone from the same slices:
//
//   - An unchanged slice keeps its hints while every ready endpoint has one,
//     to a zone that has CPU, and its zones stay within their maximum
//     counted over the unchanged slices kept; otherwise it is rewritten.
//     Where the unchanged slices cannot all be kept, the library keeps the
//     most it can (keepMost), where upstream keeps them in its lister's
//     order while they fit: what is kept is what upstream keeps in some
//     order, and never more slices are written.
//   - Every ready endpoint of a slice the plan writes is hinted to its own
//     zone, then endpoints of zones above their desired share are hinted to
//     zones below it, in the order of the slices and their endpoints, until
//     each is within half an endpoint of its share.
//   - No endpoint has hints when allocations fail, or when a ready endpoint
//     of a written slice has no zone.
//
// Keeping what is still valid writes no slice for hints alone; the price is
// that the numbers per zone depend on which slices were written before, as
// upstream's do. Among equal zones, the first by name gives or receives
// first (upstream picks at random). WithZoneMinimums adds a rule of the
// library's own: when the kept hints leave a zone below its minimum (which
// upstream writes: getHintsByZone checks maximums only), the kept slices
// are rewritten one at a time, from the last, until no zone is, so that no
// zone's endpoints pass the overload threshold and no slice is written
// that need not be.
func (b *planner) topologyHints(addressType discoveryv1.AddressType) {
	h := &hintPass{b: b}
	for _, s := range slices.Concat(b.plan.Create, b.plan.Update) {
		if s.AddressType == addressType {
			h.writes = append(h.writes, s)
		}
	}
	for _, p := range b.unchanged {
		if p.slice.AddressType == addressType {
			h.kept = append(h.kept, p)
		}
	}
	ready := 0
	for _, s := range h.writes {
		ready += countReady(s.Endpoints)
	}
	for _, p := range h.kept {
		ready += countReady(p.slice.Endpoints)
	}
	defer h.dropNoOps()
	alloc := allocations(b.in.Topology.ZoneCPU, ready)
	if alloc == nil {
		h.clear()
		return
	}
	hinted := h.allocate(alloc, h.keepMost(alloc))
	for hinted != nil && b.r.zoneMinimums && len(h.kept) > 0 && belowMinimum(hinted, alloc) {
		hinted = h.allocate(alloc, len(h.kept)-1)
	}
	if hinted == nil {
		h.clear()
	}
}

// hintPass is the hinting of one address type's slices: those the plan
// writes, those it leaves unchanged (kept), and those of the latter
// rewritten for their hints.
type hintPass struct {
	b               *planner
	writes          []*discoveryv1.EndpointSlice
	kept, rewritten []*pending
}

// maxKeepSearch bounds the unchanged slices keepMost searches every
// subset of (2^n of them); above it, they are kept in order while they fit,
// as upstream does.
const maxKeepSearch = 12

// keepMost puts first in h.kept the largest set of unchanged slices whose
// hints are valid together (validHints: each zone within its maximum over
// all of them), the earliest in the slices' order among sets of one size,
// and returns its size: the slices allocate keeps.
func (h *hintPass) keepMost(alloc map[string]allocation) int {
	n := len(h.kept)
	if n > maxKeepSearch {
		return n
	}
	byZone := make([]map[string]int, n)
	for i, p := range h.kept {
		byZone[i] = validHints(p.slice, nil, alloc)
	}
	// Slice i is bit n-1-i, so that, going down from the set of all, the
	// first set of a size found keeps the earliest slices.
	keeps := func(set, i int) bool { return set&(1<<(n-1-i)) != 0 }
	best, bestSize := 0, 0
	for set := 1<<n - 1; set > 0; set-- {
		size := bits.OnesCount(uint(set))
		if size <= bestSize {
			continue
		}
		total, fits := map[string]int{}, true
		for i := 0; i < n && fits; i++ {
			if !keeps(set, i) {
				continue
			}
			fits = byZone[i] != nil // nil: not valid even alone
			for zone, k := range byZone[i] {
				total[zone] += k
				fits = fits && total[zone] <= alloc[zone].maximum
			}
		}
		if fits {
			best, bestSize = set, size
		}
	}
	var kept, rest []*pending
	for i, p := range h.kept {
		if keeps(best, i) {
			kept = append(kept, p)
		} else {
			rest = append(rest, p)
		}
	}
	h.kept = append(kept, rest...)
	return bestSize
}

// allocate hints the slices (see topologyHints), keeping the valid hints
// of the first keep unchanged slices (rewriting the others), and returns
// the hints per zone; nil when a ready endpoint of a slice written has no
// zone, and hints must go. Called again with a smaller keep, it hints the
// slices written anew.
func (h *hintPass) allocate(alloc map[string]allocation, keep int) map[string]int {
	hinted := map[string]int{}
	var kept []*pending
	for i, p := range h.kept {
		if i < keep {
			if byZone := validHints(p.slice, hinted, alloc); byZone != nil {
				kept = append(kept, p)
				for zone, n := range byZone {
					hinted[zone] += n
				}
				continue
			}
		}
		h.writes = append(h.writes, h.b.rewrite(p))
		h.rewritten = append(h.rewritten, p)
	}
	h.kept = kept

	for _, s := range h.writes {
		for i := range s.Endpoints {
			ep := &s.Endpoints[i]
			if !ptr.Deref(ep.Conditions.Ready, false) {
				ep.Hints = nil
				continue
			}
			zone := ptr.Deref(ep.Zone, "")
			if zone == "" {
				return nil
			}
			ep.Hints = zoneHint(zone)
			hinted[zone]++
		}
	}

	desired := make(map[string]float64, len(alloc))
	for zone, a := range alloc {
		desired[zone] = a.desired
	}
	give, receive := transfers(desired, hinted)
	for _, s := range h.writes {
		for i := range s.Endpoints {
			ep := &s.Endpoints[i]
			from := ptr.Deref(ep.Zone, "")
			if ep.Hints == nil || give[from] == 0 {
				continue
			}
			to := firstWith(receive)
			if to == "" {
				return hinted
			}
			ep.Hints = zoneHint(to)
			give[from]--
			receive[to]--
			hinted[from]--
			hinted[to]++
		}
	}
	return hinted
}

// clear removes every hint from the slices written, and rewrites the
// unchanged slices that have any.
func (h *hintPass) clear() {
	for _, s := range h.writes {
		for i := range s.Endpoints {
			s.Endpoints[i].Hints = nil
		}
	}
	for _, p := range h.kept {
		if slices.ContainsFunc(p.slice.Endpoints, func(ep discoveryv1.Endpoint) bool { return ep.Hints != nil }) {
			s := h.b.rewrite(p)
			for i := range s.Endpoints {
				s.Endpoints[i].Hints = nil
			}
			h.rewritten = append(h.rewritten, p)
		}
	}
}

// dropNoOps takes out of the plan the slices rewritten for their hints
// that end with the hints they had (upstream writes them, and the API
// server takes the update for a no-op).
func (h *hintPass) dropNoOps() {
	for _, p := range h.rewritten {
		if equality.Semantic.DeepEqual(p.slice.Endpoints, p.orig.Endpoints) {
			h.b.plan.Update = slices.DeleteFunc(h.b.plan.Update, func(s *discoveryv1.EndpointSlice) bool { return s == p.slice })
		}
	}
}

func belowMinimum(hinted map[string]int, alloc map[string]allocation) bool {
	for zone, a := range alloc {
		if hinted[zone] < a.minimum {
			return true
		}
	}
	return false
}

// validHints returns the hints per zone of an unchanged slice, or nil when
// the slice must be rewritten: a ready endpoint without hints, a hint to a
// zone without allocation, or more hints for a zone than its maximum on
// top of those already counted (upstream's getHintsByZone).
func validHints(s *discoveryv1.EndpointSlice, counted map[string]int, alloc map[string]allocation) map[string]int {
	byZone := map[string]int{}
	for _, ep := range s.Endpoints {
		if !ptr.Deref(ep.Conditions.Ready, false) {
			continue
		}
		if ep.Hints == nil || len(ep.Hints.ForZones) == 0 {
			return nil
		}
		for _, z := range ep.Hints.ForZones {
			if _, ok := alloc[z.Name]; !ok {
				return nil
			}
			byZone[z.Name]++
		}
	}
	for zone, n := range byZone {
		if n+counted[zone] > alloc[zone].maximum {
			return nil
		}
	}
	return byZone
}

// rewrite adds an unchanged slice to the plan's updates, for its hints.
func (b *planner) rewrite(p *pending) *discoveryv1.EndpointSlice {
	s := p.mutable()
	b.setMetadata(s)
	b.plan.Update = append(b.plan.Update, s)
	return s
}

func countReady(eps []discoveryv1.Endpoint) int {
	n := 0
	for i := range eps {
		if ptr.Deref(eps[i].Conditions.Ready, false) {
			n++
		}
	}
	return n
}

func zoneHint(zone string) *discoveryv1.EndpointHints {
	return &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}}
}

// firstWith returns the first zone by name with a count left, or "".
func firstWith(counts map[string]int) string {
	for _, z := range slices.Sorted(maps.Keys(counts)) {
		if counts[z] > 0 {
			return z
		}
	}
	return ""
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
