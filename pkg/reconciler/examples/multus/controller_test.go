package main

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/examples/internal/examplestest"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/examples/internal/run"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/reconcilertest"
)

const managedBy = "multus-endpointslice.example.com"

func pod(name, podIP, status string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app": "db"},
			Annotations: map[string]string{networkStatus: status}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db",
			Ports: []corev1.ContainerPort{{Name: "sql", ContainerPort: 5432, Protocol: corev1.ProtocolTCP}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: podIP, PodIPs: []corev1.PodIP{{IP: podIP}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

func service(name string, annotations map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Annotations: annotations},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "db"}, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []corev1.ServicePort{{Name: "sql", Port: 5432, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("sql")}}},
	}
}

// TestServiceOnSecondaryNetwork: a Service on network net1 gets a slice of
// its pods' net1 addresses (named port resolved, ready); pods without net1
// or with a broken network-status are left out, a Service without the
// annotation gets nothing, a slice deleted by someone else comes back, and
// a Service that loses the annotation loses its slices.
func TestServiceOnSecondaryNetwork(t *testing.T) {
	onNet1 := `[{"name":"cbr0","ips":["10.0.0.1"],"default":true},{"name":"ns/net1","interface":"net1","ips":["192.168.1.1"]}]`
	client := reconcilertest.NewClientset(service("db", map[string]string{serviceNetwork: "net1"}), service("plain", nil),
		pod("p1", "10.0.0.1", onNet1), pod("p2", "10.0.0.2", `[{"name":"cbr0","ips":["10.0.0.2"]}]`), pod("p3", "10.0.0.3", `{broken`))
	ctx := examplestest.Run(t, run.Factories(client, managedBy), 1, func(s run.Setup) (run.Controller, error) { return newController(s) })

	got := waitSlices(t, client, func(s []discoveryv1.EndpointSlice) bool { return len(s) == 1 })
	s := got[0]
	if s.Labels[discoveryv1.LabelServiceName] != "db" || s.Labels[discoveryv1.LabelManagedBy] != managedBy {
		t.Errorf("labels %v, want the Service db's slice under %s", s.Labels, managedBy)
	}
	if len(s.Endpoints) != 1 || s.Endpoints[0].Addresses[0] != "192.168.1.1" || !ptr.Deref(s.Endpoints[0].Conditions.Ready, false) ||
		s.Endpoints[0].TargetRef == nil || s.Endpoints[0].TargetRef.Name != "p1" {
		t.Errorf("endpoints %+v, want p1's net1 address, ready", s.Endpoints)
	}
	if len(s.Ports) != 1 || ptr.Deref(s.Ports[0].Port, 0) != 5432 {
		t.Errorf("ports %+v, want sql resolved to 5432", s.Ports)
	}

	if err := client.DiscoveryV1().EndpointSlices("ns").Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSlices(t, client, func(got []discoveryv1.EndpointSlice) bool { return len(got) == 1 && got[0].Name != s.Name }) // someone deleted it

	if _, err := client.CoreV1().Services("ns").Update(ctx, service("db", nil), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSlices(t, client, func(s []discoveryv1.EndpointSlice) bool { return len(s) == 0 })
}

// TestOnNetwork: the network-status entry is found by namespaced name, all
// its addresses become the pod's, and no entry or a broken annotation
// gives none.
func TestOnNetwork(t *testing.T) {
	p := pod("p", "10.0.0.1", `[{"name":"ns/net1","ips":["192.168.1.1","fd00::1"]},{"name":"other/net2","ips":["172.16.0.1"]}]`)
	for _, tc := range []struct {
		network string
		want    []string
	}{
		{"net1", []string{"192.168.1.1", "fd00::1"}},
		{"ns/net1", []string{"192.168.1.1", "fd00::1"}},
		{"other/net2", []string{"172.16.0.1"}},
		{"net2", nil}, // net2 of the pod's namespace
	} {
		on := onNetwork(p, tc.network)
		var got []string
		if on != nil {
			for _, ip := range on.Status.PodIPs {
				got = append(got, ip.IP)
			}
			if on.Status.PodIP != got[0] {
				t.Errorf("%s: podIP %s, want the first of %v", tc.network, on.Status.PodIP, got)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: addresses %v, want %v", tc.network, got, tc.want)
		}
	}
	if p.Status.PodIP != "10.0.0.1" {
		t.Error("onNetwork changed the pod it was given")
	}
	if onNetwork(pod("p", "10.0.0.1", "not json"), "net1") != nil {
		t.Error("a broken network-status gave addresses")
	}
}

func waitSlices(t *testing.T, client *reconcilertest.Clientset, ok func([]discoveryv1.EndpointSlice) bool) []discoveryv1.EndpointSlice {
	t.Helper()
	return examplestest.WaitSlices(t, client, "ns", "", ok)
}
