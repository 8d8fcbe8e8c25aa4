package export

import (
	"context"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/plumbing"
)

// Unit tests of the export watcher: a fake client in place of the member's
// cache and API server, milliseconds each, no binaries. What depends on
// the real API server (watches, validation, status conflicts under load)
// is in export_test.go, on the testbed.

var webKey = types.NamespacedName{Namespace: "ns", Name: "web"}

// fakeMembers are east (the watcher's cluster) and west.
type fakeMembers struct {
	mu        sync.Mutex
	connected map[clusterset.ClusterID]time.Time // absent: not connected
}

func (m *fakeMembers) IDs() []clusterset.ClusterID { return []clusterset.ClusterID{"east", "west"} }

// Changes is never closed: the export watcher does not wait on it.
func (m *fakeMembers) Changes() <-chan struct{} { return nil }

func (m *fakeMembers) Health(id clusterset.ClusterID) clusterset.Health {
	m.mu.Lock()
	defer m.mu.Unlock()
	since, ok := m.connected[id]
	return clusterset.Health{Up: ok, Since: since, Answering: ok}
}

type unitHarness struct {
	t        *testing.T
	client   client.Client
	store    *clusterset.Store
	feedback *clusterset.Feedback
	members  *fakeMembers
	recorder *events.FakeRecorder
	w        *Watcher
	// statusFail, if set, fails status writes.
	statusFail   func() error
	statusWrites int
}

func newUnitHarness(t *testing.T, objs ...client.Object) *unitHarness {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := mcsv1beta1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	long := time.Now().Add(-time.Hour)
	h := &unitHarness{t: t, store: clusterset.NewStore(), feedback: clusterset.NewFeedback(), recorder: events.NewFakeRecorder(100),
		members: &fakeMembers{connected: map[clusterset.ClusterID]time.Time{"east": long, "west": long}}}
	h.client = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&mcsv1beta1.ServiceExport{}).
		WithIndex(&discoveryv1.EndpointSlice{}, sliceServiceIndex, func(o client.Object) []string {
			return []string{o.GetLabels()[discoveryv1.LabelServiceName]}
		}).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if h.statusFail != nil {
					if err := h.statusFail(); err != nil {
						return err
					}
				}
				h.statusWrites++
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		}).Build()
	h.w = &Watcher{cluster: "east", client: h.client, apiReader: h.client, fetched: newFetched(), groupers: newGroupers(), store: h.store, feedback: h.feedback, writeStatus: true, recorder: h.recorder,
		membership: h.members, triggers: newTriggerLog(), conditions: newConditionCounts(), own: plumbing.NewOwnWrites()}
	for _, id := range h.members.IDs() {
		h.store.MarkSynced(id, nil)
	}
	return h
}

func service(mutate func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: corev1.ServiceSpec{
		ClusterIP: "10.96.0.1", Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
		IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
	}}
	if mutate != nil {
		mutate(s)
	}
	return s
}

func serviceExportOf(created time.Time) *mcsv1beta1.ServiceExport {
	return &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", CreationTimestamp: metav1.NewTime(created)}}
}

