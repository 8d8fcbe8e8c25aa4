// Command bench measures pkg/reconciler against the Kubernetes EndpointSlice
// reconciler (k8s.io/endpointslice, the library kube-controller-manager
// uses) on the same inputs, in one run, and prints a table: time and
// allocations per reconcile, EndpointSlice writes, and the ratios.
//
// Both reconcile a Service and its Pods from the same existing slices (those
// each left after reconciling the scenario's starting pods into a storing
// fake clientset). The time measured is the reconcile call alone (for ours:
// DesiredFromServicePods + Reconcile), against a fake clientset that counts
// writes and stores nothing (see countingClient). It lives in a module of its own so that
// k8s.io/endpointslice never enters mcs-syncer's module graph.
//
//	go run . [-benchtime 1s]      (or: make bench)
package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	upstream "k8s.io/endpointslice"
	upstreamutil "k8s.io/endpointslice/util"
	"k8s.io/klog/v2"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/reconcilertest"
)

const managedBy = "endpointslice-controller.k8s.io"

// scenario: reconcile `after` over the slices that reconciling `before`
// left (none if before is nil).
type scenario struct {
	name          string
	svc           *corev1.Service // service for `after`; beforeSvc for `before` if set
	beforeSvc     *corev1.Service
	before, after []*corev1.Pod
}

// impl is one reconciler under test.
type impl interface {
	reconcile(client kubernetes.Interface, svc *corev1.Service, pods []*corev1.Pod, existing []*discoveryv1.EndpointSlice) error
}

func main() {
	testing.Init()
	_ = flag.Set("test.benchtime", "1s")
	flag.Parse()
	klog.SetOutput(discard{})
	klog.LogToStderr(false)

	nodes := nodeLister()
	impls := []struct {
		name string
		new  func() impl
	}{
		{"ours", func() impl { return newOurs() }},
		{"upstream", func() impl { return newUpstream(nodes) }},
	}

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\tours ms/op\tupstream ms/op\ttime ratio\tours allocs/op\tupstream allocs/op\tallocs ratio\tours writes\tupstream writes\t")
	for _, sc := range scenarios() {
		var res [2]testing.BenchmarkResult
		var wr [2]string
		for i, im := range impls {
			existing, err := settle(im.new(), sc)
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s %s: %v\n", sc.name, im.name, err)
				os.Exit(1)
			}
			var lastWrites map[string]int
			var failure error
			res[i] = testing.Benchmark(func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					client, writes := countingClient()
					r := im.new()
					b.StartTimer()
					if err := r.reconcile(client, sc.svc, sc.after, existing); err != nil {
						failure = err
						b.SkipNow()
					}
					lastWrites = writes

				}
			})
			if failure != nil {
				fmt.Fprintf(os.Stderr, "%s %s: %v\n", sc.name, im.name, failure)
				os.Exit(1)
			}
			wr[i] = formatWrites(lastWrites)
		}
		ms := func(r testing.BenchmarkResult) float64 { return float64(r.NsPerOp()) / 1e6 }
		fmt.Fprintf(w, "%s\t%.2f\t%.2f\t%.2fx\t%d\t%d\t%.2fx\t%s\t%s\t\n", sc.name,
			ms(res[0]), ms(res[1]), ms(res[0])/ms(res[1]),
			res[0].AllocsPerOp(), res[1].AllocsPerOp(), float64(res[0].AllocsPerOp())/float64(res[1].AllocsPerOp()),
			wr[0], wr[1])
	}
	w.Flush()
}

func scenarios() []scenario {
	svc := service(intstr.FromString("http"))
	p10k := pods(10000, 0, "http", 8080)
	var out []scenario
	for _, n := range []int{100, 1000, 10000} {
		out = append(out, scenario{name: fmt.Sprintf("create %d", n), svc: svc, after: pods(n, 0, "http", 8080)})
	}
	// 1% churn: 100 pods replaced by 100 new ones.
	churn := append(append([]*corev1.Pod{}, p10k[100:]...), pods(100, 10000, "http", 8080)...)
	out = append(out, scenario{name: "churn 1% of 10000", svc: svc, before: p10k, after: churn})
	// Readiness flip of 10%.
	flipped := make([]*corev1.Pod, len(p10k))
	for i, p := range p10k {
		flipped[i] = p
		if i%10 == 0 {
			q := p.DeepCopy()
			q.Status.Conditions[0].Status = corev1.ConditionFalse
			flipped[i] = q
		}
	}
	out = append(out, scenario{name: "readiness flip 10% of 10000", svc: svc, before: p10k, after: flipped})
	p12k := pods(12000, 0, "http", 8080)
	out = append(out,
		scenario{name: "scale 10000 -> 12000", svc: svc, before: p10k, after: p12k},
		scenario{name: "scale 12000 -> 10000", svc: svc, before: p12k, after: p10k})
	// Port change: the Service's target port moves from 8080 to 9090.
	out = append(out, scenario{name: "port change on 10000", beforeSvc: svc, svc: service(intstr.FromInt32(9090)), before: p10k, after: p10k})
	return out
}

