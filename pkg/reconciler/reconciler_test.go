package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	discoveryclient "k8s.io/client-go/kubernetes/typed/discovery/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/reconcilertest"
)

// TestNewValidatesOptions: bad settings are refused with a clear error.
func TestNewValidatesOptions(t *testing.T) {
	client := reconcilertest.NewClientset()
	for _, tc := range []struct {
		managedBy string
		opts      []Option
		want      string
	}{
		{"", nil, "must not be empty"},
		{"not a label value!", nil, "not a valid label value"},
		{"ok", []Option{WithMaxEndpointsPerSlice(0)}, "1..1000, got 0"},
		{"ok", []Option{WithMaxEndpointsPerSlice(1001)}, "1..1000, got 1001"},
		{"ok", []Option{WithTracker(nil)}, "tracker must not be nil"},
	} {
		_, err := New(client.DiscoveryV1(), tc.managedBy, tc.opts...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q, %d opts): %v, want an error containing %q", tc.managedBy, len(tc.opts), err, tc.want)
		}
	}
}

// TestEmptyServiceGetsPlaceholder: a Service without endpoints gets one
// empty slice without ports when placeholders are on, nothing when off.
func TestEmptyServiceGetsPlaceholder(t *testing.T) {
	client := reconcilertest.NewClientset()
	r := newReconciler(t, client, WithPlaceholder(true))
	svc := service()
	reconcileService(t, r, client, svc, nil)
	got := listSlices(t, client, "ns")
	if len(got) != 1 || len(got[0].Endpoints) != 0 || len(got[0].Ports) != 0 {
		t.Fatalf("slices %v, want one empty placeholder", sliceSizes(got))
	}
	if got[0].Labels[discoveryv1.LabelManagedBy] != "test-controller" || got[0].Labels[discoveryv1.LabelServiceName] != "svc" {
		t.Errorf("placeholder labels %v", got[0].Labels)
	}
	assertIdempotent(t, r, client, svc, nil)

	client = reconcilertest.NewClientset()
	r = newReconciler(t, client)
	reconcileService(t, r, client, svc, nil)
	if got := listSlices(t, client, "ns"); len(got) != 0 {
		t.Errorf("without placeholders: %d slices, want none", len(got))
	}
}

// TestOneEndpoint: one pod gives one slice of its address type; a
// dual-stack Service gets one slice per family.
func TestOneEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name     string
		families []corev1.IPFamily
		ips      []string
		want     []discoveryv1.AddressType
	}{
		{"IPv4", []corev1.IPFamily{corev1.IPv4Protocol}, []string{"10.0.0.1"}, []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4}},
		{"IPv6", []corev1.IPFamily{corev1.IPv6Protocol}, []string{"fd00::1"}, []discoveryv1.AddressType{discoveryv1.AddressTypeIPv6}},
		{"dual-stack", []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}, []string{"10.0.0.1", "fd00::1"},
			[]discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := reconcilertest.NewClientset()
			r := newReconciler(t, client, WithPlaceholder(true))
			svc := service()
			svc.Spec.IPFamilies = tc.families
			p := pod("pod-0", tc.ips[0], true)
			p.Status.PodIPs = nil
			for _, ip := range tc.ips {
				p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
			}
			reconcileService(t, r, client, svc, []*corev1.Pod{p})
			got := listSlices(t, client, "ns")
			var types []discoveryv1.AddressType
			for _, s := range got {
				types = append(types, s.AddressType)
				if len(s.Endpoints) != 1 || len(s.Endpoints[0].Addresses) != 1 {
					t.Errorf("%s slice holds %v", s.AddressType, s.Endpoints)
				}
			}
			slices.Sort(types)
			if !slices.Equal(types, tc.want) {
				t.Errorf("address types %v, want %v", types, tc.want)
			}
			assertIdempotent(t, r, client, svc, []*corev1.Pod{p})
		})
	}
}

// TestPlaceholderKeptOrReplaced: an existing placeholder is kept as it is;
// one with stale labels is replaced (recycled into one update).
func TestPlaceholderKeptOrReplaced(t *testing.T) {
	svc := service()
	client := reconcilertest.NewClientset()
	placeholder := existingSlice("svc-old", svc, nil, nil)
	seed(t, client, placeholder)
	r := newReconciler(t, client, WithPlaceholder(true))
	reconcileService(t, r, client, svc, nil)
	if w := writes(client); len(w) != 0 {
		t.Errorf("a matching placeholder was rewritten: %v", w)
	}

	client = reconcilertest.NewClientset()
	stale := existingSlice("svc-old", svc, nil, nil)
	stale.Labels["app"] = "old"
	seed(t, client, stale)
	r = newReconciler(t, client, WithPlaceholder(true))
	reconcileService(t, r, client, svc, nil)
	if w := writes(client); w["update"] != 1 || len(w) != 1 {
		t.Errorf("writes %v, want the stale placeholder updated once", w)
	}
	got := listSlices(t, client, "ns")
	if len(got) != 1 || got[0].Name != "svc-old" || got[0].Labels["app"] != "web" {
		t.Errorf("placeholder after replace: %+v", got)
	}
}

// TestPublishNotReadyAddresses: not-ready pods are ready endpoints when the
// Service publishes not-ready addresses, and still not serving: serving is
// the pod's readiness alone (upstream's podToEndpoint; the differential
// test against kube-controller-manager found our old serving=true).
func TestPublishNotReadyAddresses(t *testing.T) {
	svc := service()
	svc.Spec.PublishNotReadyAddresses = true
	_, eps := podEndpoints(t, svc, []*corev1.Pod{pod("p", "10.0.0.1", false)})
	c := eps[0].Conditions
	if !ptr.Deref(c.Ready, false) || ptr.Deref(c.Serving, true) || ptr.Deref(c.Terminating, true) {
		t.Errorf("conditions %+v, want ready, not serving, not terminating", c)
	}
}

// TestManyEndpointsFillSlices: 250 endpoints make slices of 100, 100, 50.
func TestManyEndpointsFillSlices(t *testing.T) {
	client := reconcilertest.NewClientset()
	r := newReconciler(t, client)
	svc, pods := service(), readyPods(250)
	reconcileService(t, r, client, svc, pods)
	got := sliceSizes(listSlices(t, client, "ns"))
	slices.Sort(got)
	if !slices.Equal(got, []int{50, 100, 100}) {
		t.Errorf("slice sizes %v, want [50 100 100]", got)
	}
	assertIdempotent(t, r, client, svc, pods)
}

