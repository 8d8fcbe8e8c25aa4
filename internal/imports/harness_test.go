package imports

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	discoveryclient "k8s.io/client-go/kubernetes/typed/discovery/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/mcsapi"
	"github.com/mcs-syncer/mcs-syncer/internal/notify"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// The unit tests drive Reconcile against controller-runtime's fake client:
// the pure decisions of the import controller (what it writes, and when
// it writes nothing). What depends on a real API server (validation,
// defaulting, garbage collection, watches) is tested in test/e2e.

var key = types.NamespacedName{Namespace: "ns", Name: "web"}

// members is a Membership whose members are up unless down says since
// when they are not, or held says they are read through a hub that cannot
// be read; up, if it has them, says since when they are up.
type members struct {
	mu   sync.Mutex
	ids  []clusterset.ClusterID
	down map[clusterset.ClusterID]time.Time
	held map[clusterset.ClusterID]bool
	up   map[clusterset.ClusterID]time.Time
	// changes is for the controller's start (Changes); the tests that
	// change the members after it do not notify, for nothing waits then.
	changes notify.Signal
}

func (m *members) IDs() []clusterset.ClusterID { return slices.Clone(m.ids) }

func (m *members) Changes() <-chan struct{} { return m.changes.Changed() }

func (m *members) Health(id clusterset.ClusterID) clusterset.Health {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held[id] {
		return clusterset.Health{Held: true}
	}
	if since, ok := m.down[id]; ok {
		return clusterset.Health{Since: since}
	}
	return clusterset.Health{Up: slices.Contains(m.ids, id), Since: m.up[id], Answering: true}
}

// harness is one consumer ("north") with a fake API server, a Store and
// members east, west and north.
type harness struct {
	t        testing.TB
	client   client.Client
	store    *clusterset.Store
	feedback *clusterset.Feedback
	members  *members
	recorder *events.FakeRecorder
	c        *Controller

	mu     sync.Mutex
	writes []string
	// fail, if set, may fail a write (kind, verb) with an error.
	fail func(verb string, obj client.Object) error
	// ipv4Only refuses Services that ask for IPv6.
	ipv4Only bool
	nextIP   int
	// behind, when set, makes a read of a ServiceImport or Service return
	// the version the controller's first update of it replaced, as a cache
	// that has not yet heard of any update does (replaced holds them).
	behind   bool
	replaced map[string]client.Object
}

func newHarness(t testing.TB, opts Options, objs ...client.Object) *harness {
	t.Helper()
	return newHarnessOn(t, mcsapi.V1beta1, opts, objs...)
}

// newHarnessOn is newHarness with a consumer that serves version mcs of
// the MCS API.
func newHarnessOn(t testing.TB, mcs schema.GroupVersion, opts Options, objs ...client.Object) *harness {
	t.Helper()
	scheme, err := mcsapi.Scheme(mcs, clientgoscheme.AddToScheme)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, store: clusterset.NewStore(), feedback: clusterset.NewFeedback(), recorder: events.NewFakeRecorder(100),
		members: &members{ids: []clusterset.ClusterID{"east", "north", "west"}, down: map[clusterset.ClusterID]time.Time{}, held: map[clusterset.ClusterID]bool{}, up: map[clusterset.ClusterID]time.Time{}}}
	objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}})
	h.client = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&mcsv1beta1.ServiceImport{}).
		WithIndex(&discoveryv1.EndpointSlice{}, importedSliceIndex, importedSliceKey).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if err := h.write("create", obj); err != nil {
					return err
				}
				// The API server gives every object a UID; the fake client
				// does not, and the reconciler tracks slices by owner UID.
				obj.SetUID(uuid.NewUUID())
				if svc, ok := obj.(*corev1.Service); ok {
					if err := h.allocate(svc); err != nil {
						return err
					}
				}
				return c.Create(ctx, obj, opts...)
			},
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				return h.get(ctx, c, key, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if err := h.write("update", obj); err != nil {
					return err
				}
				h.keepReplaced(ctx, c, obj)
				return c.Update(ctx, obj, opts...)
			},
			Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				if err := h.write("delete", obj); err != nil {
					return err
				}
				return c.Delete(ctx, obj, opts...)
			},
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if err := h.write("update/"+sub, obj); err != nil {
					return err
				}
				h.keepReplaced(ctx, c, obj)
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		}).Build()
	opts.Consumer, opts.Store, opts.Feedback, opts.Membership = "north", h.store, h.feedback, h.members
	c, err := newController(h.client, listedSlices{h.client, shareWithStore(h.store)}, sliceWriter{h.client}, h.recorder, opts)
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	return h
}

