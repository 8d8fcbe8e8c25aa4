package imports

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// The plan's stages are pure: these tables run them on objects as they
// would be read, with no client.

var planKey = types.NamespacedName{Namespace: "ns", Name: "web"}

// serviceImportGVK is the ServiceImport's kind as a consumer that serves
// v1beta1 has it.
var serviceImportGVK = mcsv1beta1.SchemeGroupVersion.WithKind(mcsv1beta1.ServiceImportKindName)

func mergedOf(typ mcsv1beta1.ServiceImportType, labels map[string]string, clusters ...clusterset.ClusterID) clusterset.Merged {
	return clusterset.Merged{Clusters: clusters, Spec: clusterset.ExportedSpec{
		Type: typ, Labels: labels, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
		Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
	}}
}

func TestPlanServiceImport(t *testing.T) {
	fresh, write := planServiceImport(planKey, nil, mergedOf(mcsv1beta1.ClusterSetIP, map[string]string{"tier": "web"}, "east"), "mcs")
	if !write {
		t.Fatal("a new ServiceImport: nothing to write")
	}
	// As the API server holds it once spec.ips is written.
	held := fresh.DeepCopy()
	held.UID, held.Spec.IPs = "uid-1", []string{"10.96.0.7"}
	// Someone else's label, beside the exports' own.
	othersLabel := held.DeepCopy()
	othersLabel.Labels["team"] = "a"

	for _, tc := range []struct {
		name      string
		current   *mcsv1beta1.ServiceImport
		merged    clusterset.Merged
		write     bool
		check     func(*mcsv1beta1.ServiceImport) string
		managedBy string
	}{
		{name: "new: the exports' spec, labels and mcs-syncer's own", merged: mergedOf(mcsv1beta1.ClusterSetIP, map[string]string{"tier": "web"}, "east"), write: true,
			check: func(si *mcsv1beta1.ServiceImport) string {
				if si.Name != "web" || si.Namespace != "ns" || si.Spec.Type != mcsv1beta1.ClusterSetIP || len(si.Spec.Ports) != 1 ||
					si.Labels[ManagedByLabel] != "mcs" || si.Labels["tier"] != "web" ||
					si.Annotations[DerivedServiceAnnotation] != DerivedServiceName(planKey) ||
					si.Annotations[ExportedKeysAnnotation] != `{"labels":["tier"]}` {
					return "not the import's"
				}
				return ""
			}},
		{name: "held as planned, spec.ips kept: nothing to write", current: held, merged: mergedOf(mcsv1beta1.ClusterSetIP, map[string]string{"tier": "web"}, "east"),
			check: func(si *mcsv1beta1.ServiceImport) string {
				if len(si.Spec.IPs) != 1 || si.Spec.IPs[0] != "10.96.0.7" {
					return "spec.ips dropped"
				}
				return ""
			}},
		{name: "an exported label dropped; another tool's kept", current: othersLabel, merged: mergedOf(mcsv1beta1.ClusterSetIP, nil, "east"), write: true,
			check: func(si *mcsv1beta1.ServiceImport) string {
				if _, ok := si.Labels["tier"]; ok || si.Labels["team"] != "a" || si.Annotations[ExportedKeysAnnotation] != "" {
					return "labels " + strings.Join([]string{si.Labels["tier"], si.Labels["team"]}, ",")
				}
				return ""
			}},
		{name: "turned Headless: no spec.ips, no derived Service named", current: held, merged: mergedOf(mcsv1beta1.Headless, map[string]string{"tier": "web"}, "east"), write: true,
			check: func(si *mcsv1beta1.ServiceImport) string {
				if len(si.Spec.IPs) != 0 || si.Annotations[DerivedServiceAnnotation] != "" {
					return "still a ClusterSetIP import's"
				}
				return ""
			}},
		{name: "another --managed-by", current: held, merged: mergedOf(mcsv1beta1.ClusterSetIP, map[string]string{"tier": "web"}, "east"), write: true, managedBy: "other",
			check: func(si *mcsv1beta1.ServiceImport) string {
				if si.Labels[ManagedByLabel] != "other" {
					return "managed-by " + si.Labels[ManagedByLabel]
				}
				return ""
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.current.DeepCopy()
			want, write := planServiceImport(planKey, tc.current, tc.merged, cmp.Or(tc.managedBy, "mcs"))
			if write != tc.write {
				t.Errorf("write = %v, want %v", write, tc.write)
			}
			if why := tc.check(want); why != "" {
				t.Errorf("%s: %+v", why, want)
			}
			if tc.current != nil && (tc.current.Labels["tier"] != before.Labels["tier"] || len(tc.current.Spec.IPs) != len(before.Spec.IPs)) {
				t.Error("the object as read was changed")
			}
		})
	}
}

