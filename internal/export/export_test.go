package export_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/export"
	"github.com/mcs-syncer/mcs-syncer/internal/membership"
	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/controlplane"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/workloads"
)

// The integration tests run export watchers for two real clusters (east,
// west) of a testbed, in one manager, against one Store.
var (
	bed      *testbed.Clusterset
	store    *clusterset.Store
	members  *membership.Set
	registry = prometheus.NewRegistry()
)

// noTestbed says why there is no testbed (-short, or its binaries are
// missing); the tests that need it then skip with it.
var noTestbed string

func needTestbed(t *testing.T) {
	t.Helper()
	if noTestbed != "" {
		t.Skip(noTestbed)
	}
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		noTestbed = "-short (make unit): the export watcher's integration tests run in make test"
		return m.Run()
	}
	if os.Getenv("MCS_TOOLS_DIR") == "" {
		if _, err := host.RepoRoot(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	stateDir, err := os.MkdirTemp("", "mcs-export-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startCtx, startCancel := context.WithTimeout(ctx, 5*time.Minute)
	defer startCancel()
	bed, err = testbed.Start(startCtx, testbed.Options{Clusters: []string{"east", "west"}, StateDir: stateDir, TeardownOnExit: true})
	if errors.Is(err, testbed.ErrNoBinaries) {
		noTestbed = err.Error()
		fmt.Fprintln(os.Stderr, "SKIP: the export watcher's tests need the testbed:", noTestbed)
		return m.Run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := bed.Stop(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()

	cfg, err := membership.LoadConfig(bed.ConfigPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, err := manager.New(bed.Clusters[0].RESTConfig(), manager.Options{
		Scheme:  controlplane.Scheme(),
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	store = clusterset.NewStore()
	members, err = membership.NewSet(bed.ConfigPath, cfg, membership.Options{
		Scheme: controlplane.Scheme(), ConfigureCache: func(id clusterset.ClusterID, o *cache.Options) {
			export.ConfigureCache(o, exportedNames[id])
			watchThinning(id, o)
		}, Registerer: registry,
		RetryInterval: 250 * time.Millisecond, HealthInterval: time.Second, Changed: store.AnnounceAll,
		Engage: func(id clusterset.ClusterID, cl cluster.Cluster) ([]func(context.Context) error, error) {
			w, err := export.New(cl, export.Options{Cluster: id, Store: store, Feedback: clusterset.NewFeedback(), WriteStatus: true, Membership: members, ExportedNames: exportedNames[id]})
			if err != nil {
				return nil, err
			}
			return []func(context.Context) error{w.Start}, nil
		},
	})
	if err == nil {
		err = mgr.Add(members)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	return code
}

// exportedNames are each member's, kept across its engagements as
// mcs-syncer keeps them.
var exportedNames = map[clusterset.ClusterID]*export.ExportedNames{"east": export.NewExportedNames(), "west": export.NewExportedNames()}

// cachedSlices are the slices the members' caches received, by cluster
// and namespace/name: how many ready endpoints the API server sent, and
// whether the cache kept them (watchThinning).
var cachedSlices sync.Map

type cachedSlice struct {
	ready   int
	thinned bool
}

// thinnedServices holds, by cluster and namespace/name, whether the
// member's cache last held each Service thinned (watchThinning).
var thinnedServices sync.Map

// watchThinning wraps the EndpointSlices' and Services' transforms of
// member id's cache to note, in cachedSlices and thinnedServices, what
// each object was and became.
func watchThinning(id clusterset.ClusterID, o *cache.Options) {
	for obj, by := range o.ByObject {
		if by.Transform == nil {
			continue
		}
		transform := by.Transform
		switch obj.(type) {
		case *discoveryv1.EndpointSlice:
			by.Transform = func(in any) (any, error) {
				s, ok := in.(*discoveryv1.EndpointSlice)
				ready := 0
				if ok {
					ready = workloads.CountReady(s.Endpoints)
				}
				out, err := transform(in)
				if s, ok := out.(*discoveryv1.EndpointSlice); ok {
					_, thinned := s.Annotations[export.EndpointsDroppedAnnotation]
					cachedSlices.Store(string(id)+"/"+s.Namespace+"/"+s.Name, cachedSlice{ready: ready, thinned: thinned})
				}
				return out, err
			}
		case *corev1.Service:
			by.Transform = func(in any) (any, error) {
				out, err := transform(in)
				if s, ok := out.(*corev1.Service); ok {
					_, thinned := s.Annotations[export.SpecDroppedAnnotation]
					thinnedServices.Store(string(id)+"/"+s.Namespace+"/"+s.Name, thinned && len(s.Spec.Ports) == 0)
				}
				return out, err
			}
		default:
			continue
		}
		o.ByObject[obj] = by
	}
}

func serviceExport(ctx context.Context, t *testing.T, cl client.Client, ns string, labels map[string]string) *mcsv1beta1.ServiceExport {
	t.Helper()
	se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: mcsv1beta1.ServiceExportSpec{ExportedLabels: labels}}
	if err := cl.Create(ctx, se); err != nil {
		t.Fatal(err)
	}
	return se
}

// exportOf returns cluster's export of ns/web in the Store, or an error.
func exportOf(cluster, ns string) (*clusterset.ExportedService, error) {
	for _, es := range store.Get(types.NamespacedName{Namespace: ns, Name: "web"}) {
		if es.Cluster == clusterset.ClusterID(cluster) {
			return es, nil
		}
	}
	return nil, fmt.Errorf("no export of %s/web from %s", ns, cluster)
}

// exportReady returns a check that cluster's export of ns/web is in the
// Store with exactly n ready endpoints.
func exportReady(cluster, ns string, n int) func() error {
	return func() error {
		es, err := exportOf(cluster, ns)
		if err != nil {
			return err
		}
		if got := readyEndpoints(es); got != n {
			return fmt.Errorf("%d ready endpoints, want %d", got, n)
		}
		return nil
	}
}

// readyEndpoints counts the ready endpoints of an export.
func readyEndpoints(es *clusterset.ExportedService) int {
	n := 0
	for _, g := range es.Endpoints {
		n += workloads.CountReady(g.Endpoints)
	}
	return n
}

// condition waits until the ServiceExport ns/web in cluster has the
// condition type with status and reason, and returns it.
func condition(ctx context.Context, t *testing.T, cluster, ns string, typ mcsv1beta1.ServiceExportConditionType, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	cl := bed.ClientOf(t, cluster)
	var got metav1.Condition
	testbed.Eventually(ctx, t, fmt.Sprintf("%s: ServiceExport %s/web %s=%s/%s", cluster, ns, typ, status, reason), func() error {
		se := &mcsv1beta1.ServiceExport{}
		if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, se); err != nil {
			return err
		}
		c := meta.FindStatusCondition(se.Status.Conditions, string(typ))
		if c == nil {
			return fmt.Errorf("no %s condition in %v", typ, se.Status.Conditions)
		}
		if c.Status != status || c.Reason != reason {
			return fmt.Errorf("%s=%s/%s: %s", typ, c.Status, c.Reason, c.Message)
		}
		got = *c
		return nil
	})
	return got
}

// TestExportFollowsTheService: a Service with a Deployment and a
// ServiceExport in east is in the Store with its ports, exported labels and
// endpoints (ready, zone and node of the fake nodes); scaling follows; the
// status says Valid, Ready/Exported, no conflict.
func TestExportFollowsTheService(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	east := bed.ClientOf(t, "east")
	bed.Namespace(ctx, t, "export-follows", "east")
	d := workloads.CreateApp(ctx, t, east, "export-follows", 3, 80, false, nil)
	serviceExport(ctx, t, east, "export-follows", map[string]string{"tier": "front"})

	var es *clusterset.ExportedService
	testbed.Eventually(ctx, t, "the export with 3 ready endpoints", func() (err error) {
		if es, err = exportOf("east", "export-follows"); err != nil {
			return err
		}
		if n := readyEndpoints(es); n != 3 {
			return fmt.Errorf("%d ready endpoints", n)
		}
		return nil
	})
	if es.Spec.Type != mcsv1beta1.ClusterSetIP || len(es.Spec.Ports) != 1 || es.Spec.Ports[0].Port != 80 || es.Spec.Ports[0].Name != "http" {
		t.Errorf("spec %+v", es.Spec)
	}
	if es.LastChangeTriggerTime.IsZero() {
		t.Error("no last-change-trigger-time taken from kube-controller-manager's slices")
	}
	if es.Spec.Labels["tier"] != "front" {
		t.Errorf("exported labels %v", es.Spec.Labels)
	}
	if len(es.Endpoints) != 1 || len(es.Endpoints[0].Ports) != 1 || ptr.Deref(es.Endpoints[0].Ports[0].Port, 0) != 8080 {
		t.Errorf("endpoint groups %+v, want one with the target port 8080", es.Endpoints)
	}
	for _, ep := range es.Endpoints[0].Endpoints {
		if !slices.Contains(bed.Cluster("east").Zones, ptr.Deref(ep.Zone, "")) || ptr.Deref(ep.NodeName, "") == "" || ep.TargetRef == nil {
			t.Errorf("endpoint %v: zone %v node %v targetRef %v", ep.Addresses, ep.Zone, ep.NodeName, ep.TargetRef)
		}
		if !ptr.Deref(ep.Conditions.Serving, false) || ptr.Deref(ep.Conditions.Terminating, true) {
			t.Errorf("endpoint %v conditions %+v", ep.Addresses, ep.Conditions)
		}
	}
	condition(ctx, t, "east", "export-follows", mcsv1beta1.ServiceExportConditionValid, metav1.ConditionTrue, "Valid")
	condition(ctx, t, "east", "export-follows", mcsv1beta1.ServiceExportConditionReady, metav1.ConditionTrue, "Exported")
	condition(ctx, t, "east", "export-follows", mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionFalse, "NoConflicts")

	scaleUpTo5(ctx, t, east, d, "export-follows")
}

// TestServiceExportedLater: the cache of a member keeps neither the spec
// nor the endpoints of a Service that is not exported; exported later, the
// Service and its endpoints are read from the API server and exported, and
// the export follows changes of both.
func TestServiceExportedLater(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	east := bed.ClientOf(t, "east")
	bed.Namespace(ctx, t, "export-later", "east")
	d := workloads.CreateApp(ctx, t, east, "export-later", 3, 80, false, nil)
	testbed.Eventually(ctx, t, "east's cache to hold web's slice with 3 ready endpoints, without them", func() error {
		var list discoveryv1.EndpointSliceList
		if err := east.List(ctx, &list, client.InNamespace("export-later"), client.MatchingLabels{discoveryv1.LabelServiceName: "web"}); err != nil {
			return err
		}
		for _, s := range list.Items {
			got, _ := cachedSlices.Load("east/export-later/" + s.Name)
			if c, _ := got.(cachedSlice); c.ready == 3 && c.thinned {
				return nil
			}
		}
		return fmt.Errorf("cached: %v", cachedSliceNames("east/export-later/"))
	})
	if thinned, _ := thinnedServices.Load("east/export-later/web"); thinned != true {
		t.Fatalf("east's cache held web without its spec: %v, want true", thinned)
	}
	if _, err := exportOf("east", "export-later"); err == nil {
		t.Fatal("a Service that is not exported is in the Store")
	}

	serviceExport(ctx, t, east, "export-later", nil)
	testbed.Eventually(ctx, t, "the export with 3 ready endpoints", exportReady("east", "export-later", 3))
	if es, err := exportOf("east", "export-later"); err != nil || len(es.Spec.Ports) != 1 || es.Spec.Ports[0].Port != 80 {
		t.Fatalf("the export of a Service cached without its spec: %+v (%v), want port 80", es, err)
	}
	scaleUpTo5(ctx, t, east, d, "export-later")
	var list discoveryv1.EndpointSliceList
	if err := east.List(ctx, &list, client.InNamespace("export-later"), client.MatchingLabels{discoveryv1.LabelServiceName: "web"}); err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		if got, _ := cachedSlices.Load("east/export-later/" + s.Name); got == nil || got.(cachedSlice).thinned {
			t.Errorf("slice %s changed after the export and is still held without its endpoints: %+v", s.Name, got)
		}
	}

	// The Service changed after the export: the cache holds it whole, and
	// the export follows.
	svc := &corev1.Service{}
	if err := east.Get(ctx, types.NamespacedName{Namespace: "export-later", Name: "web"}, svc); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(svc.DeepCopy())
	svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	if err := east.Patch(ctx, svc, patch); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(ctx, t, "the export to follow the Service's session affinity", func() error {
		es, err := exportOf("east", "export-later")
		if err != nil {
			return err
		}
		if es.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
			return fmt.Errorf("session affinity %q", es.Spec.SessionAffinity)
		}
		return nil
	})
	if thinned, _ := thinnedServices.Load("east/export-later/web"); thinned != false {
		t.Errorf("web changed after the export and is still held without its spec")
	}
}

// scaleUpTo5 scales east's app d in ns to 5 and waits until the export
// follows.
func scaleUpTo5(ctx context.Context, t *testing.T, east client.Client, d *appsv1.Deployment, ns string) {
	t.Helper()
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = ptr.To[int32](5)
	if err := east.Patch(ctx, d, patch); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(ctx, t, "the export to follow the scale-up to 5", exportReady("east", ns, 5))
}

// cachedSliceNames lists what cachedSlices holds under prefix.
func cachedSliceNames(prefix string) map[string]cachedSlice {
	out := map[string]cachedSlice{}
	cachedSlices.Range(func(k, v any) bool {
		if strings.HasPrefix(k.(string), prefix) {
			out[k.(string)] = v.(cachedSlice)
		}
		return true
	})
	return out
}

// TestReservedKeysRefused: reserved keys in exportedLabels and
// exportedAnnotations (multicluster.kubernetes.io/*, mcs-syncer.io/*, ...,
// and the label app.kubernetes.io/managed-by) never reach the import; the
// rest of the export does, and Valid says which keys were refused.
func TestReservedKeysRefused(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	east := bed.ClientOf(t, "east")
	bed.Namespace(ctx, t, "export-reserved", "east")
	workloads.CreateApp(ctx, t, east, "export-reserved", 1, 80, false, nil)
	se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "export-reserved"}, Spec: mcsv1beta1.ServiceExportSpec{
		ExportedLabels:      map[string]string{"tier": "front", "multicluster.kubernetes.io/service-name": "other", "app.kubernetes.io/managed-by": "helm"},
		ExportedAnnotations: map[string]string{"note": "ok", "mcs-syncer.io/owner": "me", "endpointslice.kubernetes.io/managed-by": "x", "app.kubernetes.io/managed-by": "helm"},
	}}
	if err := east.Create(ctx, se); err != nil {
		t.Fatal(err)
	}
	c := condition(ctx, t, "east", "export-reserved", mcsv1beta1.ServiceExportConditionValid, metav1.ConditionTrue, "ReservedKeysRefused")
	for _, want := range []string{"exportedLabels app.kubernetes.io/managed-by, multicluster.kubernetes.io/service-name", "exportedAnnotations endpointslice.kubernetes.io/managed-by, mcs-syncer.io/owner"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("Valid's message %q does not say %q", c.Message, want)
		}
	}
	condition(ctx, t, "east", "export-reserved", mcsv1beta1.ServiceExportConditionReady, metav1.ConditionTrue, "Exported")
	es, err := exportOf("east", "export-reserved")
	if err != nil {
		t.Fatal(err)
	}
	// The managed-by label is mcs-syncer's own on a ServiceImport; as an
	// annotation it is the exporter's to give.
	if !maps.Equal(es.Spec.Labels, map[string]string{"tier": "front"}) || !maps.Equal(es.Spec.Annotations, map[string]string{"note": "ok", "app.kubernetes.io/managed-by": "helm"}) {
		t.Errorf("exported labels %v, annotations %v: want the unreserved ones only", es.Spec.Labels, es.Spec.Annotations)
	}
}

// TestTerminatingPodIsExportedAsTerminating: a pod that is being deleted
// (held by a finalizer) is exported with terminating=true and ready=false,
// as kube-controller-manager's slice says.
func TestTerminatingPodIsExportedAsTerminating(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	east := bed.ClientOf(t, "east")
	ns := "export-terminating"
	bed.Namespace(ctx, t, ns, "east")
	workloads.CreateApp(ctx, t, east, ns, 0, 80, false, nil)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "held", Namespace: ns, Labels: map[string]string{"app": "web"}, Finalizers: []string{"mcs-syncer.test/hold"}},
		Spec:       workloads.Deployment(ns, "web", 1).Spec.Template.Spec,
	}
	if err := east.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p := &corev1.Pod{}
		if east.Get(context.Background(), client.ObjectKeyFromObject(pod), p) == nil {
			p.Finalizers = nil
			_ = east.Update(context.Background(), p)
		}
	})
	serviceExport(ctx, t, east, ns, nil)
	testbed.Eventually(ctx, t, "the pod exported as ready", exportReady("east", ns, 1))
	if err := east.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(ctx, t, "the pod exported as terminating", func() error {
		es, err := exportOf("east", ns)
		if err != nil {
			return err
		}
		if len(es.Endpoints) != 1 || len(es.Endpoints[0].Endpoints) != 1 {
			return fmt.Errorf("endpoints %+v, want the one held pod", es.Endpoints)
		}
		c := es.Endpoints[0].Endpoints[0].Conditions
		if !ptr.Deref(c.Terminating, false) || ptr.Deref(c.Ready, true) {
			return fmt.Errorf("conditions ready=%v serving=%v terminating=%v", ptr.Deref(c.Ready, false), ptr.Deref(c.Serving, false), ptr.Deref(c.Terminating, false))
		}
		return nil
	})
}