// slice is a slice of web with ready endpoints ips and trigger time at.
func slice(name string, at time.Time, ips ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Labels:      map[string]string{discoveryv1.LabelServiceName: "web"},
			Annotations: map[string]string{corev1.EndpointsLastChangeTriggerTime: at.UTC().Format(time.RFC3339Nano)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
	}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

func (h *unitHarness) sync() time.Duration {
	h.t.Helper()
	res, err := h.w.Reconcile(h.t.Context(), reconcile.Request{NamespacedName: webKey})
	if err != nil {
		h.t.Fatalf("reconcile: %v", err)
	}
	return res.RequeueAfter
}

// conditions returns the ServiceExport's conditions as "Type=Status/Reason".
func (h *unitHarness) conditions() map[string]string {
	h.t.Helper()
	se := &mcsv1beta1.ServiceExport{}
	if err := h.client.Get(h.t.Context(), webKey, se); err != nil {
		h.t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range se.Status.Conditions {
		out[c.Type] = string(c.Status) + "/" + c.Reason
	}
	return out
}

func (h *unitHarness) condition(typ mcsv1beta1.ServiceExportConditionType) metav1.Condition {
	h.t.Helper()
	se := &mcsv1beta1.ServiceExport{}
	if err := h.client.Get(h.t.Context(), webKey, se); err != nil {
		h.t.Fatal(err)
	}
	c := meta.FindStatusCondition(se.Status.Conditions, string(typ))
	if c == nil {
		h.t.Fatalf("no %s condition in %v", typ, se.Status.Conditions)
	}
	return *c
}

func (h *unitHarness) export() *clusterset.ExportedService {
	for _, es := range h.store.Get(webKey) {
		if es.Cluster == "east" {
			return es
		}
	}
	return nil
}

func (h *unitHarness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestUnitValidExport(t *testing.T) {
	t0 := time.Now().Add(-time.Minute).Truncate(time.Second)
	se := serviceExportOf(t0)
	se.Spec.ExportedLabels = map[string]string{"tier": "front"}
	h := newUnitHarness(t, se, service(func(s *corev1.Service) {
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		s.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
	}), slice("web-a", t0, "10.0.0.1"), slice("web-b", t0.Add(time.Second), "10.0.0.2"))
	h.sync()

	es := h.export()
	if es == nil {
		t.Fatal("no export in the Store")
	}
	if es.Spec.Type != mcsv1beta1.ClusterSetIP || len(es.Spec.Ports) != 1 || es.Spec.Ports[0].Port != 80 ||
		es.Spec.SessionAffinity != corev1.ServiceAffinityClientIP || ptr.Deref(es.Spec.TrafficDistribution, "") != "PreferClose" ||
		es.Spec.Labels["tier"] != "front" || !es.ExportCreated.Time.Equal(t0) {
		t.Errorf("spec %+v created %v", es.Spec, es.ExportCreated)
	}
	if n := len(es.Endpoints); n != 1 || len(es.Endpoints[0].Endpoints) != 2 {
		t.Errorf("endpoints %+v, want one group of 2", es.Endpoints)
	}
	if !es.LastChangeTriggerTime.Equal(t0.Add(time.Second)) {
		t.Errorf("last change trigger time %v, want the newest slice's %v", es.LastChangeTriggerTime, t0.Add(time.Second))
	}
	want := map[string]string{"Valid": "True/Valid", "Ready": "True/Exported", "Conflict": "False/NoConflicts"}
	if got := h.conditions(); !maps.Equal(got, want) {
		t.Errorf("conditions %v, want %v", got, want)
	}
	writes := h.statusWrites
	h.sync()
	if h.statusWrites != writes {
		t.Errorf("a second sync wrote the status again")
	}
}

// TestUnitLocalClusterFirst: the annotation "true" or "false" is taken;
// any other value is exported as false and Valid says why, after the
// reserved keys when both are wrong.
func TestUnitLocalClusterFirst(t *testing.T) {
	for _, tc := range []struct {
		value      string // "-": no annotation
		reserved   bool
		want       bool
		wantReason string
		wantInMsg  string
	}{
		{"-", false, false, "Valid", ""},
		{"true", false, true, "Valid", ""},
		{"false", false, false, "Valid", ""},
		{"yes", false, false, "AnnotationIgnored", `annotation mcs-syncer.io/local-cluster-first is "yes", not "true" or "false"`},
		{"True", true, false, "ReservedKeysRefused", `multicluster.kubernetes.io/x; annotation mcs-syncer.io/local-cluster-first is "True"`},
	} {
		t.Run(tc.value, func(t *testing.T) {
			se := serviceExportOf(time.Now())
			if tc.value != "-" {
				se.Annotations = map[string]string{clusterset.LocalClusterFirstAnnotation: tc.value}
			}
			if tc.reserved {
				se.Spec.ExportedLabels = map[string]string{"multicluster.kubernetes.io/x": "y"}
			}
			h := newUnitHarness(t, se, service(nil))
			h.sync()
			if es := h.export(); es == nil || es.Spec.LocalClusterFirst != tc.want {
				t.Fatalf("export %+v, want LocalClusterFirst %v", es, tc.want)
			}
			valid := h.condition(mcsv1beta1.ServiceExportConditionValid)
			if valid.Status != metav1.ConditionTrue || valid.Reason != tc.wantReason || !strings.Contains(valid.Message, tc.wantInMsg) {
				t.Errorf("Valid %s/%s %q, want True/%s containing %q", valid.Status, valid.Reason, valid.Message, tc.wantReason, tc.wantInMsg)
			}
		})
	}
}

func TestUnitHeadless(t *testing.T) {
	h := newUnitHarness(t, serviceExportOf(time.Now()), service(func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }))
	h.sync()
	if es := h.export(); es == nil || es.Spec.Type != mcsv1beta1.Headless {
		t.Errorf("export %+v, want Headless", es)
	}
}

func TestUnitInvalidExports(t *testing.T) {
	for _, tc := range []struct {
		name   string
		svc    *corev1.Service
		reason string
		msg    string
	}{
		{"no Service", nil, "NoService", "does not exist in cluster east"},
		{"ExternalName", service(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName }), "InvalidServiceType", "ExternalName"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{serviceExportOf(time.Now())}
			if tc.svc != nil {
				objs = append(objs, tc.svc)
			}
			h := newUnitHarness(t, objs...)
			// Exported before: the Store's copy goes with the Service.
			h.store.Put(&clusterset.ExportedService{Cluster: "east", Key: webKey})
			h.sync()
			if es := h.export(); es != nil {
				t.Errorf("an invalid export stays in the Store: %+v", es)
			}
			valid := h.condition(mcsv1beta1.ServiceExportConditionValid)
			if valid.Status != metav1.ConditionFalse || valid.Reason != tc.reason || !strings.Contains(valid.Message, tc.msg) {
				t.Errorf("Valid %s/%s %q", valid.Status, valid.Reason, valid.Message)
			}
			if got := h.conditions(); got["Ready"] != "False/Pending" || got["Conflict"] != "" {
				t.Errorf("conditions %v, want Ready=False/Pending and no Conflict", got)
			}
			if ev := h.events(); len(ev) != 1 || !strings.Contains(ev[0], tc.reason) {
				t.Errorf("events %v, want one %s", ev, tc.reason)
			}
		})
	}
}