// TestPartiallyFullSlicesTakeTheRemainder: slices of 62 and 61 endpoints
// plus 127 new ones: a full new slice, and the remaining 27 into the 62
// slice (closest to full): 1 update + 1 create.
func TestPartiallyFullSlicesTakeTheRemainder(t *testing.T) {
	svc, pods := service(), readyPods(250)
	ports, eps := podEndpoints(t, svc, pods)
	client := reconcilertest.NewClientset()
	seed(t, client,
		existingSlice("svc-a", svc, ports, eps[:62]),
		existingSlice("svc-b", svc, ports, eps[62:123]))
	r := newReconciler(t, client)
	reconcileService(t, r, client, svc, pods)
	if w := writes(client); w["update"] != 1 || w["create"] != 1 || len(w) != 2 {
		t.Errorf("writes %v, want 1 update + 1 create", w)
	}
	sizes := map[string]int{}
	for _, s := range listSlices(t, client, "ns") {
		sizes[s.Name] = len(s.Endpoints)
	}
	if sizes["svc-a"] != 89 || sizes["svc-b"] != 61 {
		t.Errorf("sizes %v, want svc-a 89 and svc-b 61 (+ a new 100)", sizes)
	}
	assertIdempotent(t, r, client, svc, pods)
}

// TestWorseAllocationIsRepacked: two full slices half of whose endpoints
// are gone are refilled with new endpoints before anything is created.
func TestWorseAllocationIsRepacked(t *testing.T) {
	svc, pods := service(), readyPods(300)
	ports, eps := podEndpoints(t, svc, pods)
	_, gone := podEndpoints(t, svc, func() []*corev1.Pod {
		var out []*corev1.Pod
		for i := range 100 {
			out = append(out, pod(fmt.Sprintf("gone-%d", i), fmt.Sprintf("10.9.0.%d", i+1), true))
		}
		return out
	}())
	client := reconcilertest.NewClientset()
	seed(t, client,
		existingSlice("svc-a", svc, ports, append(slices.Clone(eps[:50]), gone[:50]...)),
		existingSlice("svc-b", svc, ports, append(slices.Clone(eps[50:100]), gone[50:]...)))
	r := newReconciler(t, client)
	reconcileService(t, r, client, svc, pods)
	if w := writes(client); w["update"] != 2 || w["create"] != 1 || len(w) != 2 {
		t.Errorf("writes %v, want 2 updates + 1 create", w)
	}
	if got := sliceSizes(listSlices(t, client, "ns")); !slices.Equal(got, []int{100, 100, 100}) {
		t.Errorf("sizes %v, want three full slices", got)
	}
	assertIdempotent(t, r, client, svc, pods)
}

// TestChangedEndpointIsUpdatedInPlace: a pod turning not-ready updates its
// slice; the slice keeps its name.
func TestChangedEndpointIsUpdatedInPlace(t *testing.T) {
	client := reconcilertest.NewClientset()
	r := newReconciler(t, client)
	svc, pods := service(), readyPods(3)
	reconcileService(t, r, client, svc, pods)
	before := listSlices(t, client, "ns")
	client.ClearActions()

	pods[1] = pod(pods[1].Name, pods[1].Status.PodIP, false)
	reconcileService(t, r, client, svc, pods)
	if w := writes(client); w["update"] != 1 || len(w) != 1 {
		t.Errorf("writes %v, want 1 update", w)
	}
	after := listSlices(t, client, "ns")
	if len(after) != 1 || after[0].Name != before[0].Name {
		t.Fatalf("slices %v, want the same one slice", after)
	}
	for _, ep := range after[0].Endpoints {
		if ep.TargetRef.Name == pods[1].Name && ptr.Deref(ep.Conditions.Ready, true) {
			t.Errorf("endpoint of %s still ready", pods[1].Name)
		}
	}
	assertIdempotent(t, r, client, svc, pods)
}

// TestLabelUpdates: slices follow the Service's labels, except the reserved
// ones a Service cannot set on its slices.
func TestLabelUpdates(t *testing.T) {
	client := reconcilertest.NewClientset()
	r := newReconciler(t, client)
	svc, pods := service(), readyPods(2)
	reconcileService(t, r, client, svc, pods)
	client.ClearActions()

	svc.Labels = map[string]string{
		"app": "web", "tier": "front",
		discoveryv1.LabelManagedBy:   "someone-else",
		discoveryv1.LabelServiceName: "other",
		corev1.IsHeadlessService:     "",
	}
	reconcileService(t, r, client, svc, pods)
	if w := writes(client); w["update"] != 1 || len(w) != 1 {
		t.Errorf("writes %v, want 1 update", w)
	}
	got := listSlices(t, client, "ns")[0].Labels
	want := map[string]string{"app": "web", "tier": "front", discoveryv1.LabelManagedBy: "test-controller", discoveryv1.LabelServiceName: "svc"}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("labels %v, want %v", got, want)
	}
	assertIdempotent(t, r, client, svc, pods)
}

// TestPortChangeRecyclesSlices: 10 slices of 30 endpoints whose port
// changes: the 300 endpoints need 3 slices, and the 3 creates reuse 3 of
// the 10 old slices: 3 updates + 7 deletes, no create.
func TestPortChangeRecyclesSlices(t *testing.T) {
	svc, pods := service(), readyPods(300)
	ports, eps := podEndpoints(t, svc, pods)
	client := reconcilertest.NewClientset()
	for i := range 10 {
		seed(t, client, existingSlice(fmt.Sprintf("svc-%02d", i), svc, ports, eps[i*30:(i+1)*30]))
	}
	svc.Spec.Ports[0].TargetPort = intstr.FromInt32(9090)
	r := newReconciler(t, client)
	reconcileService(t, r, client, svc, pods)
	if w := writes(client); w["update"] != 3 || w["delete"] != 7 || len(w) != 2 {
		t.Errorf("writes %v, want 3 updates + 7 deletes", w)
	}
	for _, s := range listSlices(t, client, "ns") {
		if len(s.Ports) != 1 || *s.Ports[0].Port != 9090 || len(s.Endpoints) != 100 {
			t.Errorf("slice %s: ports %v, %d endpoints", s.Name, s.Ports, len(s.Endpoints))
		}
	}
	assertIdempotent(t, r, client, svc, pods)
}

