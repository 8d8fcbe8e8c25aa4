package reconciler

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Plan is what one reconcile of one owner writes: computed by
// Reconciler.Plan without touching the API, applied by Reconciler.Apply. A
// caller may inspect it, or decorate the slices in it (an extra annotation,
// say) before applying.
//
// Create holds new slices (named by generateName), Update holds modified
// copies of existing slices (with their resourceVersion, so a concurrent
// change makes the update fail rather than be lost), Delete holds existing
// slices. The slices of Existing are never modified.
type Plan struct {
	Create []*discoveryv1.EndpointSlice
	Update []*discoveryv1.EndpointSlice
	Delete []*discoveryv1.EndpointSlice

	owner Owner
	// added and removed count endpoints placed into and dropped from slices.
	added, removed int
	// figures are the owner's share of the gauges once the plan is applied.
	figures ownerFigures
	// completedDeletions are tracker records that Apply drops.
	completedDeletions []string
}

// Empty reports whether the plan writes nothing.
func (p *Plan) Empty() bool {
	return len(p.Create) == 0 && len(p.Update) == 0 && len(p.Delete) == 0
}

// String summarizes the plan for logs.
func (p *Plan) String() string {
	return fmt.Sprintf("create %d, update %d, delete %d EndpointSlices (+%d/-%d endpoints)",
		len(p.Create), len(p.Update), len(p.Delete), p.added, p.removed)
}

// Plan computes the writes that make the owner's slices hold exactly the
// desired endpoints, with as few writes as possible. It writes nothing and
// changes no state but its memo (WithIncrementalPlans; the tracker is only
// read): the same input and tracker give the same plan. A plan that fails is counted in syncs_total (result
// error or stale); Apply counts the others.
//
// Per address type and port set: existing slices keep the endpoints still
// desired (taking their desired version) and drop the rest; endpoints still
// to place go first into slices already being updated, fullest first; then
// full slices are created; a remainder smaller than a slice goes into the
// unchanged slice it fills closest to full, or into a new slice. Slices of
// port sets or address types no longer desired are deleted, and a slice to
// delete and a slice to create of the same address type become one update
// of the old slice. Hints, when the reconciler manages them, are set last,
// in one pass over the finished plan.
func (r *Reconciler) Plan(in Input) (*Plan, error) {
	plan, err := r.plan(in)
	switch {
	case errors.Is(err, ErrStaleCache):
		r.metrics.syncs.WithLabelValues(syncResultStale).Inc()
	case err != nil:
		r.metrics.syncs.WithLabelValues(syncResultError).Inc()
	}
	return plan, err
}

func (r *Reconciler) plan(in Input) (*Plan, error) {
	if err := r.validate(in); err != nil {
		return nil, err
	}
	m := r.memos.of(r, in)
	owned, foreign, err := r.existing(in, m)
	if err != nil {
		return nil, err
	}

	labels, annotations := r.metadata(in)
	b := &planner{r: r, in: in, labels: labels, annotations: annotations, plan: &Plan{owner: in.Owner}}
	b.plan.completedDeletions = r.tracker.completedDeletions(in.Owner.GetUID(), owned)
	key := keyOf(in, labels, annotations)
	var groups []*group
	if m != nil && m.update(in, owned, key) {
		b.memo = m
		r.memos.incremental.Add(1)
		groups = m.groupsFor(in.Desired)
	} else {
		groups = groupDesired(in.Desired)
		if m != nil {
			b.read = map[*discoveryv1.EndpointSlice][]string{}
		}
	}
	for _, addressType := range sortedAddressTypes(in.AddressTypes) {
		t := &typePlan{addressType: addressType, existing: make([]*discoveryv1.EndpointSlice, 0, len(owned))}
		for _, s := range owned {
			if s.AddressType == addressType {
				t.existing = append(t.existing, s)
			}
		}
		for _, g := range groups {
			if g.addressType == addressType {
				t.groups = append(t.groups, g)
			}
		}
		b.addressType(t)
	}
	// Slices of address types the owner no longer supports, and (with
	// ownership enforced) slices of other owners, go.
	for _, s := range owned {
		if !slices.Contains(in.AddressTypes, s.AddressType) {
			b.remove(s)
		}
	}
	b.plan.Delete = append(b.plan.Delete, foreign...)
	b.reconcileHints()
	switch {
	case b.memo != nil:
		m.settle(b.unchanged)
	case m != nil:
		m.rebuild(in, owned, key, groups, b.read, b.unchanged)
	}
	return b.plan, nil
}

