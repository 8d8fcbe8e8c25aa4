package reconciler

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// EndpointGroup is a set of endpoints that share an address type and a
// port set: the unit that slices are made of (every slice holds endpoints
// of one group only). Any controller can fill it: from Pods
// (DesiredFromServicePods), from another cluster's slices, from IPs in
// annotations.
//
// Groups with the same address type and the same ports (in any order; a nil
// and an empty port list are the same) are one group. Within a group,
// endpoints are identified by their sorted addresses, hostname and
// targetRef namespace/name. Of two endpoints with the same identity, the
// more available one wins (ready, then serving, then not terminating); on
// a tie, the first one given. So the outcome does not depend on which of two
// slices listing the same address (with different conditions, as while a
// slice controller moves endpoints) was read last.
type EndpointGroup struct {
	AddressType discoveryv1.AddressType
	Ports       []discoveryv1.EndpointPort
	Endpoints   []discoveryv1.Endpoint
}

// group is an EndpointGroup keyed and sorted for planning.
type group struct {
	addressType discoveryv1.AddressType
	portKey     string
	ports       []discoveryv1.EndpointPort
	// endpoints by identity, and their identities in sorted order (the
	// order in which new endpoints are placed, so plans are deterministic).
	byID  map[string]*discoveryv1.Endpoint
	order []string
	// duplicates says that two desired entries had the same identity.
	duplicates bool
	// memo, when set, stands for byID and order: the group is planned
	// incrementally (memo.go).
	memo *memoGroup
}

// size is the number of desired identities.
func (g *group) size() int {
	if g.memo != nil {
		return g.memo.desired
	}
	return len(g.order)
}

// want returns the desired endpoint of an identity.
func (g *group) want(id string) (*discoveryv1.Endpoint, bool) {
	if g.memo != nil {
		e := g.memo.endpoints[id]
		if e == nil || e.count == 0 {
			return nil, false
		}
		return &e.want, true
	}
	ep, ok := g.byID[id]
	return ep, ok
}

// portKey is the canonical form of a port set: ports sorted by name,
// protocol, port and app protocol, so two equal sets in any order match.
func portKey(ports []discoveryv1.EndpointPort) string {
	keys := make([]string, 0, len(ports))
	for _, p := range ports {
		keys = append(keys, strings.Join([]string{
			ptr.Deref(p.Name, "\x00"),
			string(ptr.Deref(p.Protocol, "")),
			strconv.Itoa(int(ptr.Deref(p.Port, -1))),
			ptr.Deref(p.AppProtocol, "\x00"),
		}, "/"))
	}
	slices.Sort(keys)
	return strings.Join(keys, ",")
}

// groupKey is the key of the group of an address type and port set:
// "<address type>#<portKey>".
func groupKey(addressType discoveryv1.AddressType, ports []discoveryv1.EndpointPort) string {
	return string(addressType) + "#" + portKey(ports)
}

// endpointID is an endpoint's identity: the same endpoint whose conditions,
// node, zone or hints change is updated in place, not removed and re-added.
func endpointID(ep *discoveryv1.Endpoint) string {
	var b strings.Builder
	addrs := ep.Addresses
	if !slices.IsSorted(addrs) {
		addrs = slices.Sorted(slices.Values(addrs))
	}
	n := 2 + len(ptr.Deref(ep.Hostname, ""))
	for _, a := range addrs {
		n += len(a) + 1
	}
	if ep.TargetRef != nil {
		n += len(ep.TargetRef.Namespace) + 1 + len(ep.TargetRef.Name)
	}
	b.Grow(n)
	for _, a := range addrs {
		b.WriteString(a)
		b.WriteByte(',')
	}
	b.WriteByte('|')
	b.WriteString(ptr.Deref(ep.Hostname, ""))
	b.WriteByte('|')
	if ep.TargetRef != nil {
		b.WriteString(ep.TargetRef.Namespace)
		b.WriteByte('/')
		b.WriteString(ep.TargetRef.Name)
	}
	return b.String()
}

// groupDesired merges groups with equal keys and indexes their endpoints.
// The result is ordered by address type and port key.
func groupDesired(desired []EndpointGroup) []*group {
	// Each group's index sized once (a Service of 50,000 endpoints in 500
	// slices grew it a dozen times).
	keys := make([]string, len(desired))
	sizes := map[string]int{}
	for i := range desired {
		keys[i] = groupKey(desired[i].AddressType, desired[i].Ports)
		sizes[keys[i]] += len(desired[i].Endpoints)
	}
	byKey := map[string]*group{}
	var groups []*group
	for i := range desired {
		d := &desired[i]
		key := keys[i]
		g, ok := byKey[key]
		if !ok {
			g = &group{addressType: d.AddressType, portKey: key[len(d.AddressType)+1:], ports: d.Ports,
				byID: make(map[string]*discoveryv1.Endpoint, sizes[key]), order: make([]string, 0, sizes[key])}
			byKey[key] = g
			groups = append(groups, g)
		}
		for j := range d.Endpoints {
			ep := &d.Endpoints[j]
			id := endpointID(ep)
			have, seen := g.byID[id]
			if !seen {
				g.order = append(g.order, id)
			} else {
				g.duplicates = true
			}
			if !seen || availability(ep) > availability(have) {
				g.byID[id] = ep
			}
		}
	}
	for _, g := range groups {
		slices.Sort(g.order)
	}
	slices.SortFunc(groups, byTypeAndPorts)
	return groups
}

