package reconciler_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// An MCS-style use: the owner is a custom object (here a ServiceImport,
// seen only through its metadata), the endpoints come from elsewhere (here
// another cluster), and the plan is inspected before it is applied.
func Example_customOwner() {
	client := fake.NewClientset()
	r, err := reconciler.New(client.DiscoveryV1(), "mcs", reconciler.WithOwnershipEnforced(true))
	if err != nil {
		panic(err)
	}
	owner := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "5f0c"}}
	in := reconciler.Input{
		Owner:        owner,
		OwnerGVK:     schema.GroupVersionKind{Group: "multicluster.x-k8s.io", Version: "v1beta1", Kind: "ServiceImport"},
		AddressTypes: []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4},
		Desired: []reconciler.EndpointGroup{{
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.100.1.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, Zone: ptr.To("east-a")},
				{Addresses: []string{"10.100.2.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}},
			},
		}},
		Labeler: reconciler.LabelerFunc(func() (map[string]string, map[string]string) {
			return map[string]string{"multicluster.kubernetes.io/source-cluster": "east"}, nil
		}),
	}
	plan, err := r.Plan(in)
	if err != nil {
		panic(err)
	}
	fmt.Println(plan)
	s := plan.Create[0]
	fmt.Println(s.GenerateName, s.Labels, s.OwnerReferences[0].Kind)
	if err := r.Apply(context.Background(), plan); err != nil {
		panic(err)
	}
	// Output:
	// create 1, update 0, delete 0 EndpointSlices (+2/-0 endpoints)
	// web- map[endpointslice.kubernetes.io/managed-by:mcs multicluster.kubernetes.io/source-cluster:east] ServiceImport
}

// The Kubernetes EndpointSlice controller's use: a Service and its Pods.
func Example_servicePods() {
	client := fake.NewClientset()
	r, err := reconciler.New(client.DiscoveryV1(), "endpointslice-controller.example.com",
		reconciler.WithPlaceholder(true), reconciler.WithOwnershipEnforced(true), reconciler.WithTrafficDistribution(true))
	if err != nil {
		panic(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "1a2b"},
		Spec: corev1.ServiceSpec{
			ClusterIP: "10.96.0.20", IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "shop"},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{
			Name: "app", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.100.0.5",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
	desired, addressTypes, err := reconciler.DesiredFromServicePods(svc, []*corev1.Pod{pod}, nil)
	if err != nil {
		panic(err)
	}
	err = r.Reconcile(context.Background(), reconciler.Input{
		Owner: svc, OwnerGVK: corev1.SchemeGroupVersion.WithKind("Service"),
		Desired: desired, AddressTypes: addressTypes,
		TrafficDistribution: svc.Spec.TrafficDistribution,
		Labeler:             reconciler.ServiceLabels{Service: svc},
	})
	if err != nil {
		panic(err)
	}
	list, _ := client.DiscoveryV1().EndpointSlices("shop").List(context.Background(), metav1.ListOptions{})
	s := list.Items[0]
	fmt.Println(s.AddressType, *s.Ports[0].Port, s.Endpoints[0].Addresses, *s.Endpoints[0].Conditions.Ready, s.Labels[discoveryv1.LabelServiceName])
	// Output:
	// IPv4 8080 [10.100.0.5] true web
}