// TestUpdatePacking: new endpoints go first into a slice that is being
// updated anyway, so no other slice is written.
func TestUpdatePacking(t *testing.T) {
	svc, pods := service(), readyPods(180)
	ports, eps := podEndpoints(t, svc, pods)
	client := reconcilertest.NewClientset()
	seed(t, client,
		existingSlice("svc-a", svc, ports, eps[:80]),
		existingSlice("svc-b", svc, ports, eps[80:150]))
	// 10 pods of svc-a go, the 30 pods not yet in any slice stay.
	pods = append(slices.Clone(pods[10:150]), pods[150:]...)
	r := newReconciler(t, client)
	reconcileService(t, r, client, svc, pods)
	if w := writes(client); w["update"] != 1 || len(w) != 1 {
		t.Errorf("writes %v, want 1 update", w)
	}
	sizes := map[string]int{}
	for _, s := range listSlices(t, client, "ns") {
		sizes[s.Name] = len(s.Endpoints)
	}
	if sizes["svc-a"] != 100 || sizes["svc-b"] != 70 {
		t.Errorf("sizes %v, want svc-a 100, svc-b 70", sizes)
	}
	assertIdempotent(t, r, client, svc, pods)
}

// TestOwnerRecreatedReplacesSlices: with ownership enforced, slices of a
// previous owner with the same name (another UID) are deleted, not reused.
func TestOwnerRecreatedReplacesSlices(t *testing.T) {
	svc, pods := service(), readyPods(5)
	ports, eps := podEndpoints(t, svc, pods)
	client := reconcilertest.NewClientset()
	seed(t, client, existingSlice("svc-old", svc, ports, eps))
	svc.UID = "svc-uid-2"
	r := newReconciler(t, client, WithOwnershipEnforced(true))
	reconcileService(t, r, client, svc, pods)
	if w := writes(client); w["create"] != 1 || w["delete"] != 1 || len(w) != 2 {
		t.Errorf("writes %v, want 1 create + 1 delete", w)
	}
	got := listSlices(t, client, "ns")
	if len(got) != 1 || got[0].Name == "svc-old" || ownerOf(got[0]) != "svc-uid-2" {
		t.Errorf("slices after owner change: %+v", got)
	}
	assertIdempotent(t, r, client, svc, pods)
}

// TestNamedTargetPorts: a named target port resolves per pod; pods that
// name different numbers land in different slices.
func TestNamedTargetPorts(t *testing.T) {
	svc := service()
	svc.Spec.Ports[0].TargetPort = intstr.FromString("http")
	pods := readyPods(4)
	pods[3].Spec.Containers[0].Ports[0].ContainerPort = 8443
	client := reconcilertest.NewClientset()
	r := newReconciler(t, client)
	reconcileService(t, r, client, svc, pods)
	byPort := map[int32]int{}
	for _, s := range listSlices(t, client, "ns") {
		byPort[*s.Ports[0].Port] += len(s.Endpoints)
	}
	if byPort[8080] != 3 || byPort[8443] != 1 || len(byPort) != 2 {
		t.Errorf("endpoints by port %v, want 3 on 8080 and 1 on 8443", byPort)
	}
	assertIdempotent(t, r, client, svc, pods)
}

// TestMaxEndpointsPerSlice: the maximum is respected for any value.
func TestMaxEndpointsPerSlice(t *testing.T) {
	for _, tc := range []struct {
		max  int
		want []int
	}{
		{50, slices.Repeat([]int{50}, 15)},
		{80, append(slices.Repeat([]int{80}, 9), 30)},
		{150, slices.Repeat([]int{150}, 5)},
		{250, slices.Repeat([]int{250}, 3)},
		{500, []int{250, 500}},
	} {
		t.Run(fmt.Sprint(tc.max), func(t *testing.T) {
			client := reconcilertest.NewClientset()
			r := newReconciler(t, client, WithMaxEndpointsPerSlice(tc.max))
			svc, pods := service(), readyPods(750)
			reconcileService(t, r, client, svc, pods)
			got := sliceSizes(listSlices(t, client, "ns"))
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.want))
			if !slices.Equal(got, want) {
				t.Errorf("sizes %v, want %v", got, want)
			}
			assertIdempotent(t, r, client, svc, pods)
		})
	}
}

// TestOwnerBeingDeletedCreatesNothing: while the owner is being deleted no
// slice is created (they would only be garbage collected).
func TestOwnerBeingDeletedCreatesNothing(t *testing.T) {
	client := reconcilertest.NewClientset()
	r := newReconciler(t, client)
	svc := service()
	svc.DeletionTimestamp = ptr.To(metav1.Now())
	reconcileService(t, r, client, svc, readyPods(3))
	if w := writes(client); len(w) != 0 {
		t.Errorf("writes %v for an owner being deleted", w)
	}
}

// TestNodeMissing: a pod whose node is unknown is left out and reported;
// the other pods are reconciled.
func TestNodeMissing(t *testing.T) {
	svc, pods := service(), readyPods(3)
	pods[2].Spec.NodeName = "node-gone"
	desired, types, err := DesiredFromServicePods(svc, pods, defaultNodes)
	if !errors.Is(err, ErrNodeNotFound) || !strings.Contains(err.Error(), "pod-2 on node-gone") {
		t.Fatalf("error %v, want ErrNodeNotFound naming pod-2", err)
	}
	client := reconcilertest.NewClientset()
	r := newReconciler(t, client)
	if err := r.Reconcile(context.Background(), Input{Owner: svc, OwnerGVK: serviceGVK, Desired: desired, AddressTypes: types, Labeler: ServiceLabels{svc}}); err != nil {
		t.Fatal(err)
	}
	if got := sliceSizes(listSlices(t, client, "ns")); !slices.Equal(got, []int{2}) {
		t.Errorf("sizes %v, want the 2 pods with a node", got)
	}
}

// TestTrafficDistributionHints: PreferClose gives ready endpoints a hint
// for their zone; dropping it clears the hints with one update.
func TestTrafficDistributionHints(t *testing.T) {
	client := reconcilertest.NewClientset()
	r := newReconciler(t, client, WithTrafficDistribution(true))
	svc, pods := service(), readyPods(3)
	pods[2] = pod("pod-2", pods[2].Status.PodIP, false)
	svc.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
	reconcileService(t, r, client, svc, pods)
	for _, ep := range listSlices(t, client, "ns")[0].Endpoints {
		ready := ptr.Deref(ep.Conditions.Ready, false)
		if ready && (ep.Hints == nil || len(ep.Hints.ForZones) != 1 || ep.Hints.ForZones[0].Name != "zone-a") {
			t.Errorf("ready endpoint %v has hints %v, want zone-a", ep.Addresses, ep.Hints)
		}
		if !ready && ep.Hints != nil {
			t.Errorf("not-ready endpoint %v has hints %v", ep.Addresses, ep.Hints)
		}
	}
	assertIdempotent(t, r, client, svc, pods)

	client.ClearActions()
	svc.Spec.TrafficDistribution = nil
	reconcileService(t, r, client, svc, pods)
	if w := writes(client); w["update"] != 1 || len(w) != 1 {
		t.Errorf("writes %v, want 1 update clearing hints", w)
	}
	for _, ep := range listSlices(t, client, "ns")[0].Endpoints {
		if ep.Hints != nil {
			t.Errorf("hints %v left after trafficDistribution was removed", ep.Hints)
		}
	}
}