func (r *Reconciler) validate(in Input) error {
	if in.Owner == nil || reflect.ValueOf(in.Owner).Kind() == reflect.Pointer && reflect.ValueOf(in.Owner).IsNil() {
		return fmt.Errorf("reconciler: no owner")
	}
	if in.OwnerGVK.Kind == "" || in.OwnerGVK.Version == "" {
		return fmt.Errorf("reconciler: owner %s/%s: OwnerGVK %q lacks version or kind", in.Owner.GetNamespace(), in.Owner.GetName(), in.OwnerGVK)
	}
	supported := map[discoveryv1.AddressType]bool{}
	for _, t := range in.AddressTypes {
		switch t {
		case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN:
			supported[t] = true
		default:
			return fmt.Errorf("reconciler: unknown address type %q", t)
		}
	}
	for _, g := range in.Desired {
		if !supported[g.AddressType] && len(g.Endpoints) > 0 {
			return fmt.Errorf("reconciler: desired endpoints of address type %q, which is not among the supported %v", g.AddressType, in.AddressTypes)
		}
	}
	return nil
}

// existing returns the existing slices this reconciler manages, in name
// order (partition), after checking that they are not older than what it
// wrote (Tracker.Stale).
func (r *Reconciler) existing(in Input, m *memo) (owned, foreign []*discoveryv1.EndpointSlice, err error) {
	owned, foreign = r.partition(in)
	if m == nil || !m.inOrder(owned) {
		sortByName(owned)
	}
	sortByName(foreign)
	if err := r.tracker.Stale(in.Owner.GetUID(), owned); err != nil {
		return nil, nil, fmt.Errorf("%s %s/%s: %w", in.OwnerGVK.Kind, in.Owner.GetNamespace(), in.Owner.GetName(), err)
	}
	return owned, foreign, nil
}

// partition picks the existing slices this reconciler manages and splits
// off those that belong to another owner when ownership is enforced.
// Slices of other managers are left out altogether.
func (r *Reconciler) partition(in Input) (owned, foreign []*discoveryv1.EndpointSlice) {
	owned = make([]*discoveryv1.EndpointSlice, 0, len(in.Existing))
	for _, s := range in.Existing {
		if s.Labels[discoveryv1.LabelManagedBy] != r.managedBy {
			continue
		}
		if r.enforceOwnership && ownerOf(s) != in.Owner.GetUID() {
			foreign = append(foreign, s)
			continue
		}
		owned = append(owned, s)
	}
	return owned, foreign
}

// sortByName sorts slices by name: a plan reads the existing slices in
// that order, whatever order they were listed in, so that the same input
// makes the same plan.
func sortByName(list []*discoveryv1.EndpointSlice) {
	slices.SortFunc(list, func(a, b *discoveryv1.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) })
}

// metadata returns the labels every slice of the owner must have, and the
// annotations it must carry (others' annotations are kept).
func (r *Reconciler) metadata(in Input) (map[string]string, map[string]string) {
	var labels, annotations map[string]string
	if in.Labeler != nil {
		labels, annotations = in.Labeler.SliceMetadata()
	}
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	out[discoveryv1.LabelManagedBy] = r.managedBy
	return out, annotations
}