func TestUnitDeletedExportIsWithdrawn(t *testing.T) {
	se := serviceExportOf(time.Now())
	h := newUnitHarness(t, se, service(nil))
	h.sync()
	if h.export() == nil {
		t.Fatal("no export")
	}
	if err := h.client.Delete(t.Context(), se); err != nil {
		t.Fatal(err)
	}
	h.sync()
	if es := h.export(); es != nil {
		t.Errorf("still in the Store: %+v", es)
	}
}

func TestUnitNoStatusWithoutWriteStatus(t *testing.T) {
	h := newUnitHarness(t, serviceExportOf(time.Now()))
	h.w.writeStatus = false
	h.sync()
	if h.statusWrites != 0 {
		t.Errorf("%d status writes without WriteStatus", h.statusWrites)
	}
}

func TestUnitConflict(t *testing.T) {
	t0 := time.Now().Add(-time.Minute)
	h := newUnitHarness(t, serviceExportOf(t0.Add(time.Second)), service(nil))
	other := &clusterset.ExportedService{Cluster: "west", Key: webKey, ExportCreated: metav1.NewTime(t0),
		Spec: clusterset.ExportedSpec{Type: mcsv1beta1.ClusterSetIP, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080}}}}
	h.store.Put(other)
	h.sync()
	c := h.condition(mcsv1beta1.ServiceExportConditionConflict)
	if c.Status != metav1.ConditionTrue || c.Reason != "PortConflict" || !strings.Contains(c.Message, `the endpoints of east are left out of port "http"`) {
		t.Errorf("Conflict %s/%s %q", c.Status, c.Reason, c.Message)
	}
	if ev := h.events(); len(ev) != 1 || !strings.Contains(ev[0], "PortConflict") {
		t.Errorf("events %v", ev)
	}
}

