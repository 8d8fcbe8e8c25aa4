//lint:file-ignore SA1019 the mirroring controller's input is the deprecated Endpoints API, by design

package main

import (
	"context"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/workqueue"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/examples/internal/run"
)

var endpointsGVK = schema.GroupVersionKind{Version: "v1", Kind: "Endpoints"}

// controller mirrors the Endpoints of Services without a selector into
// EndpointSlices, as kube-controller-manager's
// endpointslicemirroring-controller does, under its own managed-by value.
type controller struct {
	client    kubernetes.Interface
	r         *reconciler.Reconciler
	endpoints corelisters.EndpointsLister
	services  corelisters.ServiceLister
	slices    discoverylisters.EndpointSliceLister
	queue     workqueue.TypedRateLimitingInterface[string]
	synced    []cache.InformerSynced
}

// newController wires the informers of setup's factories to the queue.
func newController(setup run.Setup) (*controller, error) {
	client, all := setup.Client, setup.All
	r, err := reconciler.New(client.DiscoveryV1(), setup.ManagedBy)
	if err != nil {
		return nil, err
	}
	epInf, svcInf := all.Core().V1().Endpoints(), all.Core().V1().Services()
	sliceInf := setup.Ours.Discovery().V1().EndpointSlices()
	c := &controller{
		client: client, r: r, endpoints: epInf.Lister(), services: svcInf.Lister(), slices: sliceInf.Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "mirroring"}),
		synced: []cache.InformerSynced{epInf.Informer().HasSynced, svcInf.Informer().HasSynced, sliceInf.Informer().HasSynced},
	}
	// An Endpoints object, its Service and our slices share one key:
	// namespace/name of the Service.
	return c, run.OnChange(func(obj any) {
		o, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		name := o.GetName()
		if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
			name = s.Labels[discoveryv1.LabelServiceName]
			run.ObserveDeletion(c.r, c.slices, s)
		}
		c.queue.Add(o.GetNamespace() + "/" + name)
	}, epInf.Informer(), svcInf.Informer(), sliceInf.Informer())
}

// Run works the queue until ctx ends.
func (c *controller) Run(ctx context.Context, workers int) error {
	return run.Work(ctx, c.queue, workers, c.synced, "endpoints", c.sync)
}

// sync mirrors one Endpoints object, or deletes its mirrored slices when
// it must not be mirrored: it is gone, carries the skip-mirror label or a
// leader-election record, or its Service is gone or has a selector.
func (c *controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	existing, err := c.slices.EndpointSlices(ns).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name}))
	if err != nil {
		return err
	}
	ep, err := c.endpoints.Endpoints(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	svc, svcErr := c.services.Services(ns).Get(name)
	if svcErr != nil && !apierrors.IsNotFound(svcErr) {
		return svcErr
	}
	if ep == nil {
		return c.deleteAll(ctx, existing)
	}
	// An Endpoints that must not be mirrored keeps no slices: the
	// reconciler deletes them, so that its tracker knows.
	in := reconciler.Input{Owner: ep, OwnerGVK: endpointsGVK, Existing: existing,
		AddressTypes: []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6}}
	if svc != nil && svc.Spec.Selector == nil && mirrored(ep) {
		in.Desired = desired(ep)
		in.Labeler = reconciler.LabelerFunc(func() (map[string]string, map[string]string) {
			l := maps.Clone(ep.Labels)
			if l == nil {
				l = map[string]string{}
			}
			l[discoveryv1.LabelServiceName] = ep.Name
			a := maps.Clone(ep.Annotations)
			delete(a, corev1.EndpointsLastChangeTriggerTime)
			delete(a, corev1.LastAppliedConfigAnnotation)
			return l, a
		})
	}
	return c.r.Reconcile(ctx, in)
}

func mirrored(ep *corev1.Endpoints) bool {
	_, leader := ep.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]
	return ep.Labels[discoveryv1.LabelSkipMirror] != "true" && !leader
}

// deleteAll deletes the slices of an Endpoints that is gone, as upstream
// does (rather than wait for the garbage collector), and has the
// reconciler forget their owners.
func (c *controller) deleteAll(ctx context.Context, slices []*discoveryv1.EndpointSlice) error {
	var errs []error
	for _, s := range slices {
		for _, ref := range s.OwnerReferences {
			c.r.Forget(ref.UID)
		}
		err := c.client.DiscoveryV1().EndpointSlices(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s/%s: %w", s.Namespace, s.Name, err))
		}
	}
	return errors.Join(errs...)
}
