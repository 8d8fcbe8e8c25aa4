package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/examples/internal/run"
)

const serviceNetwork, networkStatus = "k8s.v1.cni.cncf.io/service-network", "k8s.v1.cni.cncf.io/network-status"

// controller keeps the slices of the Services on a secondary network.
type controller struct {
	r        *reconciler.Reconciler
	services corelisters.ServiceLister
	pods     corelisters.PodLister
	nodes    corelisters.NodeLister
	slices   discoverylisters.EndpointSliceLister
	queue    workqueue.TypedRateLimitingInterface[string]
	synced   []cache.InformerSynced
}

func newController(setup run.Setup) (*controller, error) {
	r, err := reconciler.New(setup.Client.DiscoveryV1(), setup.ManagedBy)
	if err != nil {
		return nil, err
	}
	core, sliceInf := setup.All.Core().V1(), setup.Ours.Discovery().V1().EndpointSlices()
	svcInf, podInf, nodeInf := core.Services(), core.Pods(), core.Nodes()
	c := &controller{r: r, services: svcInf.Lister(), pods: podInf.Lister(), nodes: nodeInf.Lister(), slices: sliceInf.Lister(),
		queue:  workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		synced: []cache.InformerSynced{svcInf.Informer().HasSynced, podInf.Informer().HasSynced, nodeInf.Informer().HasSynced, sliceInf.Informer().HasSynced}}
	return c, run.OnChange(func(obj any) {
		for _, k := range c.keys(obj) {
			c.queue.Add(k)
		}
	}, svcInf.Informer(), podInf.Informer(), sliceInf.Informer())
}

// keys returns the Services an object's change touches: itself, a slice's
// Service (a deletion is observed), or those on a network that select a pod.
func (c *controller) keys(obj any) (keys []string) {
	switch o := obj.(type) {
	case *corev1.Service:
		return []string{o.Namespace + "/" + o.Name}
	case *discoveryv1.EndpointSlice:
		run.ObserveDeletion(c.r, c.slices, o)
		return []string{o.Namespace + "/" + o.Labels[discoveryv1.LabelServiceName]}
	case *corev1.Pod:
		services, _ := c.services.Services(o.Namespace).List(labels.Everything())
		for _, s := range services {
			if s.Annotations[serviceNetwork] != "" && s.Spec.Selector != nil && labels.SelectorFromValidatedSet(s.Spec.Selector).Matches(labels.Set(o.Labels)) {
				keys = append(keys, s.Namespace+"/"+s.Name)
			}
		}
	}
	return keys
}

// Run works the queue until ctx ends.
func (c *controller) Run(ctx context.Context, workers int) error {
	return run.Work(ctx, c.queue, workers, c.synced, "service", c.sync)
}

// sync gives a Service on a secondary network the slices of its pods'
// addresses there; a Service that is gone or no longer on one loses ours.
func (c *controller) sync(ctx context.Context, key string) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	svc, err := c.services.Services(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil // its slices go with it (owner references)
	}
	if err != nil {
		return err
	}
	var pods []*corev1.Pod
	if network := svc.Annotations[serviceNetwork]; network != "" && svc.Spec.Selector != nil {
		selected, err := c.pods.Pods(ns).List(labels.SelectorFromValidatedSet(svc.Spec.Selector))
		if err != nil {
			return err
		}
		for _, p := range selected {
			if on := onNetwork(p, network); on != nil {
				pods = append(pods, on)
			}
		}
	}
	desired, addressTypes, missingNode := reconciler.DesiredFromServicePods(svc, pods, c.nodes)
	existing, err := c.slices.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name}))
	if err != nil {
		return err
	}
	err = c.r.Reconcile(ctx, reconciler.Input{Owner: svc, OwnerGVK: schema.GroupVersionKind{Version: "v1", Kind: "Service"},
		Desired: desired, AddressTypes: addressTypes, Existing: existing, Labeler: reconciler.ServiceLabels{Service: svc}})
	return errors.Join(err, missingNode)
}

// onNetwork returns a copy of pod whose IPs are its addresses on network
// (by the network-status annotation; "name" means the pod's namespace's
// network), or nil if it has none there or the annotation is not valid.
func onNetwork(pod *corev1.Pod, network string) *corev1.Pod {
	if !strings.Contains(network, "/") {
		network = pod.Namespace + "/" + network
	}
	var statuses []struct {
		Name string   `json:"name"`
		IPs  []string `json:"ips"`
	}
	if json.Unmarshal([]byte(pod.Annotations[networkStatus]), &statuses) != nil {
		return nil
	}
	for _, s := range statuses {
		if s.Name == network && len(s.IPs) > 0 {
			on := pod.DeepCopy()
			on.Status.PodIP, on.Status.PodIPs = s.IPs[0], nil
			for _, ip := range s.IPs {
				on.Status.PodIPs = append(on.Status.PodIPs, corev1.PodIP{IP: ip})
			}
			return on
		}
	}
	return nil
}
