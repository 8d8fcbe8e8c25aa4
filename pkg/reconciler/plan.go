package reconciler

import (
	"cmp"
	"fmt"
	"slices"
	"time"

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
// desired endpoints, with as few writes as possible. It is a pure function
// of its input and of the tracker: the same input gives the same plan.
//
// Per address type and port set: existing slices keep the endpoints still
// desired (taking their desired version) and drop the rest; endpoints still
// to place go first into slices already being updated, fullest first; then
// full slices are created; a remainder smaller than a slice goes into the
// unchanged slice it fills closest to full, or into a new slice. Slices of
// port sets or address types no longer desired are deleted, and a slice to
// delete and a slice to create of the same address type become one update
// of the old slice.
func (r *Reconciler) Plan(in Input) (*Plan, error) {
	if err := r.validate(in); err != nil {
		return nil, err
	}
	owned, foreign := r.partition(in)
	if err := r.tracker.Stale(in.Owner.GetUID(), owned); err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", in.OwnerGVK.Kind, in.Owner.GetNamespace(), in.Owner.GetName(), err)
	}

	labels, annotations := r.metadata(in)
	b := &planner{r: r, in: in, labels: labels, annotations: annotations, plan: &Plan{owner: in.Owner}}
	groups := groupDesired(in.Desired)
	for _, addressType := range sortedAddressTypes(in.AddressTypes) {
		var typeGroups []*group
		for _, g := range groups {
			if g.addressType == addressType {
				typeGroups = append(typeGroups, g)
			}
		}
		var typeSlices []*discoveryv1.EndpointSlice
		for _, s := range owned {
			if s.AddressType == addressType {
				typeSlices = append(typeSlices, s)
			}
		}
		b.addressType(addressType, typeGroups, typeSlices)
	}
	// Slices of address types the owner no longer supports, and (with
	// ownership enforced) slices of other owners, go.
	supported := map[discoveryv1.AddressType]bool{}
	for _, t := range in.AddressTypes {
		supported[t] = true
	}
	for _, s := range owned {
		if !supported[s.AddressType] {
			b.remove(s)
		}
	}
	b.plan.Delete = append(b.plan.Delete, foreign...)
	return b.plan, nil
}

