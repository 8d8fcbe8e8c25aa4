// Package reconcilertest is a test double for the users of package
// reconciler, in the manner of controller-runtime's client/fake: a fake
// clientset whose EndpointSlice writes behave as the API server's where a
// reconciler can tell (generateName gives a name, creates get a UID and
// generation 1, an update bumps the generation when anything but the
// metadata or its labels changed, a stale resourceVersion is a conflict),
// and that records those writes in order; and ServiceSlices, a fixture of
// a Service's slices for benchmarks.
//
// It embeds client-go's fake clientset: its reactors, actions and tracker
// stay at hand, and a reactor prepended in a test runs before this
// package's (to refuse a write, say).
package reconcilertest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

var endpointSlices = discoveryv1.SchemeGroupVersion.WithResource("endpointslices")

// Write is one EndpointSlice write the clientset accepted.
type Write struct {
	// Verb is create, update or delete.
	Verb      string
	Namespace string
	// Name is the slice's name; for a create, the one the clientset gave.
	Name string
	// Slice is the slice as stored (nil for a delete).
	Slice *discoveryv1.EndpointSlice
}

func (w Write) String() string { return w.Verb + " " + w.Namespace + "/" + w.Name }

// Clientset is a fake clientset whose EndpointSlice writes behave as the
// API server's (see the package's doc). Safe for concurrent use.
type Clientset struct {
	*fake.Clientset

	mu     sync.Mutex
	serial int // the last name suffix, UID and resourceVersion given
	writes []Write
}

// NewClientset returns a Clientset holding objs.
func NewClientset(objs ...runtime.Object) *Clientset {
	c := &Clientset{Clientset: fake.NewClientset(objs...)}
	c.PrependReactor("create", "endpointslices", c.create)
	c.PrependReactor("update", "endpointslices", c.update)
	c.PrependReactor("delete", "endpointslices", c.delete)
	return c
}

// Writes returns the EndpointSlice writes accepted so far, in order.
func (c *Clientset) Writes() []Write {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.writes)
}

// ClearWrites forgets the writes recorded so far (ClearActions leaves them).
func (c *Clientset) ClearWrites() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = nil
}

