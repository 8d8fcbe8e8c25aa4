package main

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic/dynamicinformer"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/examples/internal/run"
)

var resource = schema.GroupVersionResource{Group: "gateway.networking.x-k8s.io", Version: "v1alpha1", Resource: "endpointselectors"}

// nameLabel names a slice's EndpointSelector (kubernetes.io/service-name
// would put the slices under a Service of the same name, for kube-proxy).
const nameLabel = "gateway.networking.x-k8s.io/endpoint-selector-name"

// endpointSelector is the part of the resource this controller reads.
type endpointSelector struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector metav1.LabelSelector `json:"selector"`
		Ports    []corev1.ServicePort `json:"ports"` // name, port or targetPort, protocol, appProtocol
	} `json:"spec"`
	Selector labels.Selector            `json:"-"`
	Object   *unstructured.Unstructured `json:"-"` // the owner of its slices
}

type controller struct {
	r         *reconciler.Reconciler
	factory   dynamicinformer.DynamicSharedInformerFactory
	selectors cache.GenericLister
	pods      corelisters.PodLister
	nodes     corelisters.NodeLister
	slices    discoverylisters.EndpointSliceLister
	queue     workqueue.TypedRateLimitingInterface[string]
	synced    []cache.InformerSynced
}

func newController(setup run.Setup) (*controller, error) {
	r, err := reconciler.New(setup.Client.DiscoveryV1(), setup.ManagedBy)
	if err != nil {
		return nil, err
	}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(setup.Dynamic, 0)
	selInf, podInf, nodeInf := factory.ForResource(resource), setup.All.Core().V1().Pods(), setup.All.Core().V1().Nodes()
	sliceInf := setup.Ours.Discovery().V1().EndpointSlices()
	c := &controller{r: r, factory: factory, selectors: selInf.Lister(), pods: podInf.Lister(), nodes: nodeInf.Lister(), slices: sliceInf.Lister(),
		queue:  workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		synced: []cache.InformerSynced{selInf.Informer().HasSynced, podInf.Informer().HasSynced, nodeInf.Informer().HasSynced, sliceInf.Informer().HasSynced}}
	return c, run.OnChange(c.enqueue, selInf.Informer(), podInf.Informer(), sliceInf.Informer())
}

// enqueue queues the EndpointSelectors an object's change touches: itself,
// a slice's (a deletion is observed), or those whose selector matches a pod.
func (c *controller) enqueue(obj any) {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		c.queue.Add(o.GetNamespace() + "/" + o.GetName())
	case *discoveryv1.EndpointSlice:
		run.ObserveDeletion(c.r, c.slices, o)
		c.queue.Add(o.Namespace + "/" + o.Labels[nameLabel])
	case *corev1.Pod:
		all, _ := c.selectors.ByNamespace(o.Namespace).List(labels.Everything())
		for _, u := range all {
			if s, err := parse(u, nil); err == nil && s.Selector.Matches(labels.Set(o.Labels)) {
				c.queue.Add(s.Namespace + "/" + s.Name)
			}
		}
	}
}

// Run starts the custom resource's informer and works the queue.
func (c *controller) Run(ctx context.Context, workers int) error {
	c.factory.Start(ctx.Done())
	return run.Work(ctx, c.queue, workers, c.synced, "endpointselector", c.sync)
}

func (c *controller) sync(ctx context.Context, key string) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	s, err := parse(c.selectors.ByNamespace(ns).Get(name))
	if apierrors.IsNotFound(err) {
		return nil // its slices go with it (owner references)
	} else if err != nil {
		return err
	}
	svc := &corev1.Service{ObjectMeta: s.ObjectMeta, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone,
		IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}}}
	for _, p := range s.Spec.Ports {
		if p.TargetPort == (intstr.IntOrString{}) { // defaulted as a Service's
			p.TargetPort = intstr.FromInt32(p.Port)
		}
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		svc.Spec.Ports = append(svc.Spec.Ports, p)
	}
	pods, err := c.pods.Pods(ns).List(s.Selector)
	if err != nil {
		return err
	}
	desired, addressTypes, missingNode := reconciler.DesiredFromServicePods(svc, pods, c.nodes)
	existing, err := c.slices.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{nameLabel: name}))
	if err != nil {
		return err
	}
	err = c.r.Reconcile(ctx, reconciler.Input{Owner: s.Object, OwnerGVK: resource.GroupVersion().WithKind("EndpointSelector"),
		Desired: desired, AddressTypes: addressTypes, Existing: existing,
		Labeler: reconciler.LabelerFunc(func() (map[string]string, map[string]string) { return map[string]string{nameLabel: name}, nil })})
	return errors.Join(err, missingNode)
}

// parse reads an EndpointSelector got with err; a selector that is not
// valid is an error. As everywhere in Kubernetes, an empty selector selects
// all pods.
func parse(obj runtime.Object, err error) (*endpointSelector, error) {
	if err != nil {
		return nil, err
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("%T is not an EndpointSelector", obj)
	}
	s := &endpointSelector{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, s); err != nil {
		return nil, fmt.Errorf("EndpointSelector %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	s.Object = u
	if s.Selector, err = metav1.LabelSelectorAsSelector(&s.Spec.Selector); err != nil {
		return nil, fmt.Errorf("EndpointSelector %s/%s: spec.selector: %w", s.Namespace, s.Name, err)
	}
	return s, nil
}
