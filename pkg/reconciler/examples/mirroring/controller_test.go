//lint:file-ignore SA1019 the mirroring controller's input is the deprecated Endpoints API, by design

package main

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/examples/internal/examplestest"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/examples/internal/run"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/reconcilertest"
)

const managedBy = "mirroring.example.com"

func endpoints(labels map[string]string, subsets ...corev1.EndpointSubset) *corev1.Endpoints {
	return &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "ep-uid", Labels: labels,
		Annotations: map[string]string{"note": "kept", corev1.EndpointsLastChangeTriggerTime: "2026-01-01T00:00:00Z"}},
		Subsets: subsets}
}

func port(name string, n int32) corev1.EndpointPort {
	return corev1.EndpointPort{Name: name, Port: n, Protocol: corev1.ProtocolTCP}
}

func addrs(ips ...string) []corev1.EndpointAddress {
	var out []corev1.EndpointAddress
	for _, ip := range ips {
		out = append(out, corev1.EndpointAddress{IP: ip})
	}
	return out
}

// TestMirror: the Endpoints of a selector-less Service are mirrored with
// its labels and annotations (the trigger time aside), one group per
// address family, ready from the subset; the skip-mirror label removes them.
func TestMirror(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}}
	ep := endpoints(map[string]string{"team": "a"}, corev1.EndpointSubset{
		Addresses: addrs("10.0.0.1", "fd00::1"), NotReadyAddresses: addrs("10.0.0.2", "not-an-ip"), Ports: []corev1.EndpointPort{port("sql", 5432)}})
	client, ctx := start(t, svc, ep)

	got := waitSlices(t, client, func(s []discoveryv1.EndpointSlice) bool { return len(s) == 2 })
	for _, s := range got {
		if s.Labels["team"] != "a" || s.Labels[discoveryv1.LabelServiceName] != "db" || s.Labels[discoveryv1.LabelManagedBy] != managedBy {
			t.Errorf("labels %v", s.Labels)
		}
		if s.Annotations["note"] != "kept" || s.Annotations[corev1.EndpointsLastChangeTriggerTime] != "" {
			t.Errorf("annotations %v", s.Annotations)
		}
		want := map[discoveryv1.AddressType]int{discoveryv1.AddressTypeIPv4: 2, discoveryv1.AddressTypeIPv6: 1}[s.AddressType]
		if len(s.Endpoints) != want {
			t.Errorf("%s: %d endpoints, want %d", s.AddressType, len(s.Endpoints), want)
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Serving != nil || e.Conditions.Terminating != nil || *e.Conditions.Ready != (e.Addresses[0] != "10.0.0.2") {
				t.Errorf("%s: conditions %+v", e.Addresses[0], e.Conditions)
			}
		}
	}

	ep.Labels[discoveryv1.LabelSkipMirror] = "true"
	if _, err := client.CoreV1().Endpoints("ns").Update(ctx, ep, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSlices(t, client, func(s []discoveryv1.EndpointSlice) bool { return len(s) == 0 })
}

// TestSelectorComesAndGoes: a Service that gains a selector loses its
// mirrored slices and gets them again when it loses the selector, as often
// as that happens (the mirroring once stayed away after its first loss:
// slices deleted past the reconciler made its tracker wait for them).
func TestSelectorComesAndGoes(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}}
	client, ctx := start(t, svc, endpoints(nil, corev1.EndpointSubset{Addresses: addrs("10.0.0.1"), Ports: []corev1.EndpointPort{port("sql", 5432)}}))
	waitSlices(t, client, func(s []discoveryv1.EndpointSlice) bool { return len(s) == 1 })
	for range 2 {
		svc.Spec.Selector = map[string]string{"app": "db"}
		if _, err := client.CoreV1().Services("ns").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitSlices(t, client, func(s []discoveryv1.EndpointSlice) bool { return len(s) == 0 })
		svc.Spec.Selector = nil
		if _, err := client.CoreV1().Services("ns").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitSlices(t, client, func(s []discoveryv1.EndpointSlice) bool { return len(s) == 1 })
	}
}

// TestDeletedSliceComesBack: a mirrored slice that someone else deletes
// is mirrored again.
func TestDeletedSliceComesBack(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns"}}
	client, ctx := start(t, svc, endpoints(nil, corev1.EndpointSubset{Addresses: addrs("10.0.0.1"), Ports: []corev1.EndpointPort{port("sql", 5432)}}))
	got := waitSlices(t, client, func(s []discoveryv1.EndpointSlice) bool { return len(s) == 1 })
	if err := client.DiscoveryV1().EndpointSlices("ns").Delete(ctx, got[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSlices(t, client, func(s []discoveryv1.EndpointSlice) bool { return len(s) == 1 && s[0].Name != got[0].Name })
}

// start runs the controller on a fake clientset holding objs.
func start(t *testing.T, objs ...runtime.Object) (*reconcilertest.Clientset, context.Context) {
	t.Helper()
	client := reconcilertest.NewClientset(objs...)
	ctx := examplestest.Run(t, run.Factories(client, managedBy), 1, func(s run.Setup) (run.Controller, error) { return newController(s) })
	return client, ctx
}

func waitSlices(t *testing.T, client *reconcilertest.Clientset, ok func([]discoveryv1.EndpointSlice) bool) []discoveryv1.EndpointSlice {
	t.Helper()
	return examplestest.WaitSlices(t, client, "ns", "", ok)
}

// TestRepackAndCap: an address in two subsets gets both ports; one not
// ready for a port is not ready; past 1,000 addresses per subset (ready
// ones first) nothing is mirrored.
func TestRepackAndCap(t *testing.T) {
	groups := desired(endpoints(nil,
		corev1.EndpointSubset{Addresses: addrs("10.0.0.1"), Ports: []corev1.EndpointPort{port("a", 1)}},
		corev1.EndpointSubset{Addresses: addrs("10.0.0.1"), Ports: []corev1.EndpointPort{port("b", 2)}},
		corev1.EndpointSubset{Addresses: addrs("10.0.0.2"), Ports: []corev1.EndpointPort{port("c", 3)}},
		corev1.EndpointSubset{NotReadyAddresses: addrs("10.0.0.2"), Ports: []corev1.EndpointPort{port("c", 3)}}))
	summary := map[string]string{}
	for _, g := range groups {
		for _, e := range g.Endpoints {
			summary[e.Addresses[0]] += fmt.Sprintf("%d ports ready=%v;", len(g.Ports), *e.Conditions.Ready)
		}
	}
	if summary["10.0.0.1"] != "2 ports ready=true;" || summary["10.0.0.2"] != "1 ports ready=false;" {
		t.Errorf("repacked: %v, want 10.0.0.1 once with both ports, 10.0.0.2 once not ready", summary)
	}

	var ready, notReady []string
	for i := range 1001 {
		ready = append(ready, fmt.Sprintf("10.1.%d.%d", i/256, i%256))
	}
	notReady = append(notReady, "10.2.0.1")
	groups = desired(endpoints(nil, corev1.EndpointSubset{Addresses: addrs(ready...), NotReadyAddresses: addrs(notReady...)}))
	n := 0
	for _, g := range groups {
		for _, e := range g.Endpoints {
			n++
			if !*e.Conditions.Ready {
				t.Errorf("a not-ready address was mirrored past the cap: %s", e.Addresses[0])
			}
		}
	}
	if n != maxPerSubset {
		t.Errorf("%d endpoints mirrored, want %d", n, maxPerSubset)
	}
}