func sortedAddressTypes(types []discoveryv1.AddressType) []discoveryv1.AddressType {
	out := slices.Clone(types)
	slices.Sort(out)
	return slices.Compact(out)
}

// planner builds one Plan.
type planner struct {
	r                   *Reconciler
	in                  Input
	labels, annotations map[string]string
	plan                *Plan
	// unchanged are the existing slices the plan does not write (yet: hints
	// may still need an update).
	unchanged []*pending
	// memo, when set, is what the owner's last plan read: the plan reads
	// only what moved since (memo.go).
	memo *memo
	// read, when set, collects the identities of the existing slices'
	// endpoints, to remember them.
	read map[*discoveryv1.EndpointSlice][]string
}

// pending is an existing slice being planned: a copy, made on the first
// change, so the caller's object is never modified.
type pending struct {
	orig    *discoveryv1.EndpointSlice
	slice   *discoveryv1.EndpointSlice
	portKey string
	changed bool
	// carried says that the last plan's verdict on the slice holds: it is
	// unchanged, hints included (memo.go).
	carried bool
}

func (p *pending) mutable() *discoveryv1.EndpointSlice {
	if p.slice == p.orig {
		p.slice = p.orig.DeepCopy()
	}
	return p.slice
}

// withEndpoints is mutable with its endpoints replaced by eps: the
// slice's own endpoints are not copied first (they were, and thrown away
// at once: half the copying of a changed slice).
func (p *pending) withEndpoints(eps []discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	if p.slice == p.orig {
		p.slice = copyWithoutEndpoints(p.orig)
	}
	p.slice.Endpoints = eps
	return p.slice
}

// copyWithoutEndpoints is a deep copy of s but for its endpoints (nil).
func copyWithoutEndpoints(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	shallow := *s
	shallow.Endpoints = nil
	return shallow.DeepCopy()
}

// appendCopy appends a deep copy of e to eps, copied in place (a copy
// made apart and then appended was one allocation more per endpoint).
func appendCopy(eps []discoveryv1.Endpoint, e *discoveryv1.Endpoint) []discoveryv1.Endpoint {
	eps = append(eps, discoveryv1.Endpoint{})
	e.DeepCopyInto(&eps[len(eps)-1])
	return eps
}

// typePlan is the planning of one address type.
type typePlan struct {
	addressType discoveryv1.AddressType
	groups      []*group
	existing    []*discoveryv1.EndpointSlice

	byPortKey map[string][]*pending
	creates   []*discoveryv1.EndpointSlice
	deletes   []*discoveryv1.EndpointSlice
	updates   []*pending
	unchanged []*pending
}

// addressType plans the slices of one address type, in the phases that
// Plan's comment describes.
func (b *planner) addressType(t *typePlan) {
	b.sortExisting(t)
	for _, g := range t.groups {
		b.plan.figures.endpoints += g.size()
		b.plan.figures.desiredSlices += (g.size() + b.r.maxEndpointsPerSlice - 1) / b.r.maxEndpointsPerSlice
		toPlace := b.keepStillDesired(t, g)
		b.plan.added += len(toPlace)
		toPlace = b.fillUpdates(t, g, toPlace)
		b.placeRest(t, g, toPlace)
	}
	b.placeholder(t)
	recycle(t)
	for _, p := range t.updates {
		b.setMetadata(p.mutable())
	}

	b.plan.figures.slices += len(t.existing) - len(t.deletes) + len(t.creates)
	b.plan.Create = append(b.plan.Create, t.creates...)
	for _, p := range t.updates {
		b.plan.Update = append(b.plan.Update, p.slice)
	}
	b.plan.Delete = append(b.plan.Delete, t.deletes...)
	b.unchanged = append(b.unchanged, t.unchanged...)
}