func TestPlanDerivedService(t *testing.T) {
	si := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1"}}
	name := types.NamespacedName{Namespace: "ns", Name: DerivedServiceName(planKey)}
	merged := mergedOf(mcsv1beta1.ClusterSetIP, nil, "east")
	fresh, write := planDerivedService(name, si, serviceImportGVK, merged, nil, "mcs")
	if !write || !metav1.IsControlledBy(fresh, si) || fresh.Spec.Type != corev1.ServiceTypeClusterIP || fresh.Spec.Selector != nil ||
		len(fresh.Spec.Ports) != 1 || fresh.Spec.Ports[0].TargetPort.IntVal != 80 || fresh.Spec.SessionAffinity != corev1.ServiceAffinityNone ||
		ptr.Deref(fresh.Spec.IPFamilyPolicy, "") != corev1.IPFamilyPolicySingleStack || fresh.Labels[mcsv1beta1.LabelServiceName] != "web" {
		t.Fatalf("a new derived Service (write %v): %+v", write, fresh)
	}
	// As the API server holds it: a ClusterIP, and someone's annotation.
	held := fresh.DeepCopy()
	held.Spec.ClusterIP, held.Spec.ClusterIPs = "10.96.0.7", []string{"10.96.0.7"}
	held.Annotations = map[string]string{"note": "kept"}
	if want, write := planDerivedService(name, si, serviceImportGVK, merged, held, "mcs"); write || want.Spec.ClusterIP != "10.96.0.7" || want.Annotations["note"] != "kept" {
		t.Errorf("held as planned: write %v, %+v", write, want)
	}
	dual := merged
	dual.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	if want, write := planDerivedService(name, si, serviceImportGVK, dual, held, "mcs"); !write || ptr.Deref(want.Spec.IPFamilyPolicy, "") != corev1.IPFamilyPolicyRequireDualStack {
		t.Errorf("exports turned dual-stack: write %v, policy %v", write, want.Spec.IPFamilyPolicy)
	}
	otherOwner := held.DeepCopy()
	otherOwner.OwnerReferences[0].UID = "uid-0"
	if _, write := planDerivedService(name, si, serviceImportGVK, merged, otherOwner, "mcs"); !write {
		t.Error("an owner reference to an earlier ServiceImport is not rewritten")
	}
}