// byTypeAndPorts orders groups by address type, then port key.
func byTypeAndPorts(a, b *group) int {
	return cmp.Or(cmp.Compare(a.addressType, b.addressType), cmp.Compare(a.portKey, b.portKey))
}

// availability ranks an endpoint's conditions: ready beats serving beats
// neither, and not terminating beats terminating.
func availability(ep *discoveryv1.Endpoint) int {
	rank := 0
	if ptr.Deref(ep.Conditions.Ready, false) {
		rank += 4
	}
	if ptr.Deref(ep.Conditions.Serving, false) {
		rank += 2
	}
	if !ptr.Deref(ep.Conditions.Terminating, false) {
		rank++
	}
	return rank
}

// GroupSlices turns EndpointSlices (a Service's, read from another
// cluster, say) into the EndpointGroups they hold: one per address type and
// port set, each endpoint once (see EndpointGroup for which of duplicates
// wins; slices are read in name order), deep-copied. The result is
// canonical: groups ordered by address type and port set, endpoints by
// identity, so the same slices in any order give equal groups.
func GroupSlices(items []discoveryv1.EndpointSlice) []EndpointGroup {
	byName := make([]*discoveryv1.EndpointSlice, len(items))
	for i := range items {
		byName[i] = &items[i]
	}
	slices.SortFunc(byName, func(a, b *discoveryv1.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) })
	perSlice := make([]EndpointGroup, len(byName))
	for i, s := range byName {
		perSlice[i] = EndpointGroup{AddressType: s.AddressType, Ports: s.Ports, Endpoints: s.Endpoints}
	}
	grouped := groupDesired(perSlice)
	out := make([]EndpointGroup, 0, len(grouped))
	for _, g := range grouped {
		eg := EndpointGroup{AddressType: g.addressType, Ports: clonePorts(g.ports), Endpoints: make([]discoveryv1.Endpoint, len(g.order))}
		for i, id := range g.order {
			g.byID[id].DeepCopyInto(&eg.Endpoints[i])
		}
		out = append(out, eg)
	}
	return out
}

// EndpointEqual reports whether two endpoints carry the same, as the
// reconciler compares them before it rewrites a slice: everything but
// their targetRef's resourceVersion (a Pod's every change moves it, and
// nothing routes by it). For callers that keep endpoints elsewhere (in
// objects of their own) and must tell whether one changed, without
// reflection.
func EndpointEqual(a, b *discoveryv1.Endpoint) bool { return endpointEqual(a, b, true) }

// EndpointIdentical reports whether two endpoints hold the same, to the
// last field: a Pod's resourceVersion in the targetRef included, and nil
// told apart from empty. A SliceGrouper keeps the entry of its last result
// for each endpoint of a rewritten slice that is identical to it, so that
// the next result shares it (what Unmoved and incremental plans look for);
// a cache may put a shared entry in place of an identical one.
func EndpointIdentical(a, b *discoveryv1.Endpoint) bool {
	return endpointEqual(a, b, true) &&
		(a.Addresses == nil) == (b.Addresses == nil) &&
		(a.Hints == nil) == (b.Hints == nil) &&
		(a.DeprecatedTopology == nil) == (b.DeprecatedTopology == nil) &&
		(a.TargetRef == nil) == (b.TargetRef == nil) &&
		(a.TargetRef == nil || *a.TargetRef == *b.TargetRef)
}

// endpointEqual reports whether two endpoints with the same identity need
// no update: same addresses (in order), conditions (nil differs from
// false), hostname, node, zone, targetRef (ignoring its resourceVersion)
// and, withHints, hints.
func endpointEqual(a, b *discoveryv1.Endpoint, withHints bool) bool {
	return slices.Equal(a.Addresses, b.Addresses) &&
		ptr.Equal(a.Conditions.Ready, b.Conditions.Ready) &&
		ptr.Equal(a.Conditions.Serving, b.Conditions.Serving) &&
		ptr.Equal(a.Conditions.Terminating, b.Conditions.Terminating) &&
		ptr.Equal(a.Hostname, b.Hostname) &&
		ptr.Equal(a.NodeName, b.NodeName) &&
		ptr.Equal(a.Zone, b.Zone) &&
		(!withHints || hintsEqual(a.Hints, b.Hints)) &&
		targetRefKey(a) == targetRefKey(b) &&
		maps.Equal(a.DeprecatedTopology, b.DeprecatedTopology)
}

func hintsEqual(a, b *discoveryv1.EndpointHints) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a.ForZones, b.ForZones) && slices.Equal(a.ForNodes, b.ForNodes)
}

// targetRefKey returns a comparable form of the endpoint's targetRef
// without its resourceVersion.
func targetRefKey(ep *discoveryv1.Endpoint) [7]string {
	if ep.TargetRef == nil {
		return [7]string{"nil"}
	}
	r := ep.TargetRef
	return [7]string{r.Kind, r.Namespace, r.Name, string(r.UID), r.APIVersion, r.FieldPath, "set"}
}
