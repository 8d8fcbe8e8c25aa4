package publish

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// A publication in parts is a head (the exported spec, no endpoints) and
// parts of at most PublisherOptions.MaxEndpointsPerPart endpoints each
// (an export that fits in one part is its head alone, holding its
// endpoints: wholeFits), all PublishedExports in the same namespace, of
// the same source cluster: so one watch, selected by the source-cluster
// label, reads both, in the order they were written, and the hub's
// admission policy binds a part to its writer as it binds a head. A
// change of one endpoint rewrites the one part that holds it, as the
// EndpointSlice controller rewrites one slice.
//
// The publisher writes a new export's parts before its head, a changed
// export's additions before its removals, and deletes a withdrawn export's
// head before its parts; a reader imports a head's endpoints with those of
// every part it holds of the head's export, each endpoint once. So a
// reader never imports half of what was published: parts without a head
// are held, and an endpoint moved between parts is in one of them at every
// moment.
//
// A head names its parts (spec.parts). A part that its head names and that
// someone else deletes (a hub's administrator) keeps, in every reader,
// what it held until its publisher has written it again after every
// other part that took its endpoints, or has rewritten the head without
// it: so it takes no endpoint away, however long its publisher takes.
// Creating or removing a part rewrites the head (once per part's worth of
// endpoints); changing one does not.
//
// The trigger time of a change travels with the parts written for it: a
// part written carries the export's last-change-trigger-time, a reader
// takes the newest of its head's and its parts', and a head is not
// rewritten for its trigger time alone unless no part carries the change
// (one that only empties parts). So a change of one endpoint stays one
// write, and the imported slices that it changes carry its time.

// ServiceNamespaceLabel names the exported Service's namespace on its
// head and parts (the source-cluster label and the MCS service-name label
// name the rest): with them one label selector lists an export's parts.
const ServiceNamespaceLabel = "mcs-syncer.io/service-namespace"

// PartName is the name of part of cluster's publication of key:
// <head>.part.<part>. A head's name has three or four labels (a cluster
// ID has one or two), a part's five or six: so no member's part takes the
// name of another member's head (with one label after the head's name,
// east's part "web" of fleet-a/own would be named as member
// east.fleet-a's head of own/web), and the admission policy binds each
// name to one writer.
func PartName(cluster clusterset.ClusterID, key types.NamespacedName, part string) string {
	return ObjectName(cluster, key) + ".part." + part
}

// IsPart reports whether p is a part of a publication.
func IsPart(p *v1alpha1.PublishedExport) bool { return p.Spec.Part != "" }

// publicationLabels are the labels of cluster's head and parts of key.
func publicationLabels(cluster clusterset.ClusterID, key types.NamespacedName) map[string]string {
	return map[string]string{
		mcsv1beta1.LabelSourceCluster: string(cluster),
		mcsv1beta1.LabelServiceName:   key.Name,
		ServiceNamespaceLabel:         key.Namespace,
	}
}

// encodePart returns part of cluster's publication of key holding groups.
func encodePart(cluster clusterset.ClusterID, key types.NamespacedName, namespace, part string, groups []v1alpha1.EndpointGroup) *v1alpha1.PublishedExport {
	return &v1alpha1.PublishedExport{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "PublishedExport"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: PartName(cluster, key, part),
			Labels: publicationLabels(cluster, key),
		},
		Spec: v1alpha1.PublishedExportSpec{Cluster: string(cluster), Namespace: key.Namespace, Name: key.Name, Part: part, Endpoints: groups},
	}
}

// EncodeParts returns es as a publisher first publishes it in parts into
// namespace: its head and parts of at most max endpoints each (a load
// generator writes what a member would): an export that fits in one part
// is one object, its endpoints in its head (wholeFits).
func EncodeParts(es *clusterset.ExportedService, namespace string, max int) (head *v1alpha1.PublishedExport, parts []*v1alpha1.PublishedExport) {
	if wholeFits(es.EndpointCount(), 0, max) {
		return Encode(es, namespace), nil
	}
	plan := planParts(es.Cluster, es.Key, namespace, formatTriggerTime(es.LastChangeTriggerTime), es.Endpoints, nil, max)
	head = EncodeHead(es, namespace)
	head.Spec.Parts = plan.ids
	return head, plan.create
}