// TestUnitConflictWithMemberNotHeardFrom: a member in its first pass holds
// the status back briefly (one write once it is synced); a member that
// does not answer does not: Conflict is written and names it.
func TestUnitConflictWithMemberNotHeardFrom(t *testing.T) {
	h := newUnitHarness(t, serviceExportOf(time.Now()), service(nil))
	h.store.BeginResync("west")
	h.members.connected["west"] = time.Now()
	if recheck := h.sync(); recheck <= 0 || recheck > firstPassWait {
		t.Errorf("recheck %v, want within the first-pass wait", recheck)
	}
	if h.statusWrites != 0 {
		t.Errorf("status written while west is in its first pass")
	}
	delete(h.members.connected, "west")
	h.sync()
	c := h.condition(mcsv1beta1.ServiceExportConditionConflict)
	if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "not yet heard from west") {
		t.Errorf("Conflict %s %q, want False naming west", c.Status, c.Message)
	}
}

// TestUnitRestartWithMembersNotHeardFromWritesNothing: after a restart,
// members whose first pass takes long change nothing of a Conflict
// condition that stands; a conflict that appears meanwhile is written,
// naming them.
func TestUnitRestartWithMembersNotHeardFromWritesNothing(t *testing.T) {
	h := newUnitHarness(t, serviceExportOf(time.Now()), service(nil))
	h.sync()
	before := h.condition(mcsv1beta1.ServiceExportConditionConflict)
	writes := h.statusWrites
	h.store.BeginResync("west") // west not yet heard from, past its first-pass wait
	h.sync()
	if h.statusWrites != writes {
		t.Errorf("%d status writes while only west's first pass was outstanding, want none", h.statusWrites-writes)
	}
	if c := h.condition(mcsv1beta1.ServiceExportConditionConflict); c.Message != before.Message {
		t.Errorf("Conflict message %q, want it as it was: %q", c.Message, before.Message)
	}
	t0 := time.Now().Add(-time.Hour)
	h.store.Put(&clusterset.ExportedService{Cluster: "north", Key: webKey, ExportCreated: metav1.NewTime(t0),
		Spec: clusterset.ExportedSpec{Type: mcsv1beta1.ClusterSetIP, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080}}}})
	h.sync()
	if c := h.condition(mcsv1beta1.ServiceExportConditionConflict); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "not yet heard from west") {
		t.Errorf("Conflict %s %q, want True naming west", c.Status, c.Message)
	}
}

func TestUnitImportBlocked(t *testing.T) {
	h := newUnitHarness(t, serviceExportOf(time.Now()), service(nil))
	h.feedback.SetImportBlocked(webKey, "north", "ServiceImport ns/web in cluster north is not managed by mcs-syncer")
	h.sync()
	ready := h.condition(mcsv1beta1.ServiceExportConditionReady)
	if ready.Status != metav1.ConditionTrue || !strings.Contains(ready.Message, notImportedEverywhere+": ServiceImport ns/web in cluster north") {
		t.Errorf("Ready %s %q", ready.Status, ready.Message)
	}
	if ev := h.events(); len(ev) != 1 || !strings.Contains(ev[0], "ImportBlocked") {
		t.Errorf("events %v", ev)
	}
}