// TestHeadlessWithoutPorts: a headless Service without ports gets slices
// without ports, the headless label, and hostnames for pods in its
// subdomain.
func TestHeadlessWithoutPorts(t *testing.T) {
	svc := service()
	svc.Spec.ClusterIP = corev1.ClusterIPNone
	svc.Spec.Ports = nil
	pods := readyPods(2)
	pods[0].Spec.Hostname, pods[0].Spec.Subdomain = "web-0", "svc"
	pods[1].Spec.Hostname, pods[1].Spec.Subdomain = "web-1", "other"
	client := reconcilertest.NewClientset()
	r := newReconciler(t, client)
	reconcileService(t, r, client, svc, pods)
	got := listSlices(t, client, "ns")
	if len(got) != 1 || len(got[0].Ports) != 0 || len(got[0].Endpoints) != 2 {
		t.Fatalf("slices %+v, want one slice of 2 endpoints and no ports", got)
	}
	if _, ok := got[0].Labels[corev1.IsHeadlessService]; !ok {
		t.Errorf("labels %v lack %s", got[0].Labels, corev1.IsHeadlessService)
	}
	hostnames := map[string]string{}
	for _, ep := range got[0].Endpoints {
		hostnames[ep.TargetRef.Name] = ptr.Deref(ep.Hostname, "")
	}
	if hostnames["pod-0"] != "web-0" || hostnames["pod-1"] != "" {
		t.Errorf("hostnames %v, want only pod-0's (its subdomain is the service)", hostnames)
	}
	assertIdempotent(t, r, client, svc, pods)
}

// TestTerminatingEndpoints: a terminating pod stays an endpoint, not
// ready, serving as long as it is Ready, terminating (KEP-1672); its end
// removes it.
func TestTerminatingEndpoints(t *testing.T) {
	svc, pods := service(), readyPods(2)
	pods[1].DeletionTimestamp = ptr.To(metav1.Now())
	client := reconcilertest.NewClientset()
	r := newReconciler(t, client)
	reconcileService(t, r, client, svc, pods)
	var found bool
	for _, ep := range listSlices(t, client, "ns")[0].Endpoints {
		if ep.TargetRef.Name != "pod-1" {
			continue
		}
		found = true
		c := ep.Conditions
		if ptr.Deref(c.Ready, true) || !ptr.Deref(c.Serving, false) || !ptr.Deref(c.Terminating, false) {
			t.Errorf("terminating endpoint conditions %+v, want ready=false serving=true terminating=true", c)
		}
	}
	if !found {
		t.Fatal("terminating pod has no endpoint")
	}
	pods[1].Status.Phase = corev1.PodSucceeded
	reconcileService(t, r, client, svc, pods)
	if got := sliceSizes(listSlices(t, client, "ns")); !slices.Equal(got, []int{1}) {
		t.Errorf("sizes %v after the pod ended, want [1]", got)
	}
}

// TestPlanIsDeterministic: the same input, in any order, gives the same
// plan byte for byte.
func TestPlanIsDeterministic(t *testing.T) {
	svc, pods := service(), readyPods(450)
	ports, eps := podEndpoints(t, svc, pods)
	existing := []*discoveryv1.EndpointSlice{
		existingSlice("svc-a", svc, ports, eps[:70]),
		existingSlice("svc-b", svc, ports, eps[70:95]),
		existingSlice("svc-c", svc, ports, eps[95:180]),
	}
	r := newReconciler(t, reconcilertest.NewClientset())
	planJSON := func(pods []*corev1.Pod, existing []*discoveryv1.EndpointSlice) string {
		desired, types, err := DesiredFromServicePods(svc, pods, defaultNodes)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := r.Plan(Input{Owner: svc, OwnerGVK: serviceGVK, Desired: desired, AddressTypes: types, Existing: existing, Labeler: ServiceLabels{svc}})
		if err != nil {
			t.Fatal(err)
		}
		raw, err := json.Marshal([][]*discoveryv1.EndpointSlice{plan.Create, plan.Update, plan.Delete})
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	want := planJSON(pods, existing)
	for i := range 5 {
		shuffledPods := slices.Clone(pods)
		shuffledExisting := slices.Clone(existing)
		rotate(shuffledPods, 37*(i+1))
		rotate(shuffledExisting, i+1)
		slices.Reverse(shuffledPods[:100])
		if got := planJSON(shuffledPods, shuffledExisting); got != want {
			t.Fatalf("plan differs for the same input in another order (run %d)", i)
		}
	}
}

func rotate[T any](s []T, n int) {
	n %= len(s)
	slices.Reverse(s[:n])
	slices.Reverse(s[n:])
	slices.Reverse(s)
}

// TestOthersAnnotationsSurvive: an annotation someone else put on a slice
// is kept through updates; the trigger time is set, then removed.
func TestOthersAnnotationsSurvive(t *testing.T) {
	svc, pods := service(), readyPods(2)
	ports, eps := podEndpoints(t, svc, pods[:1])
	s := existingSlice("svc-a", svc, ports, eps)
	s.Annotations = map[string]string{"example.com/note": "keep me"}
	client := reconcilertest.NewClientset()
	seed(t, client, s)
	r := newReconciler(t, client)
	in := serviceInput(t, client, svc, pods)
	in.TriggerTime = time.Date(2026, 11, 22, 5, 0, 0, 123, time.UTC)
	if err := r.Reconcile(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	got := listSlices(t, client, "ns")[0].Annotations
	if got["example.com/note"] != "keep me" || got[corev1.EndpointsLastChangeTriggerTime] != "2026-11-22T05:00:00.000000123Z" {
		t.Errorf("annotations %v", got)
	}

	pods[1] = pod(pods[1].Name, pods[1].Status.PodIP, false)
	reconcileService(t, r, client, svc, pods) // zero trigger time
	got = listSlices(t, client, "ns")[0].Annotations
	if _, ok := got[corev1.EndpointsLastChangeTriggerTime]; ok || got["example.com/note"] != "keep me" {
		t.Errorf("annotations %v, want the note kept and no trigger time", got)
	}
}

// TestFailedWriteDoesNotStopOthers: one failing write does not abandon the
// independent ones; the error names it, and the tracker holds only what was
// written.
func TestFailedWriteDoesNotStopOthers(t *testing.T) {
	client := reconcilertest.NewClientset()
	calls := 0
	client.PrependReactor("create", "endpointslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		if calls == 2 {
			return true, nil, apierrors.NewInternalError(errors.New("etcd hiccup"))
		}
		return false, nil, nil
	})
	r := newReconciler(t, client)
	svc, pods := service(), readyPods(300)
	err := r.Reconcile(context.Background(), serviceInput(t, client, svc, pods))
	if err == nil || !strings.Contains(err.Error(), "etcd hiccup") {
		t.Fatalf("error %v, want the failed create reported", err)
	}
	if got := listSlices(t, client, "ns"); len(got) != 2 {
		t.Fatalf("%d slices written, want the 2 creates that did not fail", len(got))
	}
	// The next reconcile sees both slices and writes only the missing one.
	client.ClearActions()
	reconcileService(t, r, client, svc, pods)
	if w := writes(client); w["create"] != 1 || len(w) != 1 {
		t.Errorf("writes %v, want the one missing create", w)
	}
	assertIdempotent(t, r, client, svc, pods)
}