// write records a write as "verb Kind ns/name" and lets fail refuse it.
func (h *harness) write(verb string, obj client.Object) error {
	kind := strings.TrimPrefix(fmt.Sprintf("%T", obj), "*")
	kind = kind[strings.LastIndex(kind, ".")+1:]
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail != nil {
		if err := h.fail(verb, obj); err != nil {
			return err
		}
	}
	h.writes = append(h.writes, fmt.Sprintf("%s %s %s/%s", verb, kind, obj.GetNamespace(), cmp.Or(obj.GetName(), obj.GetGenerateName())))
	return nil
}

// keepReplaced keeps the stored version of obj that its first update is
// about to replace (for behind).
func (h *harness) keepReplaced(ctx context.Context, c client.Client, obj client.Object) {
	stored, ok := obj.DeepCopyObject().(client.Object)
	if !ok || c.Get(ctx, client.ObjectKeyFromObject(obj), stored) != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.replaced == nil {
		h.replaced = map[string]client.Object{}
	}
	if k := fmt.Sprintf("%T %s", obj, client.ObjectKeyFromObject(obj)); h.replaced[k] == nil {
		h.replaced[k] = stored // the oldest: a cache that heard of none of the updates
	}
}

// get reads obj, or with behind the version it had before its first update.
func (h *harness) get(ctx context.Context, c client.Client, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	h.mu.Lock()
	old, ok := h.replaced[fmt.Sprintf("%T %s", obj, key)]
	ok = ok && h.behind
	h.mu.Unlock()
	if !ok {
		return c.Get(ctx, key, obj, opts...)
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(old.DeepCopyObject()).Elem())
	return nil
}

// allocate plays the API server's ClusterIP allocator.
func (h *harness) allocate(svc *corev1.Service) error {
	if h.ipv4Only && slices.Contains(svc.Spec.IPFamilies, corev1.IPv6Protocol) {
		return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name, field.ErrorList{
			field.Invalid(field.NewPath("spec", "ipFamilies").Index(0), "IPv6", "not configured on this cluster")})
	}
	h.nextIP++
	svc.Spec.ClusterIP = fmt.Sprintf("10.96.0.%d", h.nextIP)
	svc.Spec.ClusterIPs = []string{svc.Spec.ClusterIP}
	return nil
}

// takeWrites returns the writes since the last call, sorted.
func (h *harness) takeWrites() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.writes
	h.writes = nil
	slices.Sort(w)
	return w
}

// reconcile reconciles key once and fails the test on an error.
func (h *harness) reconcile() reconcile.Result {
	h.t.Helper()
	res, err := h.c.Reconcile(h.t.Context(), reconcile.Request{NamespacedName: key})
	if err != nil {
		h.t.Fatalf("reconcile: %v", err)
	}
	return res
}

// export is exportFrom; the Store is filled by put.
func (h *harness) export(cluster string, age int, ips ...string) *clusterset.ExportedService {
	return exportFrom(cluster, age, ips...)
}