// TestUnitNotPublishedEvent: an export that can no longer be published
// gets one Warning event when its Ready turns False, none while the
// failure goes on in other words, and one again after it recovered and
// failed anew.
func TestUnitNotPublishedEvent(t *testing.T) {
	h := newUnitHarness(t, serviceExportOf(time.Now()), service(nil))
	h.sync()
	if ev := h.events(); len(ev) != 0 {
		t.Fatalf("events of a published export: %v", ev)
	}
	h.feedback.SetUnpublished(webKey, "dial tcp 127.0.0.1:6443: connect: connection refused")
	h.sync()
	if ready := h.condition(mcsv1beta1.ServiceExportConditionReady); ready.Status != metav1.ConditionFalse {
		t.Fatalf("Ready %s %q", ready.Status, ready.Message)
	}
	ev := h.events()
	if len(ev) != 1 || !strings.Contains(ev[0], "Warning "+ReasonNotPublished) || !strings.Contains(ev[0], "connection refused") {
		t.Fatalf("events %v, want one NotPublished Warning with the server's answer", ev)
	}
	h.feedback.SetUnpublished(webKey, "Unauthorized")
	h.sync()
	if ev := h.events(); len(ev) != 0 {
		t.Errorf("a new wording of the same failure raised %v", ev)
	}
	h.feedback.SetUnpublished(webKey, "")
	h.sync()
	h.feedback.SetUnpublished(webKey, "Unauthorized")
	h.sync()
	if ev := h.events(); len(ev) != 1 || !strings.Contains(ev[0], "Unauthorized") {
		t.Errorf("events %v after a recovery and a new failure, want one", ev)
	}
}

func TestUnitStatusConflictIsRetried(t *testing.T) {
	h := newUnitHarness(t, serviceExportOf(time.Now()), service(nil))
	h.statusFail = func() error {
		return apierrors.NewConflict(schema.GroupResource{Group: mcsv1beta1.GroupName, Resource: "serviceexports"}, "web", nil)
	}
	if recheck := h.sync(); recheck <= 0 {
		t.Errorf("a lost race is retried: recheck %v", recheck)
	}
	h.statusFail = func() error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "serviceexports"}, "web", nil)
	}
	if _, err := h.w.Reconcile(t.Context(), reconcile.Request{NamespacedName: webKey}); err == nil {
		t.Error("a refused status write is no error")
	}
}

func TestUnitEventMapping(t *testing.T) {
	t0 := time.Now().Truncate(time.Second)
	h := newUnitHarness(t, serviceExportOf(t0))
	ctx := t.Context()
	if reqs := ifExported(h.w, func(s *corev1.Service) types.NamespacedName { return client.ObjectKeyFromObject(s) })(ctx, service(nil)); len(reqs) != 1 || reqs[0].NamespacedName != webKey {
		t.Errorf("exported Service maps to %v", reqs)
	}
	other := service(nil)
	other.Name = "private"
	if reqs := ifExported(h.w, func(s *corev1.Service) types.NamespacedName { return client.ObjectKeyFromObject(s) })(ctx, other); len(reqs) != 0 {
		t.Errorf("a Service that is not exported maps to %v", reqs)
	}
	s := slice("web-a", t0, "10.0.0.1")
	if reqs := h.w.sliceChanged()(ctx, s); len(reqs) != 1 {
		t.Errorf("a slice of an exported Service maps to %v", reqs)
	}
	if got := h.w.triggers.upTo(webKey, t0); len(got) != 1 || !got[0].Equal(t0) {
		t.Errorf("trigger log %v, want the slice's %v", got, t0)
	}
	unlabelled := slice("x", t0, "10.0.0.9")
	delete(unlabelled.Labels, discoveryv1.LabelServiceName)
	if reqs := h.w.sliceChanged()(ctx, unlabelled); len(reqs) != 0 {
		t.Errorf("a slice without a Service maps to %v", reqs)
	}
}

// listingCache is a cache.Cache whose only working methods are those
// initialSync uses.
type listingCache struct {
	cache.Cache
	reader client.Reader
	synced bool
	lists  int
	fail   int // the first fail Lists fail
}

func (c *listingCache) WaitForCacheSync(context.Context) bool { return c.synced }

func (c *listingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.lists++
	if c.lists <= c.fail {
		return apierrors.NewServiceUnavailable("not yet")
	}
	return c.reader.List(ctx, list, opts...)
}