func TestPlanStatus(t *testing.T) {
	si := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Generation: 3}}
	merged := mergedOf(mcsv1beta1.ClusterSetIP, nil, "east", "west")
	status, write := planStatus(si, merged, true, nil, nil)
	ready := meta.FindStatusCondition(status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))
	if !write || len(status.Clusters) != 2 || status.Clusters[1].Cluster != "west" || status.EndpointSliceObjects != mcsv1beta1.EndpointSliceObjectsPresent ||
		ready == nil || ready.Status != metav1.ConditionTrue || ready.Message != "imported from [east west]" || ready.ObservedGeneration != 3 {
		t.Fatalf("a first status (write %v): %+v", write, status)
	}
	written := si.DeepCopy()
	written.Status = status
	if _, write := planStatus(written, merged, true, nil, nil); write {
		t.Error("the same status again is written")
	}
	if status, write := planStatus(written, merged, false, nil, nil); !write || status.EndpointSliceObjects != mcsv1beta1.EndpointSliceObjectsAbsent {
		t.Errorf("no slices left: write %v, %s", write, status.EndpointSliceObjects)
	}
	problem := slicesNotWrittenCondition(errorString(strings.Repeat("refused ", 1000)))
	status, write = planStatus(written, merged, true, problem, nil)
	ready = meta.FindStatusCondition(status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))
	if !write || ready.Status != metav1.ConditionFalse || ready.Reason != string(ReasonEndpointSlicesNotWritten) || len(ready.Message) > clusterset.MaxConditionMessage {
		t.Errorf("a problem: write %v, Ready %s/%s, a message of %d bytes", write, ready.Status, ready.Reason, len(ready.Message))
	}
	if len(written.Status.Conditions) != 1 || written.Status.Conditions[0].Status != metav1.ConditionTrue {
		t.Error("the object as read was changed")
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

func TestPlanSlices(t *testing.T) {
	si := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, UID: "uid-1"}}
	east, west := exportFrom("east", 0, "10.1.0.1", "10.1.0.2"), exportFrom("west", 1, "10.2.0.1")
	merged := clusterset.Merge([]*clusterset.ExportedService{east, west})
	heldFrom := func(source string, ips ...string) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-" + source, Namespace: key.Namespace, ResourceVersion: "7",
			Labels: map[string]string{mcsv1beta1.LabelServiceName: key.Name, mcsv1beta1.LabelSourceCluster: source}}}
		for _, ip := range ips {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}})
		}
		return s
	}
	members := []clusterset.ClusterID{"east", "west", "north"}
	base := func() sliceInputs {
		return sliceInputs{si: si, siGVK: serviceImportGVK, merged: merged, exports: []*clusterset.ExportedService{east, west}, members: members, consumer: "north", settled: settledSources{}}
	}
	// upToDate is east's slices held and recorded as up to date.
	upToDate := base()
	upToDate.held = []*discoveryv1.EndpointSlice{heldFrom("east", "10.1.0.1", "10.1.0.2")}
	eastPlan := planSlices(upToDate).planned[0]
	upToDate.settled.record(eastPlan.source, eastPlan.settled, eastPlan.remember)
	// An IPv6 endpoint group in an IPv4 import is left out.
	dual := exportFrom("west", 1, "10.2.0.1")
	dual.Endpoints = append(dual.Endpoints, reconciler.EndpointGroup{AddressType: discoveryv1.AddressTypeIPv6,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"fd00::1"}}}})
	// The consumer exports too and asks for its own cluster first.
	own := exportFrom("north", 2, "10.3.0.1")
	localFirst := clusterset.Merge([]*clusterset.ExportedService{east, own})
	localFirst.Spec.LocalClusterFirst = true

	for _, tc := range []struct {
		name    string
		in      func(sliceInputs) sliceInputs
		planned string // source:desired endpoints, in order
		present bool
		check   func(slicesPlan) string
	}{
		{name: "a new import: each exporter's endpoints; a member that exports nothing and holds nothing is left alone",
			planned: "east:2 west:1",
			check: func(p slicesPlan) string {
				labels, _ := p.planned[0].input.Labeler.SliceMetadata()
				if labels[mcsv1beta1.LabelSourceCluster] != "east" || labels[discoveryv1.LabelServiceName] != DerivedServiceName(key) ||
					p.planned[0].input.Owner != si || !p.planned[0].remember || fmt.Sprint(p.sources) != "[east west north]" {
					return fmt.Sprintf("labels %v, sources %v", labels, p.sources)
				}
				return ""
			}},
		{name: "a headless import's slices name no Service",
			in: func(in sliceInputs) sliceInputs {
				in.merged.Spec.Type = mcsv1beta1.Headless
				return in
			},
			planned: "east:2 west:1",
			check: func(p slicesPlan) string {
				if labels, _ := p.planned[1].input.Labeler.SliceMetadata(); labels[discoveryv1.LabelServiceName] != "" {
					return "kubernetes.io/service-name on a headless import's slice"
				}
				return ""
			}},
		{name: "a source whose exports are not all known keeps its slices",
			in: func(in sliceInputs) sliceInputs {
				in.unsettled = map[clusterset.ClusterID]bool{"east": true}
				in.held = []*discoveryv1.EndpointSlice{heldFrom("east", "10.1.0.9")}
				return in
			},
			planned: "west:1", present: true},
		{name: "the slices of a cluster that left are withdrawn",
			in: func(in sliceInputs) sliceInputs {
				in.held = []*discoveryv1.EndpointSlice{heldFrom("gone", "10.9.0.1")}
				return in
			},
			planned: "east:2 west:1 gone:0",
			check: func(p slicesPlan) string {
				if gone := p.planned[2]; gone.export != nil || len(gone.input.Existing) != 1 || fmt.Sprint(p.sources) != "[east west north gone]" {
					return fmt.Sprintf("gone planned from %v, sources %v", gone.input.Existing, p.sources)
				}
				return ""
			}},
		{name: "a source up to date under the same inputs is not planned again",
			in:      func(sliceInputs) sliceInputs { return upToDate },
			planned: "west:1", present: true},
		{name: "a new export of a source up to date is planned",
			in: func(sliceInputs) sliceInputs {
				in := upToDate
				in.exports = []*clusterset.ExportedService{exportFrom("east", 0, "10.1.0.1"), west}
				return in
			},
			planned: "east:1 west:1"},
		{name: "the slices held changed (someone's write) under a source up to date",
			in: func(sliceInputs) sliceInputs {
				in := upToDate
				changed := heldFrom("east", "10.1.0.1", "10.1.0.2")
				changed.ResourceVersion = "8"
				in.held = []*discoveryv1.EndpointSlice{changed}
				return in
			},
			planned: "east:2 west:1"},
		{name: "endpoints of another address type are left out and counted",
			in: func(in sliceInputs) sliceInputs {
				in.exports = []*clusterset.ExportedService{east, dual}
				return in
			},
			planned: "east:2 west:1",
			check: func(p slicesPlan) string {
				if p.planned[1].leftOut.otherType != 1 {
					return fmt.Sprintf("left out %+v", p.planned[1].leftOut)
				}
				return ""
			}},
		{name: "local cluster first: the consumer's ready endpoints hinted for its zones, the others' for none, never remembered",
			in: func(in sliceInputs) sliceInputs {
				in.merged, in.exports, in.zones = localFirst, []*clusterset.ExportedService{east, own}, []string{"z1"}
				in.settled = upToDate.settled // east up to date: planned anyway, the hints follow the zones
				in.held = upToDate.held
				return in
			},
			planned: "east:2 north:1",
			check: func(p slicesPlan) string {
				ep := p.planned[1].input.Desired[0].Endpoints[0]
				if p.planned[0].remember || p.planned[1].input.Hints == nil || p.planned[1].input.Hints(&ep).ForZones[0].Name != "z1" ||
					p.planned[0].input.Hints(&ep).ForZones[0].Name != otherClusterZone {
					return "not the local-first hints"
				}
				return ""
			}},
		{name: "local cluster first with the zones unknown: no hints",
			in: func(in sliceInputs) sliceInputs {
				in.merged, in.exports = localFirst, []*clusterset.ExportedService{east, own}
				return in
			},
			planned: "east:2 north:1",
			check: func(p slicesPlan) string {
				if p.planned[1].input.Hints != nil || !p.planned[1].remember {
					return "hints without zones"
				}
				return ""
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := base()
			if tc.in != nil {
				in = tc.in(in)
			}
			plan := planSlices(in)
			var got []string
			for _, p := range plan.planned {
				got = append(got, fmt.Sprintf("%s:%d", p.source, p.endpoints))
			}
			if strings.Join(got, " ") != tc.planned || plan.present != tc.present {
				t.Fatalf("planned %v, present %v; want %s, present %v", got, plan.present, tc.planned, tc.present)
			}
			if tc.check != nil {
				if problem := tc.check(plan); problem != "" {
					t.Error(problem)
				}
			}
		})
	}
}