// sortExisting sorts the existing slices by port set; those of port sets
// no longer desired are deleted.
func (b *planner) sortExisting(t *typePlan) {
	t.byPortKey = map[string][]*pending{}
	wanted := map[string]bool{}
	for _, g := range t.groups {
		wanted[g.portKey] = true
	}
	var lastPorts []discoveryv1.EndpointPort
	lastKey := ""
	// One block for all: a slice each was 500 allocations of a 50,000
	// endpoints' plan.
	pendings := make([]pending, len(t.existing))
	for i, s := range t.existing {
		// Slices of one port set list the same ports, mostly in the same
		// order: the key of the last one is taken without making it anew.
		if i == 0 || !PortsEqual(s.Ports, lastPorts) {
			lastPorts, lastKey = s.Ports, portKey(s.Ports)
		}
		pk := lastKey
		if !wanted[pk] {
			t.deletes = append(t.deletes, s)
			b.plan.removed += len(s.Endpoints)
			continue
		}
		pendings[i] = pending{orig: s, slice: s, portKey: pk}
		t.byPortKey[pk] = append(t.byPortKey[pk], &pendings[i])
	}
}

// keepStillDesired lets each existing slice of g's port set keep the
// endpoints still desired, and returns the desired endpoints no slice
// holds.
func (b *planner) keepStillDesired(t *typePlan, g *group) []*discoveryv1.Endpoint {
	placed := make(map[string]bool, len(g.order))
	for _, p := range t.byPortKey[g.portKey] {
		var ids []string
		if b.memo != nil {
			ids, p.carried = b.memo.carriedOver(p.orig)
		}
		if p.carried {
			if t.unchanged == nil { // most are carried over: room for all
				t.unchanged = make([]*pending, 0, len(t.byPortKey[g.portKey]))
			}
			t.unchanged = append(t.unchanged, p)
			continue
		}
		b.keepDesired(p, g, ids, placed)
		switch {
		case len(p.slice.Endpoints) == 0:
			t.deletes = append(t.deletes, p.orig)
		case p.changed || b.metadataChanged(p.slice):
			p.changed = true
			t.updates = append(t.updates, p)
		default:
			t.unchanged = append(t.unchanged, p)
		}
	}
	if g.memo != nil {
		return g.memo.toPlace()
	}
	var toPlace []*discoveryv1.Endpoint
	for _, id := range g.order {
		if !placed[id] {
			toPlace = append(toPlace, g.byID[id])
		}
	}
	return toPlace
}

// fillUpdates puts endpoints into the slices of g's port set that are
// being updated anyway, fullest first, and returns those left.
func (b *planner) fillUpdates(t *typePlan, g *group, toPlace []*discoveryv1.Endpoint) []*discoveryv1.Endpoint {
	fill := slices.Clone(t.updates)
	slices.SortStableFunc(fill, func(a, c *pending) int {
		return cmp.Or(cmp.Compare(len(c.slice.Endpoints), len(a.slice.Endpoints)), cmp.Compare(a.orig.Name, c.orig.Name))
	})
	for _, p := range fill {
		if p.portKey != g.portKey {
			continue
		}
		for len(toPlace) > 0 && len(p.slice.Endpoints) < b.r.maxEndpointsPerSlice {
			s := p.mutable()
			s.Endpoints = appendCopy(s.Endpoints, toPlace[0])
			toPlace = toPlace[1:]
		}
	}
	return toPlace
}

// placeRest creates full slices; a remainder goes into the unchanged slice
// it fills closest to full, or into a new slice.
func (b *planner) placeRest(t *typePlan, g *group, toPlace []*discoveryv1.Endpoint) {
	max := b.r.maxEndpointsPerSlice
	for len(toPlace) > 0 {
		var target *pending
		if len(toPlace) < max {
			target = closestToFull(t.unchanged, g.portKey, len(toPlace), max)
		}
		var s *discoveryv1.EndpointSlice
		if target != nil {
			t.unchanged = slices.DeleteFunc(t.unchanged, func(p *pending) bool { return p == target })
			target.changed = true
			t.updates = append(t.updates, target)
			s = target.mutable()
		} else {
			s = b.newSlice(t.addressType, g.ports)
			t.creates = append(t.creates, s)
		}
		for len(toPlace) > 0 && len(s.Endpoints) < max {
			s.Endpoints = appendCopy(s.Endpoints, toPlace[0])
			toPlace = toPlace[1:]
		}
	}
}