// exportFrom is cluster's export of key: port http tcp/80, IPv4, the given
// ready endpoint IPs, created age minutes after t0.
func exportFrom(cluster string, age int, ips ...string) *clusterset.ExportedService {
	es := &clusterset.ExportedService{
		Cluster: clusterset.ClusterID(cluster), Key: key,
		ExportCreated: metav1.NewTime(t0.Add(time.Duration(age) * time.Minute)),
		Spec: clusterset.ExportedSpec{
			Type:       mcsv1beta1.ClusterSetIP,
			Ports:      []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
		},
	}
	g := reconciler.EndpointGroup{AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](80)}}}
	for _, ip := range ips {
		g.Endpoints = append(g.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	es.Endpoints = []reconciler.EndpointGroup{g}
	return es
}

// put stores exports and marks every member synced.
func (h *harness) put(exports ...*clusterset.ExportedService) {
	for _, es := range exports {
		h.store.Put(es)
	}
	h.syncAll()
}

func (h *harness) syncAll() {
	for _, id := range h.members.ids {
		current := map[types.NamespacedName]bool{}
		for _, es := range h.store.Get(key) {
			if es.Cluster == id {
				current[key] = true
			}
		}
		h.store.MarkSynced(id, current)
	}
}

func (h *harness) serviceImport() *mcsv1beta1.ServiceImport {
	h.t.Helper()
	si := &mcsv1beta1.ServiceImport{}
	if err := h.client.Get(h.t.Context(), key, si); err != nil {
		h.t.Fatalf("get ServiceImport: %v", err)
	}
	return si
}

// slicesBySource returns the imported slices' ready endpoint IPs by source.
func (h *harness) slicesBySource() map[string][]string {
	h.t.Helper()
	var list discoveryv1.EndpointSliceList
	if err := h.client.List(h.t.Context(), &list, client.InNamespace("ns")); err != nil {
		h.t.Fatal(err)
	}
	out := map[string][]string{}
	for _, s := range list.Items {
		source := s.Labels[mcsv1beta1.LabelSourceCluster]
		for _, ep := range s.Endpoints {
			out[source] = append(out[source], ep.Addresses...)
		}
		slices.Sort(out[source])
	}
	return out
}

func (h *harness) events() []string {
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

var t0 = time.Date(2026, 11, 23, 5, 0, 0, 0, time.UTC)

// sliceWriter writes slices through the controller-runtime client, for
// the reconciler (which speaks client-go's typed client).
type sliceWriter struct{ c client.Client }

func (w sliceWriter) EndpointSlices(ns string) discoveryclient.EndpointSliceInterface {
	return &nsSlices{c: w.c, ns: ns}
}

type nsSlices struct {
	discoveryclient.EndpointSliceInterface // only the methods below are used
	c                                      client.Client
	ns                                     string
}

func (s *nsSlices) Create(ctx context.Context, es *discoveryv1.EndpointSlice, _ metav1.CreateOptions) (*discoveryv1.EndpointSlice, error) {
	es = es.DeepCopy()
	es.Namespace = s.ns
	return es, s.c.Create(ctx, es)
}

func (s *nsSlices) Update(ctx context.Context, es *discoveryv1.EndpointSlice, _ metav1.UpdateOptions) (*discoveryv1.EndpointSlice, error) {
	es = es.DeepCopy()
	return es, s.c.Update(ctx, es)
}

func (s *nsSlices) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name}}
	return s.c.Delete(ctx, es, &client.DeleteOptions{Preconditions: opts.Preconditions})
}

// listedSlices lists the imported slices through the fake client, which
// indexes them by importedSliceKey: the harness's stand-in for the
// informer's index (indexedSlices), each slice through the slice cache's
// transform (shareWithStore), as the cache holds it.
type listedSlices struct {
	reader    client.Reader
	transform toolscache.TransformFunc
}

func (s listedSlices) of(ctx context.Context, key types.NamespacedName) ([]*discoveryv1.EndpointSlice, error) {
	var list discoveryv1.EndpointSliceList
	if err := s.reader.List(ctx, &list, client.InNamespace(key.Namespace), client.MatchingFields{importedSliceIndex: key.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]*discoveryv1.EndpointSlice, len(list.Items))
	for i := range list.Items {
		obj, err := s.transform(&list.Items[i])
		if err != nil {
			return nil, err
		}
		out[i] = obj.(*discoveryv1.EndpointSlice)
	}
	return out, nil
}

// importedSliceKey is byImport for the fake client, whose field indexes
// are per namespace already.
func importedSliceKey(o client.Object) []string {
	return []string{o.GetLabels()[mcsv1beta1.LabelServiceName]}
}