// TestStaleCacheIsDetected: planning over a list that lacks what was just
// written is refused with ErrStaleCache and writes nothing. The echo of
// our own write asks for no sync, unless a plan was refused as stale
// since: that plan waits for it (the caller would otherwise wait for a
// requeue of its own).
func TestStaleCacheIsDetected(t *testing.T) {
	client := reconcilertest.NewClientset()
	r := newReconciler(t, client)
	svc := service()
	stale := serviceInput(t, client, svc, readyPods(3)) // lists nothing yet
	reconcileService(t, r, client, svc, readyPods(3))
	written := listSlices(t, client, "ns")
	if r.Tracker().ShouldSync(written[0]) {
		t.Error("the echo of our own write asks for a sync")
	}
	client.ClearActions()
	err := r.Reconcile(context.Background(), stale)
	if !errors.Is(err, ErrStaleCache) {
		t.Fatalf("error %v, want ErrStaleCache", err)
	}
	if w := writes(client); len(w) != 0 {
		t.Errorf("writes %v on a stale cache", w)
	}
	if !r.Tracker().ShouldSync(written[0]) {
		t.Error("after a plan refused as stale, the echo it waits for asks for no sync")
	}
	if err := r.Reconcile(context.Background(), serviceInput(t, client, svc, readyPods(3))); err != nil {
		t.Fatal(err)
	}
	if r.Tracker().ShouldSync(written[0]) {
		t.Error("after a plan over a current list, the echo of our own write asks for a sync")
	}
}

// TestForeignSlicesUntouched: slices with another managed-by value are
// never written, even with ownership enforced.
func TestForeignSlicesUntouched(t *testing.T) {
	svc, pods := service(), readyPods(2)
	ports, eps := podEndpoints(t, svc, pods)
	theirs := existingSlice("svc-theirs", svc, ports, eps)
	theirs.Labels[discoveryv1.LabelManagedBy] = "endpointslice-controller.k8s.io"
	theirs.OwnerReferences = nil
	client := reconcilertest.NewClientset()
	seed(t, client, theirs)
	r := newReconciler(t, client, WithOwnershipEnforced(true))
	reconcileService(t, r, client, svc, pods)
	for _, a := range client.Actions() {
		if n, ok := a.(k8stesting.DeleteAction); ok && n.GetName() == "svc-theirs" {
			t.Error("deleted a slice of another controller")
		}
		if u, ok := a.(k8stesting.UpdateAction); ok && u.GetObject().(*discoveryv1.EndpointSlice).Name == "svc-theirs" {
			t.Error("updated a slice of another controller")
		}
	}
}

// TestInputsAreNotMutated: Plan and Apply leave the existing slices and
// the desired endpoints as they were.
func TestInputsAreNotMutated(t *testing.T) {
	svc, pods := service(), readyPods(250)
	ports, eps := podEndpoints(t, svc, pods[:150])
	client := reconcilertest.NewClientset()
	seed(t, client, existingSlice("svc-a", svc, ports, eps[:70]), existingSlice("svc-b", svc, ports, eps[70:]))
	svc.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
	pods[3] = pod(pods[3].Name, pods[3].Status.PodIP, false)
	in := serviceInput(t, client, svc, pods[10:])
	before := deepCopyInput(in)
	r := newReconciler(t, client, WithTrafficDistribution(true), WithPlaceholder(true))
	if err := r.Reconcile(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(in.Existing, before.Existing) {
		t.Error("existing slices were modified")
	}
	if !equality.Semantic.DeepEqual(in.Desired, before.Desired) {
		t.Error("desired endpoints were modified")
	}
}

func deepCopyInput(in Input) Input {
	out := in
	out.Existing = nil
	for _, s := range in.Existing {
		out.Existing = append(out.Existing, s.DeepCopy())
	}
	out.Desired = nil
	for _, g := range in.Desired {
		c := EndpointGroup{AddressType: g.AddressType}
		for _, p := range g.Ports {
			c.Ports = append(c.Ports, *p.DeepCopy())
		}
		for _, ep := range g.Endpoints {
			c.Endpoints = append(c.Endpoints, *ep.DeepCopy())
		}
		out.Desired = append(out.Desired, c)
	}
	return out
}

// TestCustomOwner: any object with a GVK owns slices; a plan can be
// decorated before it is applied.
func TestCustomOwner(t *testing.T) {
	owner := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "import", Namespace: "ns", UID: "import-uid"}}
	gvk := discoveryv1.SchemeGroupVersion.WithKind("Anything")
	gvk.Group, gvk.Version, gvk.Kind = "multicluster.x-k8s.io", "v1beta1", "ServiceImport"
	client := reconcilertest.NewClientset()
	r := newReconciler(t, client, WithOwnershipEnforced(true))
	in := Input{
		Owner: owner, OwnerGVK: gvk,
		AddressTypes: []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4},
		Desired: []EndpointGroup{{AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.1.0.1"}, Zone: ptr.To("east-a"), Hints: &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "east-a"}}}},
		}}},
		Labeler: LabelerFunc(func() (map[string]string, map[string]string) {
			return map[string]string{"source": "east"}, nil
		}),
	}
	plan, err := r.Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	plan.Create[0].Annotations = map[string]string{"decorated": "yes"}
	if err := r.Apply(context.Background(), plan); err != nil {
		t.Fatal(err)
	}
	got := listSlices(t, client, "ns")[0]
	ref := metav1.GetControllerOf(got)
	if ref == nil || ref.Kind != "ServiceImport" || ref.APIVersion != "multicluster.x-k8s.io/v1beta1" || ref.UID != "import-uid" {
		t.Errorf("controller ref %+v", ref)
	}
	if got.Annotations["decorated"] != "yes" || got.Labels["source"] != "east" || !strings.HasPrefix(got.Name, "import-") {
		t.Errorf("slice %s: labels %v annotations %v", got.Name, got.Labels, got.Annotations)
	}
	if got.Endpoints[0].Hints == nil {
		t.Error("hints given by the caller were dropped with traffic distribution off")
	}
}