// placeholder keeps (or creates) one empty slice for an address type left
// with no slice at all, when the reconciler is asked to.
func (b *planner) placeholder(t *typePlan) {
	if !b.r.placeholder || len(t.creates) > 0 || len(t.updates) > 0 || len(t.deletes) < len(t.existing) {
		return
	}
	if i := slices.IndexFunc(t.deletes, b.isPlaceholder); i >= 0 {
		t.deletes = slices.Delete(t.deletes, i, i+1)
		return
	}
	t.creates = append(t.creates, b.newSlice(t.addressType, nil))
}

// recycle turns a delete and a create of the same address type into one
// update of the old slice.
func recycle(t *typePlan) {
	for len(t.deletes) > 0 && len(t.creates) > 0 {
		old, fresh := t.deletes[0], t.creates[0]
		t.deletes, t.creates = t.deletes[1:], t.creates[1:]
		s := copyWithoutEndpoints(old)
		s.Ports = fresh.Ports
		s.Endpoints = fresh.Endpoints
		s.OwnerReferences = fresh.OwnerReferences
		t.updates = append(t.updates, &pending{orig: old, slice: s, changed: true})
	}
}

// reconcileHints sets the hints of every slice the plan writes and adds
// an update for each unchanged slice whose hints are wrong: one pass over
// the finished plan, as upstream's trafficdist.ReconcileHints does. Only
// when the reconciler manages hints.
func (b *planner) reconcileHints() {
	if !b.r.trafficDistribution {
		return
	}
	if b.in.Topology != nil {
		for _, t := range sortedAddressTypes(b.in.AddressTypes) {
			b.topologyHints(t)
		}
		return
	}
	for _, s := range slices.Concat(b.plan.Create, b.plan.Update) {
		for i := range s.Endpoints {
			s.Endpoints[i].Hints = b.hints(&s.Endpoints[i])
		}
	}
	for _, p := range b.unchanged {
		if p.carried {
			continue
		}
		wrong := slices.ContainsFunc(p.slice.Endpoints, func(ep discoveryv1.Endpoint) bool {
			return !hintsEqual(ep.Hints, b.hints(&ep))
		})
		if !wrong {
			continue
		}
		s := b.rewrite(p)
		for i := range s.Endpoints {
			s.Endpoints[i].Hints = b.hints(&s.Endpoints[i])
		}
	}
}

// hints returns the hints of ep: the Input's own rule, or
// trafficDistribution's.
func (b *planner) hints(ep *discoveryv1.Endpoint) *discoveryv1.EndpointHints {
	if b.in.Hints != nil {
		return b.in.Hints(ep)
	}
	return hintsFor(ep, b.in.TrafficDistribution)
}

// keepDesired drops from p the endpoints no longer desired (or already
// placed in another slice) and replaces the others by their desired
// version where it differs. ids, when not nil, are the identities of p's
// endpoints.
func (b *planner) keepDesired(p *pending, g *group, ids []string, placed map[string]bool) {
	eps := p.orig.Endpoints
	if ids == nil {
		ids = make([]string, len(eps))
		for i := range eps {
			ids[i] = endpointID(&eps[i])
		}
		if b.read != nil {
			b.read[p.orig] = ids
		}
	}
	keep := make([]*discoveryv1.Endpoint, 0, len(eps))
	for i := range eps {
		id := ids[i]
		want, ok := g.want(id)
		if !ok || placed[id] {
			p.changed = true
			b.plan.removed++
			continue
		}
		placed[id] = true
		keep = append(keep, want)
		if !p.changed {
			p.changed = !b.upToDate(&eps[i], want)
		}
	}
	if !p.changed {
		return
	}
	kept := make([]discoveryv1.Endpoint, 0, len(keep))
	for _, want := range keep {
		kept = appendCopy(kept, want)
	}
	p.withEndpoints(kept)
}

