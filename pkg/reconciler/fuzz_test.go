package reconciler

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/reconcilertest"
)

// FuzzReconcile checks the reconciler's invariants on arbitrary existing
// slices and desired endpoints drawn from 64 endpoints and two port sets:
// after applying, every desired endpoint is in exactly one slice of its
// group and in its desired version, no slice exceeds the maximum, no slice
// of another owner survives when ownership is enforced, planning again
// writes nothing, and the inputs are unchanged.
//
// desiredSpec: one byte per endpoint: bits 0-5 the endpoint, bit 6 the port
// set, bit 7 ready. existingSpec: chunks of a header byte (bits 0-2 the
// number of endpoints, bit 3 the port set, bit 4 another owner) followed by
// that many endpoint bytes (bits 0-5).
func FuzzReconcile(f *testing.F) {
	f.Add(uint8(3), []byte{}, []byte{1, 2, 3, 4, 5, 6, 7}, false)
	f.Add(uint8(2), []byte{3, 1, 2, 3, 0x1b, 1, 2, 3}, []byte{1, 2, 0x41, 0x80, 0xc3}, true)
	f.Add(uint8(5), []byte{0x07, 0, 1, 2, 3, 4, 5, 6, 0x05, 7, 8, 9, 10, 11}, []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, false)
	f.Add(uint8(1), []byte{0x12, 1, 1}, []byte{}, true)
	f.Add(uint8(19), []byte{0x02, 5, 5, 0x0a, 5, 6}, []byte{5, 0x45, 0x85}, true)
	f.Fuzz(func(t *testing.T, maxByte uint8, existingSpec, desiredSpec []byte, enforce bool) {
		max := 1 + int(maxByte)%20
		owner := service()
		ports := [2][]discoveryv1.EndpointPort{
			{{Name: ptr.To("http"), Port: ptr.To[int32](80), Protocol: ptr.To(corev1.ProtocolTCP)}},
			{{Name: ptr.To("http"), Port: ptr.To[int32](81), Protocol: ptr.To(corev1.ProtocolTCP)}},
		}
		endpoint := func(b byte, ready bool) discoveryv1.Endpoint {
			i := int(b) % 64
			return discoveryv1.Endpoint{
				Addresses:  []string{fmt.Sprintf("10.0.0.%d", i+1)},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: fmt.Sprintf("pod-%d", i)},
			}
		}

		desired := []EndpointGroup{{AddressType: discoveryv1.AddressTypeIPv4, Ports: ports[0]}, {AddressType: discoveryv1.AddressTypeIPv4, Ports: ports[1]}}
		for _, b := range desiredSpec {
			g := &desired[(b>>6)&1]
			g.Endpoints = append(g.Endpoints, endpoint(b, b&0x80 != 0))
		}

		client := reconcilertest.NewClientset()
		for i := 0; i < len(existingSpec); {
			header := existingSpec[i]
			i++
			n := min(int(header&7), max, len(existingSpec)-i)
			var eps []discoveryv1.Endpoint
			for _, b := range existingSpec[i : i+n] {
				eps = append(eps, endpoint(b, true))
			}
			i += n
			s := existingSlice(fmt.Sprintf("svc-%03d", i), owner, ports[(header>>3)&1], eps)
			if header&0x10 != 0 {
				s.OwnerReferences[0].UID = "someone-else"
			}
			seed(t, client, s)
		}

		opts := []Option{WithMaxEndpointsPerSlice(max), WithPlaceholder(true), WithOwnershipEnforced(enforce)}
		r := newReconciler(t, client, opts...)
		in := Input{
			Owner: owner, OwnerGVK: serviceGVK, Desired: desired,
			AddressTypes: []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4},
			Existing:     listSlices(t, client, "ns"),
			Labeler:      ServiceLabels{Service: owner},
		}
		before := deepCopyInput(in)
		if err := r.Reconcile(context.Background(), in); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(in.Existing, before.Existing) || !equality.Semantic.DeepEqual(in.Desired, before.Desired) {
			t.Fatal("inputs were modified")
		}

		after := listSlices(t, client, "ns")
		// Where each desired endpoint is, by group, and in which version.
		want := map[string]discoveryv1.Endpoint{}
		for gi, g := range desired {
			for _, ep := range g.Endpoints {
				// The more available wins; on a tie, the first given.
				if have, ok := want[fmt.Sprint(gi, endpointID(&ep))]; !ok || availability(&ep) > availability(&have) {
					want[fmt.Sprint(gi, endpointID(&ep))] = ep
				}
			}
		}
		found := map[string]int{}
		for _, s := range after {
			if len(s.Endpoints) > max {
				t.Errorf("slice %s holds %d endpoints, max %d", s.Name, len(s.Endpoints), max)
			}
			if enforce && ownerOf(s) != owner.UID {
				t.Errorf("slice %s of another owner survived", s.Name)
			}
			gi := 0
			if portKey(s.Ports) == portKey(ports[1]) {
				gi = 1
			}
			for _, ep := range s.Endpoints {
				key := fmt.Sprint(gi, endpointID(&ep))
				w, ok := want[key]
				if !ok {
					if ownerOf(s) == owner.UID {
						t.Errorf("slice %s holds %v, which is not desired there", s.Name, ep.Addresses)
					}
					continue
				}
				found[key]++
				if !endpointEqual(&ep, &w, true) {
					t.Errorf("slice %s holds %v in an old version", s.Name, ep.Addresses)
				}
			}
		}
		for key := range want {
			if found[key] != 1 {
				t.Errorf("desired endpoint %s is in %d slices, want 1", key, found[key])
			}
		}

		in.Existing = after
		plan, err := r.Plan(in)
		if err != nil {
			t.Fatal(err)
		}
		if !plan.Empty() {
			t.Errorf("second plan is not empty: %s", plan)
		}
	})
}