// TestDesiredGroupsTakeTheExportAsItIs: an export whose groups are all
// imported as they are is handed on as it is, not copied (a Service of
// 50,000 endpoints is 500 runs); a group of another address type, one on
// a port the import does not take from it, and an unimportable endpoint
// make a list of the groups taken, every other group as it was, in order.
func TestDesiredGroupsTakeTheExportAsItIs(t *testing.T) {
	es := exportFrom("east", 0, "10.1.0.1", "10.1.0.2")
	run := es.Endpoints[0]
	run.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.3"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}
	es.Endpoints = append(es.Endpoints, run)
	merged := clusterset.Merge([]*clusterset.ExportedService{es})
	v4 := []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4}
	groups, left := desiredGroups(merged, es, v4, nil, newCheckedArrays(), key)
	if len(groups) != 2 || &groups[0] != &es.Endpoints[0] || left.total() != 0 {
		t.Fatalf("an export imported as it is: %d groups, a copy %v, %d left out", len(groups), len(groups) == 0 || &groups[0] != &es.Endpoints[0], left.total())
	}

	v6 := reconciler.EndpointGroup{AddressType: discoveryv1.AddressTypeIPv6, Ports: run.Ports, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"fd00::1"}}}}
	unexposed := run
	unexposed.Ports = append(slices.Clone(run.Ports), discoveryv1.EndpointPort{Name: ptr.To("admin"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](9000)})
	unimportable := run
	unimportable.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"127.0.0.1"}}, run.Endpoints[0]}
	mixed := *es
	mixed.Endpoints = []reconciler.EndpointGroup{es.Endpoints[0], v6, unexposed, unimportable, es.Endpoints[1]}
	groups, left = desiredGroups(merged, &mixed, v4, nil, newCheckedArrays(), key)
	if len(groups) != 4 || &groups[0] == &mixed.Endpoints[0] {
		t.Fatalf("%d groups (a copy: %v), want 4 in a list of their own", len(groups), len(groups) > 0 && &groups[0] != &mixed.Endpoints[0])
	}
	if !sameGroup(groups[0], es.Endpoints[0]) || !sameGroup(groups[3], es.Endpoints[1]) {
		t.Error("the groups taken as they are are not the export's")
	}
	if len(groups[1].Ports) != 1 || *groups[1].Ports[0].Name != "http" || &groups[1].Endpoints[0] != &unexposed.Endpoints[0] {
		t.Errorf("the group with a port not taken: ports %d, want http alone, its endpoints as they are", len(groups[1].Ports))
	}
	if len(groups[2].Endpoints) != 1 || groups[2].Endpoints[0].Addresses[0] != "10.1.0.3" {
		t.Errorf("the group with an unimportable endpoint: %v", groups[2].Endpoints)
	}
	if left.otherType != 1 || left.total() != 2 {
		t.Errorf("left out: %+v, want the IPv6 endpoint and the loopback one", left)
	}
}