func TestUnitInitialSync(t *testing.T) {
	h := newUnitHarness(t, serviceExportOf(time.Now()), service(nil))
	h.store.BeginResync("east")
	c := &listingCache{reader: h.client, synced: true, fail: 1}
	h.w.initialSync(t.Context(), c)
	if !h.store.Synced("east") || h.export() == nil {
		t.Errorf("after the first pass: synced %v, export %v", h.store.Synced("east"), h.export())
	}
	if c.lists != 2 {
		t.Errorf("%d lists, want a retry after the failed one", c.lists)
	}
	if h.statusWrites != 0 {
		t.Errorf("the first pass wrote status %d times; the workers write it", h.statusWrites)
	}

	stopping := newUnitHarness(t)
	stopping.store.BeginResync("east")
	stopping.w.initialSync(t.Context(), &listingCache{reader: stopping.client, synced: false})
	if stopping.store.Synced("east") {
		t.Error("a cache that never synced marked the member synced")
	}
}

func TestUnitClearStatus(t *testing.T) {
	se := serviceExportOf(time.Now())
	se.Status.Conditions = []metav1.Condition{
		{Type: "Valid", Status: metav1.ConditionTrue, Reason: "Valid", LastTransitionTime: metav1.Now()},
		{Type: "SomeoneElses", Status: metav1.ConditionTrue, Reason: "X", LastTransitionTime: metav1.Now()},
	}
	h := newUnitHarness(t, se)
	if err := ClearStatus(t.Context(), h.client); err != nil {
		t.Fatal(err)
	}
	if got := h.conditions(); !maps.Equal(got, map[string]string{"SomeoneElses": "True/X"}) {
		t.Errorf("conditions after ClearStatus %v", got)
	}
}

// TestUnitConditionsGauge: mcs_syncer_service_exports_by_condition counts
// the member's ServiceExports by the conditions written (zeros included),
// drops a deleted one, and the member's series go when its watcher stops.
func TestUnitConditionsGauge(t *testing.T) {
	t0 := time.Now().Add(-time.Minute)
	se := serviceExportOf(t0.Add(time.Second))
	h := newUnitHarness(t, se, service(nil))
	defer h.w.conditions.stopped(h.w)
	gauge := func() string {
		var b strings.Builder
		ch := make(chan prometheus.Metric, 100)
		h.w.conditions.Collect(ch)
		close(ch)
		var rows []string
		for m := range ch {
			var out dto.Metric
			if err := m.Write(&out); err != nil {
				t.Fatal(err)
			}
			labels := map[string]string{}
			for _, l := range out.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["cluster"] == "east" && out.GetGauge().GetValue() > 0 {
				rows = append(rows, fmt.Sprintf("%s=%s:%v", labels["condition"], labels["status"], out.GetGauge().GetValue()))
			}
			if labels["cluster"] == "east" && labels["condition"] == "Conflict" && labels["status"] == "True" && out.GetGauge() != nil {
				b.WriteString("conflict-series ")
			}
		}
		slices.Sort(rows)
		return b.String() + strings.Join(rows, " ")
	}
	h.sync()
	if got := gauge(); got != "conflict-series Conflict=False:1 Ready=True:1 Valid=True:1" {
		t.Errorf("a valid export: %q", got)
	}
	h.store.Put(&clusterset.ExportedService{Cluster: "west", Key: webKey, ExportCreated: metav1.NewTime(t0),
		Spec: clusterset.ExportedSpec{Type: mcsv1beta1.ClusterSetIP, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080}}}})
	h.sync()
	if got := gauge(); got != "conflict-series Conflict=True:1 Ready=True:1 Valid=True:1" {
		t.Errorf("in conflict: %q", got)
	}
	if err := h.client.Delete(t.Context(), se); err != nil {
		t.Fatal(err)
	}
	h.sync()
	if got := gauge(); got != "conflict-series " {
		t.Errorf("deleted: %q, want zeros only", got)
	}
	h.w.conditions.stopped(h.w)
	if got := gauge(); got != "" {
		t.Errorf("stopped: %q, want no series of east", got)
	}
}