func (r *Reconciler) validate(in Input) error {
	if in.Owner == nil {
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

// partition sorts the existing slices this reconciler manages by name and
// splits off those that belong to another owner when ownership is
// enforced. Slices of other managers are left out altogether.
func (r *Reconciler) partition(in Input) (owned, foreign []*discoveryv1.EndpointSlice) {
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
	byName := func(a, b *discoveryv1.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) }
	slices.SortFunc(owned, byName)
	slices.SortFunc(foreign, byName)
	return owned, foreign
}

// metadata returns the labels every slice of the owner must have, and the
// annotations it must carry (others' annotations are kept).
func (r *Reconciler) metadata(in Input) (map[string]string, map[string]string) {
	var labels, annotations map[string]string
	if in.Labeler != nil {
		labels, annotations = in.Labeler.SliceMetadata()
	}
	out := make(map[string]string, len(labels)+1)
	for k, v := range labels {
		out[k] = v
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
}

// pending is an existing slice being planned: a copy, made on the first
// change, so the caller's object is never modified.
type pending struct {
	orig    *discoveryv1.EndpointSlice
	slice   *discoveryv1.EndpointSlice
	portKey string
	changed bool
}

func (p *pending) mutable() *discoveryv1.EndpointSlice {
	if p.slice == p.orig {
		p.slice = p.orig.DeepCopy()
	}
	return p.slice
}

func (b *planner) addressType(addressType discoveryv1.AddressType, groups []*group, existing []*discoveryv1.EndpointSlice) {
	max := b.r.maxEndpointsPerSlice
	byPortKey := map[string][]*pending{}
	var deletes []*discoveryv1.EndpointSlice
	var creates []*discoveryv1.EndpointSlice
	var updates []*pending
	totalEndpoints := 0

	wanted := map[string]*group{}
	for _, g := range groups {
		wanted[g.portKey] = g
	}
	for _, s := range existing {
		pk := portKey(s.Ports)
		if _, ok := wanted[pk]; !ok {
			deletes = append(deletes, s) // port set no longer desired
			b.plan.removed += len(s.Endpoints)
			continue
		}
		byPortKey[pk] = append(byPortKey[pk], &pending{orig: s, slice: s, portKey: pk})
	}

	for _, g := range groups {
		totalEndpoints += len(g.order)
		b.plan.figures.desiredSlices += (len(g.order) + max - 1) / max
		placed := make(map[string]bool, len(g.order))
		var unchanged []*pending

		// 1. Existing slices keep the endpoints still desired.
		for _, p := range byPortKey[g.portKey] {
			b.keepDesired(p, g, placed)
			switch {
			case len(p.slice.Endpoints) == 0:
				deletes = append(deletes, p.orig)
			case p.changed || b.metadataChanged(p.slice) || b.hintsWrong(p.slice):
				p.changed = true
				updates = append(updates, p)
			default:
				unchanged = append(unchanged, p)
			}
		}
		var toPlace []*discoveryv1.Endpoint
		for _, id := range g.order {
			if !placed[id] {
				toPlace = append(toPlace, g.byID[id])
			}
		}
		b.plan.added += len(toPlace)

		// 2. Fill the slices already being updated, fullest first.
		fill := slices.Clone(updates)
		slices.SortStableFunc(fill, func(a, c *pending) int {
			return cmp.Or(cmp.Compare(len(c.slice.Endpoints), len(a.slice.Endpoints)), cmp.Compare(a.orig.Name, c.orig.Name))
		})
		for _, p := range fill {
			if p.portKey != g.portKey {
				continue
			}
			for len(toPlace) > 0 && len(p.slice.Endpoints) < max {
				s := p.mutable()
				s.Endpoints = append(s.Endpoints, b.desiredVersion(toPlace[0]))
				toPlace = toPlace[1:]
			}
		}

		// 3. Full new slices; a remainder goes into the unchanged slice it
		// fills closest to full, or into a new slice.
		for len(toPlace) > 0 {
			var target *pending
			if len(toPlace) < max {
				target = closestToFull(unchanged, len(toPlace), max)
			}
			var s *discoveryv1.EndpointSlice
			if target != nil {
				unchanged = slices.DeleteFunc(unchanged, func(p *pending) bool { return p == target })
				target.changed = true
				updates = append(updates, target)
				s = target.mutable()
			} else {
				s = b.newSlice(addressType, g.ports)
			}
			for len(toPlace) > 0 && len(s.Endpoints) < max {
				s.Endpoints = append(s.Endpoints, b.desiredVersion(toPlace[0]))
				toPlace = toPlace[1:]
			}
			if target == nil {
				creates = append(creates, s)
			}
		}
	}

	// Placeholder: an address type left with no slice at all keeps (or
	// gets) one empty slice.
	if b.r.placeholder && len(creates) == 0 && len(updates) == 0 && len(deletes) == len(existing) {
		placeholder := b.newSlice(addressType, nil)
		if i := slices.IndexFunc(deletes, func(s *discoveryv1.EndpointSlice) bool { return b.isPlaceholder(s) }); i >= 0 {
			deletes = slices.Delete(deletes, i, i+1)
		} else {
			creates = append(creates, placeholder)
		}
	}

	// Recycling: a delete and a create of this address type become one
	// update of the old slice.
	for len(deletes) > 0 && len(creates) > 0 {
		old, fresh := deletes[0], creates[0]
		deletes, creates = deletes[1:], creates[1:]
		s := old.DeepCopy()
		s.Ports = fresh.Ports
		s.Endpoints = fresh.Endpoints
		s.OwnerReferences = fresh.OwnerReferences
		b.setMetadata(s)
		updates = append(updates, &pending{orig: old, slice: s, changed: true})
	}

	b.plan.figures.endpoints += totalEndpoints
	b.plan.figures.slices += len(existing) - len(deletes) + len(creates)
	b.plan.Create = append(b.plan.Create, creates...)
	for _, p := range updates {
		s := p.mutable()
		b.setMetadata(s)
		b.setHints(s)
		b.plan.Update = append(b.plan.Update, s)
	}
	b.plan.Delete = append(b.plan.Delete, deletes...)
}

// keepDesired drops from p the endpoints no longer desired (or already
// placed in another slice) and replaces the others by their desired
// version where it differs.
func (b *planner) keepDesired(p *pending, g *group, placed map[string]bool) {
	eps := p.orig.Endpoints
	keep := make([]*discoveryv1.Endpoint, 0, len(eps))
	for i := range eps {
		id := endpointID(&eps[i])
		want, ok := g.byID[id]
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
	s := p.mutable()
	s.Endpoints = make([]discoveryv1.Endpoint, 0, len(keep))
	for _, want := range keep {
		s.Endpoints = append(s.Endpoints, b.desiredVersion(want))
	}
}

// desiredVersion returns the endpoint as it should be written: a copy, with
// hints computed when the reconciler manages them.
func (b *planner) desiredVersion(ep *discoveryv1.Endpoint) discoveryv1.Endpoint {
	out := *ep.DeepCopy()
	if b.r.trafficDistribution {
		out.Hints = hintsFor(&out, b.in.TrafficDistribution)
	}
	return out
}

// upToDate reports whether an existing endpoint already is the desired
// version of want (without copying want).
func (b *planner) upToDate(have, want *discoveryv1.Endpoint) bool {
	if !b.r.trafficDistribution {
		return endpointEqual(have, want)
	}
	w := *want
	w.Hints = hintsFor(want, b.in.TrafficDistribution)
	return endpointEqual(have, &w)
}

// hintsWrong reports whether a slice's hints differ from what traffic
// distribution asks for (only when the reconciler manages hints).
func (b *planner) hintsWrong(s *discoveryv1.EndpointSlice) bool {
	if !b.r.trafficDistribution {
		return false
	}
	for i := range s.Endpoints {
		if !hintsEqual(s.Endpoints[i].Hints, hintsFor(&s.Endpoints[i], b.in.TrafficDistribution)) {
			return true
		}
	}
	return false
}

func (b *planner) setHints(s *discoveryv1.EndpointSlice) {
	if !b.r.trafficDistribution {
		return
	}
	for i := range s.Endpoints {
		s.Endpoints[i].Hints = hintsFor(&s.Endpoints[i], b.in.TrafficDistribution)
	}
}

// metadataChanged reports whether a slice's labels or annotations differ
// from what it must carry.
func (b *planner) metadataChanged(s *discoveryv1.EndpointSlice) bool {
	if !mapsEqual(s.Labels, b.labels) {
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
	s.Labels = cloneMap(b.labels)
	if len(b.annotations) > 0 || s.Annotations != nil {
		annotations := cloneMap(s.Annotations)
		for k, v := range b.annotations {
			annotations[k] = v
		}
		s.Annotations = annotations
	}
	if b.in.TriggerTime.IsZero() {
		delete(s.Annotations, corev1LastChangeTriggerTime)
	} else {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[corev1LastChangeTriggerTime] = b.in.TriggerTime.UTC().Format(time.RFC3339Nano)
	}
	if len(s.Annotations) == 0 {
		s.Annotations = nil
	}
}

// corev1LastChangeTriggerTime is corev1.EndpointsLastChangeTriggerTime.
const corev1LastChangeTriggerTime = "endpoints.kubernetes.io/last-change-trigger-time"

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
		mapsEqual(s.Labels, b.labels) &&
		ownerOf(s) == b.in.Owner.GetUID()
}

// remove deletes a slice outright.
func (b *planner) remove(s *discoveryv1.EndpointSlice) {
	b.plan.Delete = append(b.plan.Delete, s)
	b.plan.removed += len(s.Endpoints)
}

// closestToFull returns the slice among candidates that n more endpoints
// fill closest to max without exceeding it, or nil.
func closestToFull(candidates []*pending, n, max int) *pending {
	var best *pending
	for _, p := range candidates {
		size := len(p.slice.Endpoints)
		if size+n > max {
			continue
		}
		if best == nil || size > len(best.slice.Endpoints) {
			best = p
		}
	}
	return best
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func clonePorts(ports []discoveryv1.EndpointPort) []discoveryv1.EndpointPort {
	out := make([]discoveryv1.EndpointPort, len(ports))
	for i := range ports {
		ports[i].DeepCopyInto(&out[i])
	}
	return out
}