// upToDate reports whether an existing endpoint needs no update to become
// want. Hints managed by the reconciler are compared in reconcileHints, not
// here.
func (b *planner) upToDate(have, want *discoveryv1.Endpoint) bool {
	return endpointEqual(have, want, !b.r.trafficDistribution)
}

// metadataChanged reports whether a slice's labels or annotations differ
// from what it must carry.
func (b *planner) metadataChanged(s *discoveryv1.EndpointSlice) bool {
	if !maps.Equal(s.Labels, b.labels) {
		return true
	}
	for k, v := range b.annotations {
		if got, ok := s.Annotations[k]; !ok || got != v {
			return true
		}
	}
	return false
}

// setMetadata gives a slice about to be written its labels, its
// annotations (keeping others') and the trigger-time annotation.
func (b *planner) setMetadata(s *discoveryv1.EndpointSlice) {
	s.Labels = maps.Clone(b.labels)
	if len(b.annotations) > 0 || s.Annotations != nil {
		annotations := maps.Clone(s.Annotations)
		if annotations == nil {
			annotations = map[string]string{}
		}
		maps.Copy(annotations, b.annotations)
		s.Annotations = annotations
	}
	if b.in.TriggerTime.IsZero() {
		delete(s.Annotations, corev1.EndpointsLastChangeTriggerTime)
	} else {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[corev1.EndpointsLastChangeTriggerTime] = b.in.TriggerTime.UTC().Format(time.RFC3339Nano)
	}
	if len(s.Annotations) == 0 {
		s.Annotations = nil
	}
}

func (b *planner) newSlice(addressType discoveryv1.AddressType, ports []discoveryv1.EndpointPort) *discoveryv1.EndpointSlice {
	owner := b.in.Owner
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    owner.GetName() + "-",
			Namespace:       owner.GetNamespace(),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, b.in.OwnerGVK)},
		},
		AddressType: addressType,
		Ports:       clonePorts(ports),
		Endpoints:   []discoveryv1.Endpoint{},
	}
	b.setMetadata(s)
	return s
}

// isPlaceholder reports whether an existing slice already is the
// placeholder this owner needs: no endpoints, no ports, the right labels
// and owner (name, annotations and timestamps do not matter).
func (b *planner) isPlaceholder(s *discoveryv1.EndpointSlice) bool {
	return len(s.Endpoints) == 0 && len(s.Ports) == 0 &&
		s.Namespace == b.in.Owner.GetNamespace() &&
		maps.Equal(s.Labels, b.labels) &&
		ownerOf(s) == b.in.Owner.GetUID()
}

// remove deletes a slice outright.
func (b *planner) remove(s *discoveryv1.EndpointSlice) {
	b.plan.Delete = append(b.plan.Delete, s)
	b.plan.removed += len(s.Endpoints)
}

// closestToFull returns the slice of port set portKey among candidates
// that n more endpoints fill closest to max without exceeding it, or nil.
// (Candidates hold the unchanged slices of every port set planned so far:
// the differential test against kube-controller-manager caught endpoints
// placed into a slice of another port set.)
func closestToFull(candidates []*pending, portKey string, n, max int) *pending {
	var best *pending
	for _, p := range candidates {
		size := len(p.slice.Endpoints)
		if p.portKey != portKey || size+n > max {
			continue
		}
		if best == nil || size > len(best.slice.Endpoints) {
			best = p
		}
	}
	return best
}

func clonePorts(ports []discoveryv1.EndpointPort) []discoveryv1.EndpointPort {
	out := make([]discoveryv1.EndpointPort, len(ports))
	for i := range ports {
		ports[i].DeepCopyInto(&out[i])
	}
	return out
}