// wholeFits reports whether an export of n endpoints, published in
// partsNow parts, is published whole: one object, its endpoints in its
// head, as a part of it would be. An export that fits in one part gains
// nothing from a head of its own (a change writes one object either way),
// and every object costs each reader its metadata, decoded and held: at
// 255 members of 10-endpoint exports, the second object of each export
// took a fifth of an importer's RSS (issue 56). An export that
// had to be split goes back to whole only at half a part, so one that
// grows and shrinks around a part's size is not rewritten from one form
// to the other with every endpoint.
func wholeFits(n, partsNow, max int) bool {
	return n <= max && (partsNow == 0 || n <= max/2)
}

// Part is a part of a publication as a reader takes it.
type Part struct {
	Cluster clusterset.ClusterID
	Key     types.NamespacedName
	// Endpoints are the part's; they share p's slices.
	Endpoints []reconciler.EndpointGroup
	// LastChangeTriggerTime is that of the change the part was last
	// written for (zero if none was known).
	LastChangeTriggerTime time.Time
	// bytes are what a Reader counts it as (heldBytes).
	bytes int64
}

// DecodePart checks a part read from a publication server as Decode checks
// a head: another cluster's input.
func DecodePart(p *v1alpha1.PublishedExport) (*Part, error) {
	s := &p.Spec
	cluster, err := sourceCluster(p)
	if err != nil {
		return nil, err
	}
	for field, v := range map[string]string{"spec.namespace": s.Namespace, "spec.name": s.Name, "spec.part": s.Part} {
		if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
			return nil, fmt.Errorf("%s %q: %s", field, v, strings.Join(errs, "; "))
		}
	}
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	if want := PartName(cluster, key, s.Part); p.Name != want {
		return nil, fmt.Errorf("name %q: part %s of the publication of %s from %s is named %q", p.Name, s.Part, key, cluster, want)
	}
	if s.Type != "" || len(s.Ports) > 0 || s.RenewTime != nil || s.ReadsParts || len(s.Parts) > 0 {
		return nil, fmt.Errorf("part %s carries fields of a head or a marker", s.Part)
	}
	if err := checkEndpoints(s.Endpoints); err != nil {
		return nil, err
	}
	part := &Part{Cluster: cluster, Key: key, Endpoints: decodedGroups(s.Endpoints)}
	if part.LastChangeTriggerTime, err = parseTriggerTime(s.LastChangeTriggerTime); err != nil {
		return nil, err
	}
	return part, nil
}

// partPlan is what makes an export's parts hold its endpoints: parts to
// create, to update, then (after the head is written) to delete; ids are
// the parts' IDs once it is done, in order (the head's spec.parts).
type partPlan struct {
	create, update, remove []*v1alpha1.PublishedExport
	ids                    []string
}

func (p *partPlan) empty() bool { return len(p.create)+len(p.update)+len(p.remove) == 0 }

// groupKey is an endpoint group's address type and ports as a string.
func groupKey(g *v1alpha1.EndpointGroup) string {
	var b strings.Builder
	b.WriteString(string(g.AddressType))
	for _, p := range g.Ports {
		b.WriteByte('|')
		if p.Name != nil {
			b.WriteString(*p.Name)
		}
		b.WriteByte('/')
		if p.Protocol != nil {
			b.WriteString(string(*p.Protocol))
		}
		b.WriteByte('/')
		if p.Port != nil {
			b.WriteString(strconv.Itoa(int(*p.Port)))
		}
		b.WriteByte('/')
		if p.AppProtocol != nil {
			b.WriteString(*p.AppProtocol)
		}
	}
	return b.String()
}

func firstAddress(e *discoveryv1.Endpoint) string {
	if len(e.Addresses) == 0 {
		return ""
	}
	return e.Addresses[0]
}