// TestUnsupportedAddressTypeIsDeleted: slices of an address type the owner
// no longer has are deleted.
func TestUnsupportedAddressTypeIsDeleted(t *testing.T) {
	svc := service()
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	p := pod("pod-0", "10.0.0.1", true)
	p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}
	client := reconcilertest.NewClientset()
	r := newReconciler(t, client)
	reconcileService(t, r, client, svc, []*corev1.Pod{p})
	svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	reconcileService(t, r, client, svc, []*corev1.Pod{p})
	got := listSlices(t, client, "ns")
	if len(got) != 1 || got[0].AddressType != discoveryv1.AddressTypeIPv4 {
		t.Errorf("slices %+v, want only the IPv4 one", got)
	}
}

// TestNamespaceTerminatingStopsQuietly: when the namespace is being
// deleted, the reconcile ends without error and without more writes.
func TestNamespaceTerminatingStopsQuietly(t *testing.T) {
	client := reconcilertest.NewClientset()
	client.PrependReactor("create", "endpointslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
		err := apierrors.NewForbidden(discoveryv1.Resource("endpointslices"), "", errors.New("namespace ns is being terminated"))
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
		return true, nil, err
	})
	r := newReconciler(t, client)
	if err := r.Reconcile(context.Background(), serviceInput(t, client, service(), readyPods(250))); err != nil {
		t.Fatalf("error %v, want none while the namespace terminates", err)
	}
	if w := writes(client); w["create"] != 1 || len(w) != 1 {
		t.Errorf("writes %v, want the one refused create and nothing after it", w)
	}
}

// TestFailedWriteRecordsEvent: a failed write leaves a Warning event on the
// owner.
func TestFailedWriteRecordsEvent(t *testing.T) {
	client := reconcilertest.NewClientset()
	client.PrependReactor("create", "endpointslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("etcd hiccup"))
	})
	recorder := events.NewFakeRecorder(10)
	r := newReconciler(t, client, WithEventRecorder(recorder))
	if err := r.Reconcile(context.Background(), serviceInput(t, client, service(), readyPods(1))); err == nil {
		t.Fatal("no error for a failed create")
	}
	select {
	case e := <-recorder.Events:
		if !strings.HasPrefix(e, "Warning FailedToUpdateEndpointSlices") || !strings.Contains(e, "etcd hiccup") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no event recorded")
	}
}

// TestRepeatedRefusalReadsTheSame: a create the API server refuses names
// the slice it generated a name for ("web-xsctx" is forbidden); the error
// and the event leave that name out, so that the same refusal tried again
// reads the same (a condition quoting it is not rewritten, the events
// aggregate), and the error still answers apierrors' questions.
func TestRepeatedRefusalReadsTheSame(t *testing.T) {
	client := reconcilertest.NewClientset()
	tries := 0
	client.PrependReactor("create", "endpointslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
		tries++
		name := action.(k8stesting.CreateAction).GetObject().(*discoveryv1.EndpointSlice).GenerateName + fmt.Sprintf("x%04d", tries)
		return true, nil, apierrors.NewForbidden(discoveryv1.Resource("endpointslices"), name,
			errors.New("exceeded quota: no-slices, requested: count/endpointslices.discovery.k8s.io=1"))
	})
	recorder := events.NewFakeRecorder(10)
	r := newReconciler(t, client, WithEventRecorder(recorder))
	var messages, notes []string
	for range 2 {
		err := r.Reconcile(context.Background(), serviceInput(t, client, service(), readyPods(1)))
		if !apierrors.IsForbidden(err) {
			t.Fatalf("error %v, want one that is Forbidden", err)
		}
		messages = append(messages, err.Error())
		notes = append(notes, <-recorder.Events)
	}
	if messages[0] != messages[1] || notes[0] != notes[1] {
		t.Errorf("the same refusal reads differently:\n%q\n%q\nevents %q", messages[0], messages[1], notes)
	}
	if want := `"svc-*" is forbidden: exceeded quota`; !strings.Contains(messages[0], want) || strings.Contains(messages[0], "x0001") {
		t.Errorf("error %q, want the generated name left out (%s)", messages[0], want)
	}
}

// TestGroupSlicesDuplicates: an address listed in two slices with different
// conditions is taken once, the more available version, whatever the order
// of the slices; groups and endpoints come out in one canonical order.
func TestGroupSlicesDuplicates(t *testing.T) {
	port := []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80)}}
	ep := func(ip string, ready, terminating bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{
			Ready: ptr.To(ready), Serving: ptr.To(ready || terminating), Terminating: ptr.To(terminating)}}
	}
	a := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-a"}, AddressType: discoveryv1.AddressTypeIPv4, Ports: port,
		Endpoints: []discoveryv1.Endpoint{ep("10.0.0.2", false, true), ep("10.0.0.1", true, false)}}
	b := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-b"}, AddressType: discoveryv1.AddressTypeIPv4, Ports: port,
		Endpoints: []discoveryv1.Endpoint{ep("10.0.0.2", true, false), ep("10.0.0.3", false, false)}}
	want := GroupSlices([]discoveryv1.EndpointSlice{a, b})
	if got := GroupSlices([]discoveryv1.EndpointSlice{b, a}); !equality.Semantic.DeepEqual(got, want) {
		t.Fatalf("order of slices matters:\n%+v\nvs\n%+v", got, want)
	}
	if len(want) != 1 || len(want[0].Endpoints) != 3 {
		t.Fatalf("groups %+v, want one group of 3 endpoints", want)
	}
	var got []string
	for _, e := range want[0].Endpoints {
		got = append(got, fmt.Sprintf("%s ready=%t", e.Addresses[0], *e.Conditions.Ready))
	}
	if wantEps := []string{"10.0.0.1 ready=true", "10.0.0.2 ready=true", "10.0.0.3 ready=false"}; !slices.Equal(got, wantEps) {
		t.Errorf("endpoints %v, want %v", got, wantEps)
	}
}

