package main

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/examples/internal/examplestest"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/examples/internal/run"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/reconcilertest"
)

const managedBy = "endpointselector.example.com"

func selector(name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.x-k8s.io/v1alpha1", "kind": "EndpointSelector",
		"metadata": map[string]any{"name": name, "namespace": "ns", "uid": "uid-" + name},
		"spec":     spec,
	}}
}

func pod(name, ip string, labels map[string]string, ready bool) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "model",
			Ports: []corev1.ContainerPort{{Name: "grpc", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}},
	}
}

// start runs the controller on fake clients holding the EndpointSelectors
// and the other objects.
func start(t *testing.T, selectors []runtime.Object, objs ...runtime.Object) (*reconcilertest.Clientset, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	client := reconcilertest.NewClientset(objs...)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{resource: "EndpointSelectorList"}, selectors...)
	setup := run.Factories(client, managedBy)
	setup.Dynamic = dyn
	examplestest.Run(t, setup, 1, func(s run.Setup) (run.Controller, error) { return newController(s) })
	return client, dyn
}

// TestSelectorPodsPorts: an EndpointSelector's pods (by matchLabels and
// matchExpressions) become a slice labelled with its name and owned by it,
// its named target port resolved, readiness kept; a pod that stops
// matching leaves, and a slice deleted by someone else comes back.
func TestSelectorPodsPorts(t *testing.T) {
	sel := selector("models", map[string]any{
		"selector": map[string]any{"matchLabels": map[string]any{"app": "model"},
			"matchExpressions": []any{map[string]any{"key": "tier", "operator": "NotIn", "values": []any{"canary"}}}},
		"ports": []any{map[string]any{"name": "grpc", "targetPort": "grpc", "appProtocol": "kubernetes.io/h2c"}},
	})
	client, _ := start(t, []runtime.Object{sel},
		pod("m1", "10.0.0.1", map[string]string{"app": "model"}, true),
		pod("m2", "10.0.0.2", map[string]string{"app": "model"}, false),
		pod("m3", "10.0.0.3", map[string]string{"app": "model", "tier": "canary"}, true),
		pod("web", "10.0.0.4", map[string]string{"app": "web"}, true))

	got := waitSlices(t, client, func(s []discoveryv1.EndpointSlice) bool { return len(s) == 1 && len(s[0].Endpoints) == 2 })
	s := got[0]
	if s.Labels[nameLabel] != "models" || s.Labels[discoveryv1.LabelManagedBy] != managedBy || s.Labels[discoveryv1.LabelServiceName] != "" {
		t.Errorf("labels %v, want %s=models under %s and no service-name", s.Labels, nameLabel, managedBy)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "EndpointSelector" || s.OwnerReferences[0].UID != "uid-models" {
		t.Errorf("owner references %+v, want the EndpointSelector", s.OwnerReferences)
	}
	if len(s.Ports) != 1 || ptr.Deref(s.Ports[0].Port, 0) != 8080 || ptr.Deref(s.Ports[0].AppProtocol, "") != "kubernetes.io/h2c" ||
		ptr.Deref(s.Ports[0].Protocol, "") != corev1.ProtocolTCP {
		t.Errorf("ports %+v, want grpc resolved to 8080/TCP with its appProtocol", s.Ports)
	}
	ready := map[string]bool{}
	for _, ep := range s.Endpoints {
		ready[ep.Addresses[0]] = ptr.Deref(ep.Conditions.Ready, false)
	}
	if fmt.Sprint(ready) != "map[10.0.0.1:true 10.0.0.2:false]" {
		t.Errorf("endpoints' readiness %v, want m1 ready and m2 not (m3 is a canary, web another app)", ready)
	}

	if err := client.DiscoveryV1().EndpointSlices("ns").Delete(context.Background(), s.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSlices(t, client, func(got []discoveryv1.EndpointSlice) bool { return len(got) == 1 && got[0].Name != s.Name }) // someone deleted it

	if _, err := client.CoreV1().Pods("ns").Update(context.Background(), pod("m2", "10.0.0.2", map[string]string{"app": "model", "tier": "canary"}, false), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSlices(t, client, func(s []discoveryv1.EndpointSlice) bool { return len(s) == 1 && len(s[0].Endpoints) == 1 })
}

// TestBadSelector: an EndpointSelector whose selector is not valid gets
// no slices and is reported as such, and port defaults follow a Service's.
func TestBadSelector(t *testing.T) {
	bad := selector("bad", map[string]any{"selector": map[string]any{
		"matchExpressions": []any{map[string]any{"key": "app", "operator": "Sideways"}}}})
	if _, err := parse(bad, nil); err == nil {
		t.Error("a selector with operator Sideways parsed")
	}
	client, _ := start(t, []runtime.Object{bad, selector("plain", map[string]any{
		"selector": map[string]any{"matchLabels": map[string]any{"app": "model"}},
		"ports":    []any{map[string]any{"name": "http", "port": int64(9000)}}})},
		pod("m1", "10.0.0.1", map[string]string{"app": "model"}, true))
	got := waitSlices(t, client, func(s []discoveryv1.EndpointSlice) bool { return len(s) == 1 })
	if got[0].Labels[nameLabel] != "plain" {
		t.Errorf("slice of %q, want only plain's", got[0].Labels[nameLabel])
	}
	if p := got[0].Ports; len(p) != 1 || ptr.Deref(p[0].Port, 0) != 9000 || ptr.Deref(p[0].Protocol, "") != corev1.ProtocolTCP {
		t.Errorf("ports %+v, want port 9000 as target port, TCP", p)
	}
}

func waitSlices(t *testing.T, client *reconcilertest.Clientset, ok func([]discoveryv1.EndpointSlice) bool) []discoveryv1.EndpointSlice {
	t.Helper()
	return examplestest.WaitSlices(t, client, "ns", "", ok)
}