// planParts returns what makes existing (cluster's parts of key in
// namespace, in any order) hold the endpoints of want, at most max in a
// part, each part of one group. An endpoint stays in the part that holds
// it (updated there if it changed); an endpoint not held goes into a part
// of its group with room, else into a new part; a part left empty, or of
// a group no longer wanted, is removed. So a change of one endpoint
// rewrites one part, and no endpoint moves while it is held. Each part
// created or updated carries trigger (the export's trigger time); a part
// is not rewritten for its trigger time alone.
func planParts(cluster clusterset.ClusterID, key types.NamespacedName, namespace, trigger string, want []reconciler.EndpointGroup, existing []*v1alpha1.PublishedExport, max int) partPlan {
	pp := newPartPlanner(cluster, key, namespace, want, max)
	existing = slices.Clone(existing)
	slices.SortFunc(existing, func(a, b *v1alpha1.PublishedExport) int { return strings.Compare(a.Name, b.Name) })
	pp.keepAll(existing)
	pp.finish(trigger)
	return pp.plan
}

// keepAll plans the existing parts, in name order, then places what none
// of them holds.
func (pp *partPlanner) keepAll(existing []*v1alpha1.PublishedExport) {
	for _, old := range existing {
		pp.keep(old)
	}
	pp.placeLeft()
}

// finish gives the parts written the trigger time and lists the parts'
// IDs once the plan is done.
func (pp *partPlanner) finish(trigger string) {
	pp.stamp(trigger)
	pp.listIDs()
}

// stamp gives the parts written the trigger time.
func (pp *partPlanner) stamp(trigger string) {
	for _, part := range append(slices.Clip(pp.plan.create), pp.plan.update...) {
		part.Spec.LastChangeTriggerTime = trigger
	}
}

// listIDs lists the IDs of the parts kept and created, in order.
func (pp *partPlanner) listIDs() {
	for _, parts := range pp.kept {
		for _, part := range parts {
			pp.plan.ids = append(pp.plan.ids, part.Spec.Part)
		}
	}
	for _, part := range pp.plan.create {
		pp.plan.ids = append(pp.plan.ids, part.Spec.Part)
	}
	slices.SortFunc(pp.plan.ids, comparePartIDs)
}