// TestExternalNameIsNotExported: an ExternalName Service cannot be
// exported: Valid=False/InvalidServiceType, nothing in the Store.
func TestExternalNameIsNotExported(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	east := bed.ClientOf(t, "east")
	ns := "export-externalname"
	bed.Namespace(ctx, t, ns, "east")
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"},
	}
	if err := east.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	serviceExport(ctx, t, east, ns, nil)
	c := condition(ctx, t, "east", ns, mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse, "InvalidServiceType")
	if !strings.Contains(c.Message, "ExternalName") {
		t.Errorf("message %q does not say why", c.Message)
	}
	condition(ctx, t, "east", ns, mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse, "Pending")
	if _, err := exportOf("east", ns); err == nil {
		t.Error("an ExternalName Service is in the Store")
	}
}

// TestDeletedServiceIsWithdrawn: deleting the Service withdraws the export
// and sets Valid=False/NoService.
func TestDeletedServiceIsWithdrawn(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	east := bed.ClientOf(t, "east")
	ns := "export-withdrawn"
	bed.Namespace(ctx, t, ns, "east")
	workloads.CreateApp(ctx, t, east, ns, 1, 80, false, nil)
	serviceExport(ctx, t, east, ns, nil)
	testbed.Eventually(ctx, t, "the export", func() error { _, err := exportOf("east", ns); return err })

	if err := east.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	c := condition(ctx, t, "east", ns, mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse, "NoService")
	if !strings.Contains(c.Message, ns+"/web") {
		t.Errorf("message %q does not name the Service", c.Message)
	}
	if _, err := exportOf("east", ns); err == nil {
		t.Error("the export of a deleted Service is still in the Store")
	}

	// Deleting the ServiceExport withdraws too (and needs no status).
	if err := east.Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// TestPortConflictAcrossClusters: the same Service exported from west
// (first) and east (later) with different ports: Conflict=True/PortConflict
// on both exports, and the merge keeps west's port, the older one, although
// east sorts first by ID.
func TestPortConflictAcrossClusters(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := "export-conflict"
	bed.Namespace(ctx, t, ns, "east", "west")
	east, west := bed.ClientOf(t, "east"), bed.ClientOf(t, "west")
	workloads.CreateApp(ctx, t, west, ns, 1, 80, false, nil)
	workloads.CreateApp(ctx, t, east, ns, 1, 8080, false, nil)
	older := serviceExport(ctx, t, west, ns, nil)
	// creationTimestamp has a resolution of one second: wait until the
	// clock has passed it, so east's export is strictly younger.
	testbed.Eventually(ctx, t, "the next second", func() error {
		if !time.Now().After(older.CreationTimestamp.Add(time.Second)) {
			return fmt.Errorf("still within %s", older.CreationTimestamp)
		}
		return nil
	})
	serviceExport(ctx, t, east, ns, nil)

	for _, cluster := range []string{"east", "west"} {
		c := condition(ctx, t, cluster, ns, mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionTrue, "PortConflict")
		if !strings.Contains(c.Message, "from west (oldest export)") || !strings.Contains(c.Message, `east has "http" tcp/8080, west has "http" tcp/80`) {
			t.Errorf("%s: message %q does not name the field, the values and the winner", cluster, c.Message)
		}
	}
	merged := clusterset.Merge(store.Get(types.NamespacedName{Namespace: ns, Name: "web"}))
	if merged.Oldest != "west" || len(merged.Spec.Ports) != 1 || merged.Spec.Ports[0].Port != 80 {
		t.Errorf("merged: oldest %s, ports %v; want west's port 80", merged.Oldest, merged.Spec.Ports)
	}

	// Aligning east's port ends the conflict on both.
	svc := &corev1.Service{}
	if err := east.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, svc); err != nil {
		t.Fatal(err)
	}
	svc.Spec.Ports[0].Port = 80
	if err := east.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	for _, cluster := range []string{"east", "west"} {
		condition(ctx, t, cluster, ns, mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionFalse, "NoConflicts")
	}
}