// TestHostnameWithClusterIP: a pod whose subdomain is the Service's name
// gets its hostname on the Service's endpoints whether or not the Service
// is headless (upstream's ShouldSetHostname).
func TestHostnameWithClusterIP(t *testing.T) {
	p := pod("p", "10.0.0.1", true)
	p.Spec.Hostname, p.Spec.Subdomain = "web-0", "svc"
	_, eps := podEndpoints(t, service(), []*corev1.Pod{p})
	if got := ptr.Deref(eps[0].Hostname, ""); got != "web-0" {
		t.Errorf("hostname %q, want web-0", got)
	}
}

// TestNamedPortOfSidecar: a named targetPort resolves in the containers
// first, then in sidecars (init containers with restartPolicy Always);
// ordinary init containers' ports are not served.
func TestNamedPortOfSidecar(t *testing.T) {
	svc := service()
	svc.Spec.Ports[0].TargetPort = intstr.FromString("proxy")
	withPort := func(restart *corev1.ContainerRestartPolicy, number int32) *corev1.Pod {
		p := pod("p", "10.0.0.1", true)
		p.Spec.InitContainers = []corev1.Container{{Name: "init", RestartPolicy: restart,
			Ports: []corev1.ContainerPort{{Name: "proxy", ContainerPort: number, Protocol: corev1.ProtocolTCP}}}}
		return p
	}
	ports, _ := podEndpoints(t, svc, []*corev1.Pod{withPort(ptr.To(corev1.ContainerRestartPolicyAlways), 15001)})
	if len(ports) != 1 || *ports[0].Port != 15001 {
		t.Errorf("sidecar's port: %+v, want 15001", ports)
	}
	ports, _ = podEndpoints(t, svc, []*corev1.Pod{withPort(nil, 15001)})
	if len(ports) != 0 {
		t.Errorf("an ordinary init container's port was resolved: %+v", ports)
	}
	p := withPort(ptr.To(corev1.ContainerRestartPolicyAlways), 15001)
	p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{Name: "proxy", ContainerPort: 9000, Protocol: corev1.ProtocolTCP})
	ports, _ = podEndpoints(t, svc, []*corev1.Pod{p})
	if len(ports) != 1 || *ports[0].Port != 9000 {
		t.Errorf("a container's port must win over a sidecar's: %+v", ports)
	}
}

// TestNewEndpointsStayInTheirPortSet: an endpoint added to an unchanged
// slice goes to a slice of its own port set, never to a fuller one of
// another (found by the differential test against kube-controller-manager).
func TestNewEndpointsStayInTheirPortSet(t *testing.T) {
	svc := service()
	svc.Spec.Ports[0].TargetPort = intstr.FromString("http")
	// Pods 0-2 and 5 on 8080, 3 and 4 on 8443; one port set gets a new
	// endpoint while the other's slice stays unchanged (both orders).
	pods := readyPods(6)
	for _, i := range []int{3, 4} {
		pods[i].Spec.Containers[0].Ports[0].ContainerPort = 8443
	}
	portOf := map[string]int32{}
	for _, p := range pods {
		portOf[p.Name] = p.Spec.Containers[0].Ports[0].ContainerPort
	}
	for _, tc := range []struct{ before, after []int }{{[]int{0, 1, 2, 3}, []int{0, 1, 2, 3, 4}}, {[]int{0, 3, 4}, []int{0, 3, 4, 5}}} {
		pick := func(idx []int) []*corev1.Pod {
			var out []*corev1.Pod
			for _, i := range idx {
				out = append(out, pods[i])
			}
			return out
		}
		client := reconcilertest.NewClientset()
		r := newReconciler(t, client)
		reconcileService(t, r, client, svc, pick(tc.before))
		reconcileService(t, r, client, svc, pick(tc.after))
		for _, s := range listSlices(t, client, "ns") {
			for _, ep := range s.Endpoints {
				if want := portOf[ep.TargetRef.Name]; *s.Ports[0].Port != want {
					t.Errorf("pods %v then %v: %s (port %d) placed in the slice of port %d", tc.before, tc.after, ep.TargetRef.Name, want, *s.Ports[0].Port)
				}
			}
		}
		assertIdempotent(t, r, client, svc, pick(tc.after))
	}
}

