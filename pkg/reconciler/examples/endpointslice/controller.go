package main

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/examples/internal/run"
)

var serviceGVK = schema.GroupVersionKind{Version: "v1", Kind: "Service"}

// controller keeps the EndpointSlices of every Service with a selector, as
// kube-controller-manager's endpointslice-controller does, under its own
// managed-by value.
type controller struct {
	r        *reconciler.Reconciler
	services corelisters.ServiceLister
	pods     corelisters.PodLister
	nodes    corelisters.NodeLister
	slices   discoverylisters.EndpointSliceLister
	queue    workqueue.TypedRateLimitingInterface[string]
	synced   []cache.InformerSynced
}

// newController wires the informers of setup's factories to the queue;
// zoneMinimums is the reconciler's WithZoneMinimums.
func newController(setup run.Setup, zoneMinimums bool) (*controller, error) {
	client, all := setup.Client, setup.All
	r, err := reconciler.New(client.DiscoveryV1(), setup.ManagedBy,
		reconciler.WithPlaceholder(true), reconciler.WithTrafficDistribution(true), reconciler.WithZoneMinimums(zoneMinimums))
	if err != nil {
		return nil, err
	}
	svcInf, podInf, nodeInf := all.Core().V1().Services(), all.Core().V1().Pods(), all.Core().V1().Nodes()
	sliceInf := setup.Ours.Discovery().V1().EndpointSlices()
	c := &controller{
		r: r, services: svcInf.Lister(), pods: podInf.Lister(), nodes: nodeInf.Lister(), slices: sliceInf.Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "endpointslice"}),
		synced: []cache.InformerSynced{svcInf.Informer().HasSynced, podInf.Informer().HasSynced,
			nodeInf.Informer().HasSynced, sliceInf.Informer().HasSynced},
	}
	handlers := []struct {
		inf cache.SharedIndexInformer
		on  func(obj any)
	}{
		{svcInf.Informer(), c.enqueue},
		{podInf.Informer(), c.podChanged},
		{nodeInf.Informer(), func(any) { c.enqueueTopologyServices() }},
		{sliceInf.Informer(), c.sliceChanged},
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    h.on,
			UpdateFunc: func(old, cur any) { h.on(old); h.on(cur) },
			DeleteFunc: h.on,
		}); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *controller) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

// podChanged queues the Services whose selector matches the pod (called
// with the old and the new pod of an update, so a pod that leaves a
// selector is seen by both).
func (c *controller) podChanged(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	services, err := c.services.Services(pod.Namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, svc := range services {
		if svc.Spec.Selector != nil && labels.SelectorFromValidatedSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
			c.enqueue(svc)
		}
	}
}

// enqueueTopologyServices queues the Services with topology-aware hints:
// a node's zone, CPU or readiness may move them.
func (c *controller) enqueueTopologyServices() {
	services, err := c.services.List(labels.Everything())
	if err != nil {
		return
	}
	for _, svc := range services {
		if reconciler.TopologyModeAuto(svc.Annotations) {
			c.enqueue(svc)
		}
	}
}

// sliceChanged queues the owner of one of our slices that someone else
// changed or deleted; the echoes of our own writes are skipped.
func (c *controller) sliceChanged(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
		if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
			c.r.Tracker().Observed(s)
		}
	}
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	if _, err := c.slices.EndpointSlices(s.Namespace).Get(s.Name); apierrors.IsNotFound(err) {
		c.r.Tracker().Observed(s)
	} else if !c.r.Tracker().ShouldSync(s) {
		return
	}
	if name := s.Labels[discoveryv1.LabelServiceName]; name != "" {
		c.queue.Add(s.Namespace + "/" + name)
	}
}

// Run works the queue until ctx ends.
func (c *controller) Run(ctx context.Context, workers int) error {
	return run.Work(ctx, c.queue, workers, c.synced, "service", c.sync)
}

// sync reconciles one Service's slices. Services without a selector and
// ExternalName Services are left alone, their slices included, as
// upstream does; a deleted Service's slices go with it (owner references).
func (c *controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || svc.Spec.Selector == nil || svc.Spec.Type == corev1.ServiceTypeExternalName {
		return err
	}
	pods, err := c.pods.Pods(ns).List(labels.SelectorFromValidatedSet(svc.Spec.Selector))
	if err != nil {
		return err
	}
	desired, addressTypes, missingNode := reconciler.DesiredFromServicePods(svc, pods, c.nodes)
	if missingNode != nil && !errors.Is(missingNode, reconciler.ErrNodeNotFound) {
		return missingNode
	}
	existing, err := c.slices.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name}))
	if err != nil {
		return err
	}
	in := reconciler.Input{
		Owner: svc, OwnerGVK: serviceGVK,
		Desired: desired, AddressTypes: addressTypes, Existing: existing,
		TrafficDistribution: svc.Spec.TrafficDistribution,
		Labeler:             reconciler.ServiceLabels{Service: svc},
	}
	if reconciler.TopologyModeAuto(svc.Annotations) {
		nodes, err := c.nodes.List(labels.Everything())
		if err != nil {
			return err
		}
		in.Topology = &reconciler.Topology{ZoneCPU: reconciler.ZoneCPU(nodes)}
	}
	if err := c.r.Reconcile(ctx, in); err != nil {
		return fmt.Errorf("reconcile %s: %w", key, err)
	}
	if missingNode != nil {
		klog.FromContext(ctx).V(2).Info("Pods left out until their node is known", "service", key, "reason", missingNode)
	}
	return missingNode
}
