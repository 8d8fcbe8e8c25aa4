package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	imports "github.com/mcs-syncer/mcs-syncer/pkg/import"
)

// Where traffic goes by topology: node names shared across clusters, and
// the local cluster first.

// importOf waits until north's ServiceImport ns/name has its IPs (two when
// dual) and passes check, and returns it.
func importOf(ctx context.Context, t *testing.T, ns, name string, dual bool, check func(*mcsv1beta1.ServiceImport) error) *mcsv1beta1.ServiceImport {
	t.Helper()
	wantIPs := 1
	if dual {
		wantIPs = 2
	}
	si := &mcsv1beta1.ServiceImport{}
	eventually(ctx, t, fmt.Sprintf("north's ServiceImport %s to have %d IPs", name, wantIPs), func() error {
		if err := bed.ClientOf(t, "north").Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, si); err != nil {
			return err
		}
		if len(si.Spec.IPs) != wantIPs {
			return fmt.Errorf("IPs %v", si.Spec.IPs)
		}
		if check != nil {
			return check(si)
		}
		return nil
	})
	return si
}

// TestDataPlaneNodeNamesCollide: north's and west's real nodes are both
// named "worker", as kind's nodes are; east's has a name of its own and
// north's zone. Services exported from east and west, single- and
// dual-stack:
//   - internalTrafficPolicy Local: the import has it, its derived Service
//     keeps Cluster, and north reaches east and west. Were the policy
//     applied, north's kube-proxy would take west's endpoints (nodeName
//     "worker") for node-local and send everything to west.
//   - trafficDistribution PreferSameNode: the import's hints are zone
//     hints only, and north (zone "shared") reaches east alone. With node
//     hints, west's endpoints, hinted for node "worker", would win and
//     north would reach west alone.
func TestDataPlaneNodeNamesCollide(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	needTestbed(t)
	north, east, west := bed.Cluster("north").RealNode, bed.Cluster("east").RealNode, bed.Cluster("west").RealNode
	if north.Name != west.Name || north.Name == east.Name || north.Zone != east.Zone || north.Zone == west.Zone {
		t.Skipf("the testbed's real nodes are not named and zoned for this test: north %s/%s, east %s/%s, west %s/%s",
			north.Name, north.Zone, east.Name, east.Zone, west.Name, west.Zone)
	}
	dp := newDataPlane(ctx, t, "dataplane-nodenames")
	type policy struct {
		name   string
		mutate func(*corev1.Service)
		check  func(*mcsv1beta1.ServiceImport) error
		want   []string
	}
	policies := []policy{
		{"local-policy",
			func(s *corev1.Service) {
				s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
			},
			func(si *mcsv1beta1.ServiceImport) error {
				if p := ptr.Deref(si.Spec.InternalTrafficPolicy, ""); p != corev1.ServiceInternalTrafficPolicyLocal {
					return fmt.Errorf("internalTrafficPolicy %q, want the exports' Local", p)
				}
				return nil
			},
			[]string{"east", "west"}},
		{"same-node",
			func(s *corev1.Service) {
				s.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferSameNode)
			},
			func(si *mcsv1beta1.ServiceImport) error {
				if d := ptr.Deref(si.Spec.TrafficDistribution, ""); d != corev1.ServiceTrafficDistributionPreferSameNode {
					return fmt.Errorf("trafficDistribution %q, want the exports' PreferSameNode", d)
				}
				return nil
			},
			[]string{"east"}},
	}
	type variant struct {
		name   string
		policy policy
		dual   bool
	}
	var variants []variant
	for _, p := range policies {
		for _, dual := range families() {
			v := variant{p.name + "-" + familyName(dual), p, dual}
			variants = append(variants, v)
			mutate := func(s *corev1.Service) {
				v.policy.mutate(s)
				if v.dual {
					dualStack(s)
				}
			}
			for _, c := range []string{"east", "west"} {
				serve(ctx, t, c, dp.ns, v.name, 1, true, mutate, port("tcp", corev1.ProtocolTCP, 80))
			}
		}
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			si := importOf(ctx, t, dp.ns, v.name, v.dual, v.policy.check)
			derived := &corev1.Service{}
			if err := bed.ClientOf(t, "north").Get(ctx, types.NamespacedName{Namespace: dp.ns, Name: si.Annotations[imports.DerivedServiceAnnotation]}, derived); err != nil {
				t.Fatal(err)
			}
			if p := ptr.Deref(derived.Spec.InternalTrafficPolicy, ""); p != corev1.ServiceInternalTrafficPolicyCluster {
				t.Fatalf("derived Service %s: internalTrafficPolicy %q, want Cluster", derived.Name, p)
			}
			for _, target := range targets(si, 80, v.dual) {
				dp.reaches(ctx, t, "tcp", target, 10, v.policy.want...)
			}
		})
	}
}