// Slices returns the EndpointSlices of namespace the clientset holds,
// sorted by name.
func (c *Clientset) Slices(ctx context.Context, namespace string) ([]discoveryv1.EndpointSlice, error) {
	list, err := c.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(list.Items, func(a, b discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	return list.Items, nil
}

// next returns the next serial number; c.mu is held.
func (c *Clientset) next() int {
	c.serial++
	return c.serial
}

func (c *Clientset) create(action k8stesting.Action) (bool, runtime.Object, error) {
	s := action.(k8stesting.CreateAction).GetObject().(*discoveryv1.EndpointSlice).DeepCopy()
	if s.Namespace == "" {
		s.Namespace = action.GetNamespace()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.next()
	if s.Name == "" {
		if s.GenerateName == "" {
			return true, nil, apierrors.NewBadRequest("EndpointSlice: name or generateName is required")
		}
		s.Name = fmt.Sprintf("%s%05d", s.GenerateName, n)
	}
	s.UID = types.UID(fmt.Sprintf("slice-uid-%d", n))
	s.Generation = 1
	s.ResourceVersion = strconv.Itoa(n)
	if err := c.Tracker().Create(endpointSlices, s, s.Namespace); err != nil {
		return true, nil, err
	}
	c.writes = append(c.writes, Write{Verb: "create", Namespace: s.Namespace, Name: s.Name, Slice: s.DeepCopy()})
	return true, s, nil
}

func (c *Clientset) update(action k8stesting.Action) (bool, runtime.Object, error) {
	s := action.(k8stesting.UpdateAction).GetObject().(*discoveryv1.EndpointSlice).DeepCopy()
	if s.Namespace == "" {
		s.Namespace = action.GetNamespace()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	obj, err := c.Tracker().Get(endpointSlices, s.Namespace, s.Name)
	if err != nil {
		return true, nil, err
	}
	old := obj.(*discoveryv1.EndpointSlice)
	if s.ResourceVersion != "" && s.ResourceVersion != old.ResourceVersion {
		return true, nil, apierrors.NewConflict(endpointSlices.GroupResource(), s.Name,
			fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	s.UID, s.Generation = old.UID, old.Generation
	if !equality.Semantic.DeepEqual(s.Endpoints, old.Endpoints) || !equality.Semantic.DeepEqual(s.Ports, old.Ports) ||
		s.AddressType != old.AddressType || !equality.Semantic.DeepEqual(s.Labels, old.Labels) {
		s.Generation++
	}
	s.ResourceVersion = strconv.Itoa(c.next())
	if err := c.Tracker().Update(endpointSlices, s, s.Namespace); err != nil {
		return true, nil, err
	}
	c.writes = append(c.writes, Write{Verb: "update", Namespace: s.Namespace, Name: s.Name, Slice: s.DeepCopy()})
	return true, s, nil
}

func (c *Clientset) delete(action k8stesting.Action) (bool, runtime.Object, error) {
	a := action.(k8stesting.DeleteAction)
	c.mu.Lock()
	defer c.mu.Unlock()
	if pre := a.GetDeleteOptions().Preconditions; pre != nil && (pre.UID != nil || pre.ResourceVersion != nil) {
		obj, err := c.Tracker().Get(endpointSlices, a.GetNamespace(), a.GetName())
		if err != nil {
			return true, nil, err
		}
		old := obj.(*discoveryv1.EndpointSlice)
		if (pre.UID != nil && *pre.UID != old.UID) || (pre.ResourceVersion != nil && *pre.ResourceVersion != old.ResourceVersion) {
			return true, nil, apierrors.NewConflict(endpointSlices.GroupResource(), a.GetName(),
				fmt.Errorf("precondition failed: the object has another UID or resourceVersion"))
		}
	}
	if err := c.Tracker().Delete(endpointSlices, a.GetNamespace(), a.GetName()); err != nil {
		return true, nil, err
	}
	c.writes = append(c.writes, Write{Verb: "delete", Namespace: a.GetNamespace(), Name: a.GetName()})
	return true, nil, nil
}

// ServiceSlices returns n ready endpoints of Service namespace/service in
// slices of at most perSlice, as an EndpointSlice controller writes them:
// named <service>-<first endpoint's index>, each with a UID and
// resourceVersion "1", port http TCP/80, IPv4 addresses from 10.0.0.0,
// node node-1 and a targetRef to Pod <service>-<index>. A fixture for
// benchmarks of what a change of one of them costs.
func ServiceSlices(namespace, service string, n, perSlice int) []discoveryv1.EndpointSlice {
	endpoints := make([]discoveryv1.Endpoint, n)
	for j := range endpoints {
		endpoints[j] = discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", j>>16&255, j>>8&255, j&255)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, NodeName: ptr.To("node-1"),
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: fmt.Sprintf("%s-%d", service, j)}}
	}
	ports := []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](80)}}
	return SlicesOf(namespace, service, discoveryv1.AddressTypeIPv4, ports, endpoints, perSlice)
}

// SlicesOf returns endpoints in EndpointSlices of perSlice endpoints each
// (the last may hold fewer), of addressType and ports, named
// service-00000, service-00100, ... in namespace, resourceVersion "1": a
// Service's slices as an informer gives them, to group (say, with a
// reconciler.SliceGrouper) as an export watcher does. The endpoints are
// shared, not copied.
func SlicesOf(namespace, service string, addressType discoveryv1.AddressType, ports []discoveryv1.EndpointPort, endpoints []discoveryv1.Endpoint, perSlice int) []discoveryv1.EndpointSlice {
	var out []discoveryv1.EndpointSlice
	for i := 0; i < len(endpoints); i += perSlice {
		out = append(out, discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("%s-%05d", service, i), UID: types.UID(fmt.Sprintf("%s-%d", service, i)), ResourceVersion: "1",
				Labels: map[string]string{discoveryv1.LabelServiceName: service}},
			AddressType: addressType, Ports: ports, Endpoints: endpoints[i:min(i+perSlice, len(endpoints))],
		})
	}
	return out
}
