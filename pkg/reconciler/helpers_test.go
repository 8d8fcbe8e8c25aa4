package reconciler

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/reconcilertest"
)

var serviceGVK = schema.GroupVersionKind{Version: "v1", Kind: "Service"}

// listSlices returns the slices the fake API server holds, by name.
func listSlices(t *testing.T, client *reconcilertest.Clientset, ns string) []*discoveryv1.EndpointSlice {
	t.Helper()
	held, err := client.Slices(context.Background(), ns)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(held))
	for i := range held {
		out = append(out, &held[i])
	}
	return out
}

// writes counts the EndpointSlice writes the client saw, by verb.
func writes(client *reconcilertest.Clientset) map[string]int {
	counts := map[string]int{}
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "endpointslices" && a.GetVerb() != "list" && a.GetVerb() != "get" && a.GetVerb() != "watch" {
			counts[a.GetVerb()]++
		}
	}
	return counts
}

func sliceSizes(slices []*discoveryv1.EndpointSlice) []int {
	sizes := make([]int, 0, len(slices))
	for _, s := range slices {
		sizes = append(sizes, len(s.Endpoints))
	}
	return sizes
}

func newReconciler(t *testing.T, client *reconcilertest.Clientset, opts ...Option) *Reconciler {
	t.Helper()
	r, err := New(client.DiscoveryV1(), "test-controller", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// service returns a Service "svc" in namespace "ns" with one TCP port 80
// named "http" targeting 8080, IPv4.
func service() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns", UID: "svc-uid", Labels: map[string]string{"app": "web"}},
		Spec: corev1.ServiceSpec{
			Selector:   map[string]string{"app": "web"},
			ClusterIP:  "10.96.0.10",
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports:      []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// readyPods returns n Ready pods on node "node-1" with IPs 10.0.x.y.
func readyPods(n int) []*corev1.Pod {
	pods := make([]*corev1.Pod, 0, n)
	for i := range n {
		pods = append(pods, pod(fmt.Sprintf("pod-%d", i), podIP(i), true))
	}
	return pods
}

func podIP(i int) string {
	return netip.AddrFrom4([4]byte{10, 0, byte(i / 250), byte(1 + i%250)}).String()
}

func pod(name, ip string, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name + "-uid"), Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			NodeName:   "node-1",
			Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			PodIP:      ip,
			PodIPs:     []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}},
		},
	}
}

// nodeMap is a NodeGetter over a fixed set of nodes.
type nodeMap map[string]*corev1.Node

func (m nodeMap) Get(name string) (*corev1.Node, error) {
	if n, ok := m[name]; ok {
		return n, nil
	}
	return nil, notFound(name)
}

func nodes(zoneByNode map[string]string) nodeMap {
	m := nodeMap{}
	for name, zone := range zoneByNode {
		m[name] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelTopologyZone: zone}}}
	}
	return m
}

var defaultNodes = nodes(map[string]string{"node-1": "zone-a", "node-2": "zone-b"})

// serviceInput builds the Input for a Service and its pods, with the
// existing slices the fake API server holds.
func serviceInput(t *testing.T, client *reconcilertest.Clientset, svc *corev1.Service, pods []*corev1.Pod) Input {
	t.Helper()
	desired, types, err := DesiredFromServicePods(svc, pods, defaultNodes)
	if err != nil {
		t.Fatal(err)
	}
	return Input{
		Owner: svc, OwnerGVK: serviceGVK,
		Desired: desired, AddressTypes: types,
		Existing:            listSlices(t, client, svc.Namespace),
		TrafficDistribution: svc.Spec.TrafficDistribution,
		Labeler:             ServiceLabels{Service: svc},
	}
}

// reconcileService reconciles svc with pods and fails the test on error.
func reconcileService(t *testing.T, r *Reconciler, client *reconcilertest.Clientset, svc *corev1.Service, pods []*corev1.Pod) {
	t.Helper()
	if err := r.Reconcile(context.Background(), serviceInput(t, client, svc, pods)); err != nil {
		t.Fatal(err)
	}
}

// assertIdempotent checks that planning again over what the API server
// holds writes nothing.
func assertIdempotent(t *testing.T, r *Reconciler, client *reconcilertest.Clientset, svc *corev1.Service, pods []*corev1.Pod) {
	t.Helper()
	plan, err := r.Plan(serviceInput(t, client, svc, pods))
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Empty() {
		t.Errorf("second plan is not empty: %s", plan)
	}
}

// existingSlice returns a slice of svc as the API server would hold it,
// with the given endpoints of pods, managed by test-controller.
func existingSlice(name string, svc *corev1.Service, ports []discoveryv1.EndpointPort, eps []discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	labels, _ := ServiceLabels{Service: svc}.SliceMetadata()
	labels[discoveryv1.LabelManagedBy] = "test-controller"
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: svc.Namespace, UID: types.UID(name + "-uid"), Generation: 1, ResourceVersion: "1",
			Labels:          labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(svc, serviceGVK)},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       ports,
		Endpoints:   eps,
	}
}

// podEndpoints returns the desired endpoints of pods for service().
func podEndpoints(t *testing.T, svc *corev1.Service, pods []*corev1.Pod) ([]discoveryv1.EndpointPort, []discoveryv1.Endpoint) {
	t.Helper()
	groups, _, err := DesiredFromServicePods(svc, pods, defaultNodes)
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != 1 {
		t.Fatalf("%d groups, want 1", len(groups))
	}
	return groups[0].Ports, groups[0].Endpoints
}

func seed(t *testing.T, client *reconcilertest.Clientset, slices ...*discoveryv1.EndpointSlice) {
	t.Helper()
	for _, s := range slices {
		if err := client.Tracker().Add(s); err != nil {
			t.Fatal(err)
		}
	}
	client.ClearActions()
}

func notFound(node string) error {
	return apierrors.NewNotFound(corev1.Resource("nodes"), node)
}