// TestImportedSlicesAreNeverExported: a slice that carries the
// multicluster service-name label (an import) is not exported, even with
// the Service's name label.
func TestImportedSlicesAreNeverExported(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	east := bed.ClientOf(t, "east")
	ns := "export-loop"
	bed.Namespace(ctx, t, ns, "east")
	workloads.CreateApp(ctx, t, east, ns, 1, 80, false, nil)
	imported := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "web-imported", Namespace: ns, Labels: map[string]string{
			discoveryv1.LabelServiceName:  "web",
			mcsv1beta1.LabelServiceName:   "web",
			mcsv1beta1.LabelSourceCluster: "west",
			discoveryv1.LabelManagedBy:    "mcs",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.101.9.9"}}},
	}
	if err := east.Create(ctx, imported); err != nil {
		t.Fatal(err)
	}
	serviceExport(ctx, t, east, ns, nil)
	testbed.Eventually(ctx, t, "the export with its own pod", exportReady("east", ns, 1))
	es, _ := exportOf("east", ns)
	for _, g := range es.Endpoints {
		for _, ep := range g.Endpoints {
			if slices.Contains(ep.Addresses, "10.101.9.9") {
				t.Error("an imported endpoint was exported")
			}
		}
	}
}

// TestFirstStartKeepsExportedServicesWhole: a new cache with no names
// known yet (a process's first start) keeps the Service and slices of an
// exported Service whole: the watcher lists the member's ServiceExports
// before the cache starts. Its informers list them all at once, and the
// Services and slices were transformed before the ServiceExports were
// noted, so the first pass read every export's from the API server.
func TestFirstStartKeepsExportedServicesWhole(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := "first-start"
	exportTwoEndpoints(ctx, t, "east", ns)

	// A cache of its own, as a process's first: names of its own, and
	// its transforms noted under another cluster's name.
	const first = "east-first-start"
	names := export.NewExportedNames()
	cl, err := cluster.New(bed.Cluster("east").RESTConfig(), func(o *cluster.Options) {
		o.Scheme = controlplane.Scheme()
		export.ConfigureCache(&o.Cache, names)
		exportsNotedAfter(&o.Cache, ns)
		watchThinning(first, &o.Cache)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := export.New(cl, export.Options{Cluster: first, Store: clusterset.NewStore(), Membership: members, ExportedNames: names}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cl.Start(ctx) }()
	if !cl.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}
	wantCachedWhole(t, first+"/"+ns+"/")
}

// exportTwoEndpoints exports web, a Service of two ready Pods, from
// cluster's new namespace ns, and waits for its export in the Store.
func exportTwoEndpoints(ctx context.Context, t *testing.T, cluster, ns string) {
	t.Helper()
	cl := bed.ClientOf(t, cluster)
	bed.Namespace(ctx, t, ns, cluster)
	workloads.CreateApp(ctx, t, cl, ns, 2, 80, false, nil)
	serviceExport(ctx, t, cl, ns, nil)
	testbed.Eventually(ctx, t, cluster+"'s export with 2 ready endpoints", exportReady(cluster, ns, 2))
}

// exportsNotedAfter makes the cache of o take in its ServiceExports only
// once it took in the Service ns/web (or 30 s passed): the order that a
// first start's informers took most often, made certain.
func exportsNotedAfter(o *cache.Options, ns string) {
	serviceSeen := make(chan struct{})
	var once sync.Once
	for obj, by := range o.ByObject {
		transform := by.Transform
		switch obj.(type) {
		case *corev1.Service:
			by.Transform = func(in any) (any, error) {
				out, err := transform(in)
				if svc, ok := in.(*corev1.Service); ok && svc.Namespace == ns && svc.Name == "web" {
					once.Do(func() { close(serviceSeen) })
				}
				return out, err
			}
		case *mcsv1beta1.ServiceExport:
			by.Transform = func(in any) (any, error) {
				select {
				case <-serviceSeen:
				case <-time.After(30 * time.Second):
				}
				return transform(in)
			}
		default:
			continue
		}
		o.ByObject[obj] = by
	}
}

// wantCachedWhole fails t unless the cache of prefix (cluster/namespace/)
// last held the Service web and at least one slice, none of them thinned.
func wantCachedWhole(t *testing.T, prefix string) {
	t.Helper()
	if err := cachedWhole(prefix); err != nil {
		t.Error(err)
	}
}

// cachedWhole says what of prefix's Service web and slices a cache did not
// hold whole (watchThinning), nil when it held them all whole.
func cachedWhole(prefix string) error {
	thinned, ok := thinnedServices.Load(prefix + "web")
	if !ok {
		return errors.New("the Service not cached yet")
	}
	if thinned.(bool) {
		return errors.New("the Service cached thinned")
	}
	slices := 0
	var err error
	cachedSlices.Range(func(k, v any) bool {
		if strings.HasPrefix(k.(string), prefix) {
			slices++
			if v.(cachedSlice).thinned {
				err = fmt.Errorf("slice %s cached thinned", k)
			}
		}
		return err == nil
	})
	if err == nil && slices == 0 {
		err = errors.New("no slice cached yet")
	}
	return err
}

// TestMemberConnectionFollowsTheAPIServer: a member whose kube-apiserver
// goes away is reported disconnected (state and metric) once its watches
// fail, and connected again once it is back; the cache it is read through
// then keeps the Service and slices of what it exported before whole (a
// cache that thinned them made the member's first pass read each from
// the API server: make bench-e2e's member return took 8-14 s at 1,000
// exports). Runs last: it takes west down for a while.
func TestMemberConnectionFollowsTheAPIServer(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	testbed.Eventually(ctx, t, "west connected", func() error { return wantConnected("west", true) })
	ns := "member-return"
	exportTwoEndpoints(ctx, t, "west", ns)
	before := members.Health("west").Since

	west := bed.Cluster("west")
	if err := west.StopAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(ctx, t, "west disconnected", func() error { return wantConnected("west", false) })
	if err := wantConnected("east", true); err != nil {
		t.Errorf("east: %v", err)
	}
	if since := members.Health("west").Since; !since.After(before) {
		t.Errorf("down since %s, not after %s", since, before)
	}

	// What the next cache makes of them, from here on.
	prefix := "west/" + ns + "/"
	for _, m := range []*sync.Map{&cachedSlices, &thinnedServices} {
		m.Range(func(k, _ any) bool {
			if strings.HasPrefix(k.(string), prefix) {
				m.Delete(k)
			}
			return true
		})
	}
	if err := west.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(ctx, t, "west connected again", func() error { return wantConnected("west", true) })
	testbed.Eventually(ctx, t, "the new cache's Service and slices of the export, whole", func() error { return cachedWhole(prefix) })
	testbed.Eventually(ctx, t, "west's export back, with 2 ready endpoints", exportReady("west", ns, 2))
}

// wantConnected checks a member's state and its mcs_syncer_member_connected
// gauge.
func wantConnected(cluster string, want bool) error {
	if got := members.Health(clusterset.ClusterID(cluster)).Up; got != want {
		return fmt.Errorf("%s: connected=%v", cluster, got)
	}
	families, err := registry.Gather()
	if err != nil {
		return err
	}
	wantValue := 0.0
	if want {
		wantValue = 1
	}
	for _, f := range families {
		if f.GetName() != "mcs_syncer_member_connected" {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelValue(m, "cluster") == cluster {
				if v := m.GetGauge().GetValue(); v != wantValue {
					return fmt.Errorf("%s: gauge %v", cluster, v)
				}
				return nil
			}
		}
	}
	return fmt.Errorf("no mcs_syncer_member_connected for %s", cluster)
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