// settle returns the slices that reconciling the scenario's `before` pods
// leaves in the API.
func settle(r impl, sc scenario) ([]*discoveryv1.EndpointSlice, error) {
	if sc.before == nil {
		return nil, nil
	}
	svc := sc.svc
	if sc.beforeSvc != nil {
		svc = sc.beforeSvc
	}
	client := reconcilertest.NewClientset()
	if err := r.reconcile(client, svc, sc.before, nil); err != nil {
		return nil, err
	}
	list, err := client.DiscoveryV1().EndpointSlices(svc.Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out, nil
}

type ours struct{ tracker *reconciler.Tracker }

func newOurs() *ours { return &ours{tracker: reconciler.NewTracker()} }

func (o *ours) reconcile(client kubernetes.Interface, svc *corev1.Service, pods []*corev1.Pod, existing []*discoveryv1.EndpointSlice) error {
	r, err := reconciler.New(client.DiscoveryV1(), managedBy, reconciler.WithPlaceholder(true), reconciler.WithOwnershipEnforced(true),
		reconciler.WithTrafficDistribution(true), reconciler.WithTracker(o.tracker))
	if err != nil {
		return err
	}
	desired, types, err := reconciler.DesiredFromServicePods(svc, pods, nodeGetter{})
	if err != nil {
		return err
	}
	return r.Reconcile(context.Background(), reconciler.Input{
		Owner: svc, OwnerGVK: corev1.SchemeGroupVersion.WithKind("Service"),
		Desired: desired, AddressTypes: types, Existing: existing,
		TrafficDistribution: svc.Spec.TrafficDistribution,
		Labeler:             reconciler.ServiceLabels{Service: svc},
		TriggerTime:         time.Unix(1, 0),
	})
}

type upstreamImpl struct{ nodes corelisters.NodeLister }

func newUpstream(nodes corelisters.NodeLister) *upstreamImpl { return &upstreamImpl{nodes: nodes} }

func (u *upstreamImpl) reconcile(client kubernetes.Interface, svc *corev1.Service, pods []*corev1.Pod, existing []*discoveryv1.EndpointSlice) error {
	r := upstream.NewReconciler(client, u.nodes, 100, upstreamutil.NewEndpointSliceTracker(), nil, record.NewFakeRecorder(100), managedBy)
	return r.Reconcile(klog.Background(), svc, pods, existing, time.Unix(1, 0))
}

func service(target intstr.IntOrString) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "bench", UID: "svc-uid", Labels: map[string]string{"app": "web"}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"}, ClusterIP: "10.96.0.10",
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports:      []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: target, Protocol: corev1.ProtocolTCP}},
		},
	}
}

// pods returns n Ready pods numbered from first, spread over 10 nodes.
func pods(n, first int, portName string, port int32) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, n)
	for i := first; i < first+n; i++ {
		ip := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String()
		out = append(out, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: "bench", UID: types.UID(fmt.Sprintf("pod-%d", i)), ResourceVersion: "1"},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%d", i%10), Containers: []corev1.Container{{
				Name: "app", Ports: []corev1.ContainerPort{{Name: portName, ContainerPort: port, Protocol: corev1.ProtocolTCP}},
			}}},
			Status: corev1.PodStatus{
				Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			},
		})
	}
	return out
}

func node(i int) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i), Labels: map[string]string{corev1.LabelTopologyZone: fmt.Sprintf("zone-%d", i%3)}}}
}

func nodeLister() corelisters.NodeLister {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for i := range 10 {
		_ = indexer.Add(node(i))
	}
	return corelisters.NewNodeLister(indexer)
}

// nodeGetter serves the same nodes as nodeLister without a cache lookup's
// locking, which is not what is being measured.
type nodeGetter struct{}

var nodesByName = func() map[string]*corev1.Node {
	m := map[string]*corev1.Node{}
	for i := range 10 {
		m[fmt.Sprintf("node-%d", i)] = node(i)
	}
	return m
}()

func (nodeGetter) Get(name string) (*corev1.Node, error) { return nodesByName[name], nil }

// countingClient returns a fake clientset that answers EndpointSlice
// writes without storing anything (creates get a name, as from the API
// server), and the count of writes by verb. The reconcilers are timed on
// it, so that the fake API's own bookkeeping (deep copies, scheme lookups:
// most of the time otherwise) does not drown the difference between them.
func countingClient() (*fake.Clientset, map[string]int) {
	client := fake.NewClientset()
	counts := map[string]int{}
	n := 0
	client.PrependReactor("*", "endpointslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
		counts[action.GetVerb()]++
		switch action.GetVerb() {
		case "create":
			s := action.(k8stesting.CreateAction).GetObject().(*discoveryv1.EndpointSlice)
			n++
			s.Name = fmt.Sprintf("%s%05d", s.GenerateName, n)
			return true, s, nil
		case "update":
			return true, action.(k8stesting.UpdateAction).GetObject(), nil
		}
		return true, nil, nil
	})
	return client, counts
}

func formatWrites(w map[string]int) string {
	var parts []string
	for _, verb := range []string{"create", "update", "delete"} {
		if w[verb] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", w[verb], verb[:1]))
		}
	}
	total := w["create"] + w["update"] + w["delete"]
	if len(parts) == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", total, strings.Join(parts, " "))
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
