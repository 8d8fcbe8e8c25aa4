package main

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/examples/internal/examplestest"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/examples/internal/run"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/reconcilertest"
)

const managedBy = "endpointslice.example.com"

func node(name, zone string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelTopologyZone: zone}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

func pod(name, ip, nodeName string, ready, terminating bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + ip), Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
	if ready {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	if terminating {
		p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	}
	return p
}

func service(name string, selector map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-svc-" + name), Labels: map[string]string{"team": "a"}},
		Spec: corev1.ServiceSpec{Selector: selector, ClusterIP: "10.96.0.1", IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http")}}},
	}
}

// start runs the controller on a fake clientset holding objs.
func start(t *testing.T, objs ...runtime.Object) *reconcilertest.Clientset {
	t.Helper()
	client := reconcilertest.NewClientset(objs...)
	examplestest.Run(t, run.Factories(client, managedBy), 2, func(s run.Setup) (run.Controller, error) { return newController(s, false) })
	return client
}

// slicesOf polls until the Service's slices satisfy ok, and returns them.
func slicesOf(t *testing.T, client *reconcilertest.Clientset, svc string, ok func([]discoveryv1.EndpointSlice) bool) []discoveryv1.EndpointSlice {
	t.Helper()
	return examplestest.WaitSlices(t, client, "ns", discoveryv1.LabelServiceName+"="+svc, ok)
}

// TestServicePodsNodes: a Service's pods become one slice with upstream's
// labels, named ports resolved, KEP-1672 conditions and zones; a pod that
// leaves the selector leaves the slice.
func TestServicePodsNodes(t *testing.T) {
	client := start(t, node("n1", "a"), node("n2", "b"), service("web", map[string]string{"app": "web"}),
		pod("p1", "10.0.0.1", "n1", true, false), pod("p2", "10.0.0.2", "n2", false, false), pod("p3", "10.0.0.3", "n2", true, true))
	got := slicesOf(t, client, "web", func(s []discoveryv1.EndpointSlice) bool { return len(s) == 1 && len(s[0].Endpoints) == 3 })
	s := got[0]
	if s.Labels[discoveryv1.LabelManagedBy] != managedBy || s.Labels["team"] != "a" || s.AddressType != discoveryv1.AddressTypeIPv4 {
		t.Errorf("labels %v, address type %s", s.Labels, s.AddressType)
	}
	if len(s.Ports) != 1 || *s.Ports[0].Port != 8080 {
		t.Errorf("ports %+v, want the named port http resolved to 8080", s.Ports)
	}
	want := map[string][3]bool{"10.0.0.1": {true, true, false}, "10.0.0.2": {false, false, false}, "10.0.0.3": {false, true, true}}
	for _, ep := range s.Endpoints {
		c := ep.Conditions
		if got := [3]bool{*c.Ready, *c.Serving, *c.Terminating}; got != want[ep.Addresses[0]] {
			t.Errorf("%s: ready/serving/terminating %v, want %v", ep.Addresses[0], got, want[ep.Addresses[0]])
		}
		if ptr.Deref(ep.Zone, "") == "" || ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" {
			t.Errorf("%s: zone %v, targetRef %+v", ep.Addresses[0], ep.Zone, ep.TargetRef)
		}
	}

	moved := pod("p1", "10.0.0.1", "n1", true, false)
	moved.Labels = map[string]string{"app": "other"}
	if _, err := client.CoreV1().Pods("ns").Update(context.Background(), moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	slicesOf(t, client, "web", func(s []discoveryv1.EndpointSlice) bool { return len(s) == 1 && len(s[0].Endpoints) == 2 })
}

// TestServicesLeftAlone: a Service without selector gets no slices from
// this controller; one without pods gets a placeholder.
func TestServicesLeftAlone(t *testing.T) {
	client := start(t, service("manual", nil), service("empty", map[string]string{"app": "none"}))
	got := slicesOf(t, client, "empty", func(s []discoveryv1.EndpointSlice) bool { return len(s) == 1 })
	if len(got[0].Endpoints) != 0 {
		t.Errorf("placeholder holds %+v", got[0].Endpoints)
	}
	if list, _ := client.DiscoveryV1().EndpointSlices("ns").List(context.Background(), metav1.ListOptions{}); len(list.Items) != 1 {
		t.Errorf("%d slices in all, want only the placeholder (none for the Service without selector)", len(list.Items))
	}
}