// TestInvalidInputIsAnError: no owner (also a typed nil, as a failed
// conversion leaves it), no kind and an unknown address type are errors,
// not panics.
func TestInvalidInputIsAnError(t *testing.T) {
	client := reconcilertest.NewClientset()
	r := newReconciler(t, client)
	good := serviceInput(t, client, service(), readyPods(1))
	var nilService *corev1.Service
	for name, mutate := range map[string]func(*Input){
		"no owner":             func(in *Input) { in.Owner = nil },
		"typed nil owner":      func(in *Input) { in.Owner = nilService },
		"no kind":              func(in *Input) { in.OwnerGVK.Kind = "" },
		"unknown address type": func(in *Input) { in.AddressTypes = []discoveryv1.AddressType{"IPv5"} },
	} {
		in := good
		mutate(&in)
		if _, err := r.Plan(in); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestDeletionSeenBeforeOwnWrite: when a slice this reconciler creates is
// deleted and its delete event observed before the create's response is
// recorded (the response raced the watch), the record is dropped: the next
// reconcile is not stale and recreates the slice.
func TestDeletionSeenBeforeOwnWrite(t *testing.T) {
	client := reconcilertest.NewClientset()
	r := newReconciler(t, client)
	// Someone deletes each slice as it is created, and the delete event
	// reaches the tracker before the create returns.
	client.PrependReactor("create", "endpointslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
		s := action.(k8stesting.CreateAction).GetObject().(*discoveryv1.EndpointSlice).DeepCopy()
		s.Name, s.UID = s.GenerateName+"gone", "gone-uid"
		r.Tracker().Observed(s)
		return true, s, nil
	})
	svc := service()
	reconcileService(t, r, client, svc, readyPods(1))
	if err := r.Tracker().Stale(svc.UID, nil); err != nil {
		t.Fatalf("after the deletion was seen first: %v, want no record of the gone slice", err)
	}
	client.ReactionChain = client.ReactionChain[1:] // creates succeed again
	reconcileService(t, r, client, svc, readyPods(1))
	if got := listSlices(t, client, "ns"); len(got) != 1 {
		t.Fatalf("%d slices after the next reconcile, want the slice recreated", len(got))
	}
	if len(r.Tracker().deletedFirst) != 0 {
		t.Errorf("deletions seen first still held after the owner's Apply: %v", r.Tracker().deletedFirst)
	}
}

// TestConcurrentWrites: WithConcurrentWrites sends a plan's writes
// several at once, yet creates still all end before the first update and
// updates before the first delete, failures are reported in the plan's
// order (the same words as one write at a time gives), and the slices
// written are those one write at a time writes.
func TestConcurrentWrites(t *testing.T) {
	const atOnce = 4
	refuse := func(client *reconcilertest.Clientset) {
		client.PrependReactor("create", "endpointslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
			s := action.(k8stesting.CreateAction).GetObject().(*discoveryv1.EndpointSlice)
			for _, ep := range s.Endpoints {
				if a := ep.Addresses[0]; a == podIP(200) || a == podIP(700) {
					return true, nil, apierrors.NewInternalError(fmt.Errorf("refused the slice holding %s", a))
				}
			}
			return false, nil, nil
		})
	}
	svc, pods := service(), readyPods(1000)

	sequential := reconcilertest.NewClientset()
	refuse(sequential)
	wantErr := newReconciler(t, sequential).Reconcile(context.Background(), serviceInput(t, sequential, svc, pods))

	client := reconcilertest.NewClientset()
	refuse(client)
	// The first atOnce creates wait for one another: written one at a
	// time, they would wait until the timeout. (Outside the fake
	// clientset, which runs one reactor at a time.)
	together := &meetingCreates{EndpointSlicesGetter: client.DiscoveryV1(), atOnce: atOnce, met: make(chan struct{})}
	r, err := New(together, "test-controller", WithConcurrentWrites(atOnce))
	if err != nil {
		t.Fatal(err)
	}
	err = r.Reconcile(context.Background(), serviceInput(t, client, svc, pods))
	if err == nil || wantErr == nil || err.Error() != wantErr.Error() {
		t.Fatalf("error:\n%v\nwant, as one write at a time says:\n%v", err, wantErr)
	}
	if !strings.Contains(err.Error(), podIP(200)) || strings.Index(err.Error(), podIP(200)) > strings.Index(err.Error(), podIP(700)) {
		t.Errorf("error %v: want both refusals, in the plan's order", err)
	}
	if got := len(listSlices(t, client, "ns")); got != 8 {
		t.Fatalf("%d slices written, want the 8 creates not refused", got)
	}

	// A plan of creates (the two refused), updates and deletes: a quarter
	// of the pods left, some of them no longer ready.
	pods = pods[:250]
	for _, p := range pods[:100] {
		p.Status.Conditions[0].Status = corev1.ConditionFalse
	}
	client.ClearWrites()
	reconcileService(t, r, client, svc, pods)
	phase := map[string]int{"create": 0, "update": 1, "delete": 2}
	last := 0
	seen := map[string]int{}
	for _, w := range client.Writes() {
		if phase[w.Verb] < last {
			t.Errorf("%s after a write of a later kind: %v", w, client.Writes())
			break
		}
		last = phase[w.Verb]
		seen[w.Verb]++
	}
	if seen["update"] == 0 || seen["delete"] == 0 {
		t.Errorf("writes %v: the test wants updates and deletes", seen)
	}
	assertIdempotent(t, r, client, svc, pods)
}

// meetingCreates holds each of the first atOnce creates until all of them
// are in flight (or 30 s have passed: then they fail).
type meetingCreates struct {
	discoveryclient.EndpointSlicesGetter
	atOnce   int32
	inFlight atomic.Int32
	met      chan struct{}
}

func (m *meetingCreates) EndpointSlices(namespace string) discoveryclient.EndpointSliceInterface {
	return meetingSlices{m.EndpointSlicesGetter.EndpointSlices(namespace), m}
}

type meetingSlices struct {
	discoveryclient.EndpointSliceInterface
	m *meetingCreates
}

func (s meetingSlices) Create(ctx context.Context, slice *discoveryv1.EndpointSlice, opts metav1.CreateOptions) (*discoveryv1.EndpointSlice, error) {
	if n := s.m.inFlight.Add(1); n == s.m.atOnce {
		close(s.m.met)
	}
	select {
	case <-s.m.met:
	case <-time.After(30 * time.Second):
		return nil, errors.New("creates were not sent together")
	}
	return s.EndpointSliceInterface.Create(ctx, slice, opts)
}

// TestTrackerStaleNamesWhatIsMissing: a list is stale when it lacks one
// of the slices written, holds one older than written, or still holds one
// deleted; it is current when it holds every slice written as written or
// newer, besides slices the tracker never wrote.
func TestTrackerStaleNamesWhatIsMissing(t *testing.T) {
	owner := service().UID
	slice := func(name string, generation int64) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: generation}}
	}
	tr := NewTracker()
	for i, name := range []string{"a", "b", "c"} {
		tr.written(owner, slice(name, int64(i+1)))
	}
	tr.deleted(owner, slice("gone", 1))
	for _, c := range []struct {
		name   string
		listed []*discoveryv1.EndpointSlice
		want   string // in the error; "" for none
	}{
		{"all, one newer, one not ours", []*discoveryv1.EndpointSlice{slice("c", 3), slice("a", 1), slice("b", 5), slice("x", 1)}, ""},
		{"one missing", []*discoveryv1.EndpointSlice{slice("a", 1), slice("c", 3), slice("x", 1)}, "written EndpointSlice b is not listed yet"},
		{"one older", []*discoveryv1.EndpointSlice{slice("a", 1), slice("b", 1), slice("c", 3)}, "EndpointSlice b has generation 1, 2 was written"},
		{"one deleted", []*discoveryv1.EndpointSlice{slice("a", 1), slice("b", 2), slice("c", 3), slice("gone", 1)}, "gone is still listed after its deletion"},
	} {
		err := tr.Stale(owner, c.listed)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (!errors.Is(err, ErrStaleCache) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want ErrStaleCache saying %q", c.name, err, c.want)
		}
	}
}