// comparePartIDs orders part IDs (decimal numbers, as newID makes them)
// by their number.
func comparePartIDs(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// partPlanner is planParts' state while it places the endpoints.
type partPlanner struct {
	cluster   clusterset.ClusterID
	key       types.NamespacedName
	namespace string
	max       int
	// groups are the groups to publish, in want's order; group finds one
	// by its key (groupKey).
	groups []*reconciler.EndpointGroup
	group  map[string]int
	// slots are the endpoints to publish, in want's order, each once;
	// slot finds one by its group and first address.
	slots []slot
	slot  map[slotKey]int
	// used are the part IDs taken, and taken (when set) more of them:
	// those of parts a partMemo keeps unread. kept are the parts that
	// stay, by group index: they take new endpoints; updating those
	// already in plan.update.
	used     map[string]bool
	taken    map[string]bool
	nextID   int
	kept     [][]*v1alpha1.PublishedExport
	updating map[*v1alpha1.PublishedExport]bool
	plan     partPlan
	// duplicates says that want listed a first address twice in a group.
	duplicates bool
}

// slotKey is how the planner knows an endpoint across parts: its group
// (an index into partPlanner.groups) and its first address, the one an
// EndpointSlice controller keys it by.
type slotKey struct {
	group   int
	address string
}

// slot is an endpoint to publish: of which group, and whether a part
// holds it in the plan yet.
type slot struct {
	endpoint *discoveryv1.Endpoint
	group    int
	placed   bool
}

func newPartPlanner(cluster clusterset.ClusterID, key types.NamespacedName, namespace string, want []reconciler.EndpointGroup, max int) *partPlanner {
	n := 0
	for i := range want {
		n += len(want[i].Endpoints)
	}
	pp := &partPlanner{cluster: cluster, key: key, namespace: namespace, max: max,
		group: map[string]int{}, slots: make([]slot, 0, n), slot: make(map[slotKey]int, n),
		used: map[string]bool{}, updating: map[*v1alpha1.PublishedExport]bool{}}
	for i := range want {
		g := &want[i]
		gk := groupKey((*v1alpha1.EndpointGroup)(g))
		gi, ok := pp.group[gk]
		if !ok {
			gi = len(pp.groups)
			pp.group[gk] = gi
			pp.groups = append(pp.groups, g)
		}
		for j := range g.Endpoints {
			k := slotKey{gi, firstAddress(&g.Endpoints[j])}
			if _, dup := pp.slot[k]; !dup {
				pp.slot[k] = len(pp.slots)
				pp.slots = append(pp.slots, slot{endpoint: &g.Endpoints[j], group: gi})
			} else {
				pp.duplicates = true
			}
		}
	}
	return pp
}

// wanted returns the slot of the endpoint of group gi whose first address
// is e's, nil if none is wanted.
func (pp *partPlanner) wanted(gi int, e *discoveryv1.Endpoint) *slot {
	if i, ok := pp.slot[slotKey{gi, firstAddress(e)}]; ok {
		return &pp.slots[i]
	}
	return nil
}

// keep plans an existing part: it keeps the wanted endpoints it holds
// (updated if any changed), or is removed when it holds none or is of a
// group no longer wanted. A part whose endpoints are all wanted as they
// are is kept as it is, its endpoints shared, not copied: a change of one
// endpoint compares every part, and rewrites one.
func (pp *partPlanner) keep(old *v1alpha1.PublishedExport) (next *v1alpha1.PublishedExport) {
	gi := -1
	if len(old.Spec.Endpoints) == 1 {
		if i, ok := pp.group[groupKey(&old.Spec.Endpoints[0])]; ok {
			gi = i
		}
	}
	return pp.keepIn(old, gi)
}

// keepIn is keep of a part whose group's index is known to be gi (-1: it
// holds not exactly one group, or one no longer wanted), as a partMemo
// knows it from its last reading, without building the group's key.
func (pp *partPlanner) keepIn(old *v1alpha1.PublishedExport, gi int) (next *v1alpha1.PublishedExport) {
	pp.used[old.Spec.Part] = true
	if gi < 0 {
		pp.plan.remove = append(pp.plan.remove, old)
		return nil
	}
	g := &old.Spec.Endpoints[0]
	if next := pp.keepAsItIs(old, gi); next != nil {
		return next
	}
	// Sized for what it held: grown by appends, it was a third of a
	// change's allocated bytes.
	eps := make([]discoveryv1.Endpoint, 0, min(len(g.Endpoints), pp.max))
	for j := range g.Endpoints {
		if s := pp.wanted(gi, &g.Endpoints[j]); s != nil && !s.placed && len(eps) < pp.max {
			s.placed = true
			eps = append(eps, *s.endpoint)
		}
	}
	if len(eps) == 0 {
		pp.plan.remove = append(pp.plan.remove, old)
		return nil
	}
	next = pp.successor(old, []v1alpha1.EndpointGroup{{AddressType: g.AddressType, Ports: pp.groups[gi].Ports, Endpoints: eps}})
	pp.addKept(gi, next)
	if !partEqual(next, old) {
		pp.plan.update = append(pp.plan.update, next)
		pp.updating[next] = true
	}
	return next
}

// partEqual reports whether part next, as planned, holds what old does:
// its endpoints compared as keepAsItIs compares them
// (reconciler.EndpointEqual: by type, not by reflection, which made the
// comparison of one part of 100 endpoints cost more allocations than the
// rest of a change's plan), everything else as the API server would.
func partEqual(next, old *v1alpha1.PublishedExport) bool {
	a, b := next.Spec, old.Spec
	if len(a.Endpoints) != len(b.Endpoints) || !maps.Equal(next.Labels, old.Labels) {
		return false
	}
	for i := range a.Endpoints {
		ga, gb := &a.Endpoints[i], &b.Endpoints[i]
		if ga.AddressType != gb.AddressType || !reconciler.PortsEqual(ga.Ports, gb.Ports) ||
			!slices.EqualFunc(ga.Endpoints, gb.Endpoints, func(x, y discoveryv1.Endpoint) bool { return reconciler.EndpointEqual(&x, &y) }) {
			return false
		}
	}
	a.Endpoints, b.Endpoints = nil, nil
	return equality.Semantic.DeepEqual(a, b)
}

// keepAsItIs keeps old, of group gi, unchanged if it holds only wanted
// endpoints, each as wanted, placed nowhere else, and its labels are
// current; it returns its successor if it did, else nil.
func (pp *partPlanner) keepAsItIs(old *v1alpha1.PublishedExport, gi int) *v1alpha1.PublishedExport {
	g := &old.Spec.Endpoints[0]
	if len(g.Endpoints) > pp.max || !maps.Equal(old.Labels, publicationLabels(pp.cluster, pp.key)) {
		return nil
	}
	for j := range g.Endpoints {
		if s := pp.wanted(gi, &g.Endpoints[j]); s == nil || s.placed || !reconciler.EndpointEqual(s.endpoint, &g.Endpoints[j]) {
			return nil
		}
	}
	for j := range g.Endpoints {
		pp.wanted(gi, &g.Endpoints[j]).placed = true
	}
	// Clipped: endpoints placed into it later are appended to a copy, never
	// into the array the cache holds.
	next := pp.successor(old, []v1alpha1.EndpointGroup{{AddressType: g.AddressType, Ports: g.Ports, Endpoints: slices.Clip(g.Endpoints)}})
	pp.addKept(gi, next)
	return next
}

// successor is old as planned: holding groups, with old's ID, version and
// trigger time.
func (pp *partPlanner) successor(old *v1alpha1.PublishedExport, groups []v1alpha1.EndpointGroup) *v1alpha1.PublishedExport {
	next := encodePart(pp.cluster, pp.key, pp.namespace, old.Spec.Part, groups)
	next.ResourceVersion, next.UID = old.ResourceVersion, old.UID
	next.Spec.LastChangeTriggerTime = old.Spec.LastChangeTriggerTime
	return next
}

// placeLeft puts the endpoints that no kept part holds into the kept
// parts of their group with room, then into new parts, group by group.
func (pp *partPlanner) placeLeft() {
	left := make([][]discoveryv1.Endpoint, len(pp.groups))
	for i := range pp.slots {
		if s := &pp.slots[i]; !s.placed {
			s.placed = true
			left[s.group] = append(left[s.group], *s.endpoint)
		}
	}
	for gi := range pp.groups {
		pp.placeLeftOf(gi, left[gi])
	}
}

// placeLeftOf puts left, endpoints of group gi, into its kept parts with
// room, then into new parts.
func (pp *partPlanner) placeLeftOf(gi int, left []discoveryv1.Endpoint) {
	for _, part := range pp.keptOf(gi) {
		if len(left) == 0 {
			break
		}
		pg := &part.Spec.Endpoints[0]
		room := pp.max - len(pg.Endpoints)
		if room <= 0 {
			continue
		}
		n := min(room, len(left))
		pg.Endpoints = append(pg.Endpoints, left[:n]...)
		left = left[n:]
		if !pp.updating[part] {
			pp.plan.update = append(pp.plan.update, part)
			pp.updating[part] = true
		}
	}
	g := pp.groups[gi]
	for len(left) > 0 {
		n := min(pp.max, len(left))
		pp.plan.create = append(pp.plan.create, encodePart(pp.cluster, pp.key, pp.namespace, pp.newID(),
			[]v1alpha1.EndpointGroup{{AddressType: g.AddressType, Ports: g.Ports, Endpoints: left[:n:n]}}))
		left = left[n:]
	}
}

// addKept adds next to the parts kept of group gi.
func (pp *partPlanner) addKept(gi int, next *v1alpha1.PublishedExport) {
	for len(pp.kept) <= gi {
		pp.kept = append(pp.kept, nil)
	}
	pp.kept[gi] = append(pp.kept[gi], next)
}

// keptOf returns the parts kept of group gi.
func (pp *partPlanner) keptOf(gi int) []*v1alpha1.PublishedExport {
	if gi < len(pp.kept) {
		return pp.kept[gi]
	}
	return nil
}

// newID returns the lowest part ID not taken.
func (pp *partPlanner) newID() string {
	for pp.used[strconv.Itoa(pp.nextID)] || pp.taken[strconv.Itoa(pp.nextID)] {
		pp.nextID++
	}
	pp.used[strconv.Itoa(pp.nextID)] = true
	return strconv.Itoa(pp.nextID)
}
