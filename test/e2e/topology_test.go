package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/imports"
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
			for _, target := range targets(si, 80, v.dual) {
				dp.reaches(ctx, t, "tcp", target, 10, v.policy.want...)
			}
			derived := &corev1.Service{}
			if err := bed.ClientOf(t, "north").Get(ctx, types.NamespacedName{Namespace: dp.ns, Name: si.Annotations[imports.DerivedServiceAnnotation]}, derived); err != nil {
				t.Fatal(err)
			}
			if p := ptr.Deref(derived.Spec.InternalTrafficPolicy, ""); p != corev1.ServiceInternalTrafficPolicyCluster {
				t.Fatalf("derived Service %s: internalTrafficPolicy %q, want Cluster", derived.Name, p)
			}
		})
	}
}

// TestDataPlaneLocalClusterFirst: web is exported from north, east and
// west, each ServiceExport with mcs-syncer.io/local-cluster-first "true",
// single- and dual-stack. While north's own pod is ready, north reaches
// north alone (its own endpoints are hinted for north's zones, the others
// for none of them); once that pod loses its readiness, north reaches east
// and west, and north again when it has a ready pod. The switch is
// measured: from the moment a watch of north's own EndpointSlice sees its
// last endpoint not ready to the first connection answered by another
// cluster, from a probe that asks over HTTP every 20 ms (a netserver
// answers HTTP at once, a connection that sends nothing only after 3 s).
func TestDataPlaneLocalClusterFirst(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dp := newDataPlane(ctx, t, "dataplane-localfirst")
	northCl := bed.ClientOf(t, "north")
	var northApps []*appsv1.Deployment
	for _, dual := range families() {
		name := "web-" + familyName(dual)
		mutate := func(s *corev1.Service) {
			if dual {
				dualStack(s)
			}
		}
		for _, c := range []string{"north", "east", "west"} {
			d := serve(ctx, t, c, dp.ns, name, 1, true, mutate, port("tcp", corev1.ProtocolTCP, 80))
			if c == "north" {
				northApps = append(northApps, d)
			}
			se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: dp.ns, Name: name}}
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, clusterset.LocalClusterFirstAnnotation)
			if err := bed.ClientOf(t, c).Patch(ctx, se, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, dual := range families() {
		name := "web-" + familyName(dual)
		t.Run(name, func(t *testing.T) {
			si := importOf(ctx, t, dp.ns, name, dual, func(si *mcsv1beta1.ServiceImport) error {
				if si.Annotations[clusterset.LocalClusterFirstAnnotation] != "true" {
					return fmt.Errorf("annotations %v: not local-cluster-first yet", si.Annotations)
				}
				return nil
			})
			addrs := targets(si, 80, dual)
			for _, target := range addrs {
				dp.reaches(ctx, t, "tcp", target, 20, "north")
			}

			// The probe runs in the background, its answers in a file.
			out := "/tmp/" + name + ".out"
			if _, err := dp.north.Exec(ctx, dp.ns, dp.client, "sh", "-c",
				fmt.Sprintf("/probe -n 1000 -interval 20ms -timeout 300ms -stamp http http://%s/ > %s 2>&1 </dev/null &", addrs[0], out)); err != nil {
				t.Fatal(err)
			}
			answers := func() []stampedAnswer {
				text, err := dp.north.Exec(ctx, dp.ns, dp.client, "cat", out)
				if err != nil {
					t.Fatal(err)
				}
				return parseStamped(text)
			}
			eventually(ctx, t, "the probe to have answers", func() error {
				if n := len(answers()); n < 10 {
					return fmt.Errorf("%d answers", n)
				}
				return nil
			})
			// Watched, not polled: a poll can see the change after kube-proxy
			// has acted on it.
			lostCh := noReadyEndpoint(ctx, t, dp.ns, discoveryv1.LabelServiceName+"="+name)
			importedCh := noReadyEndpoint(ctx, t, dp.ns, mcsv1beta1.LabelServiceName+"="+name+","+mcsv1beta1.LabelSourceCluster+"=north")
			requested := time.Now()
			scale(ctx, t, northCl, northApps[i], 0)
			lost, imported := <-lostCh, <-importedCh
			if lost.IsZero() || imported.IsZero() {
				t.Fatal("the watches of north's slices ended before they saw the endpoint not ready")
			}
			var switched time.Time
			eventually(ctx, t, "a connection answered by another cluster", func() error {
				for _, a := range answers() {
					if a.at.After(requested) && a.cluster != "north" && a.cluster != "" {
						switched = a.at
						return nil
					}
				}
				return fmt.Errorf("none yet")
			})
			failed := 0
			for _, a := range answers() {
				if a.at.Before(requested) && a.cluster != "north" && a.cluster != "" {
					t.Errorf("while north's pod was ready, an answer from %q (%s)", a.cluster, a.line)
				}
				if a.at.After(requested) && a.at.Before(switched) && a.cluster == "" {
					failed++
				}
			}
			t.Logf("FIGURE local-first switch (%s): %s from north's last endpoint not ready to the first answer from another cluster (%s of it to north's import of that: mcs-syncer); %d connections failed meanwhile",
				name, switched.Sub(lost).Round(time.Millisecond), imported.Sub(lost).Round(time.Millisecond), failed)
			for _, target := range addrs {
				dp.reaches(ctx, t, "tcp", target, 20, "east", "west")
			}
			scale(ctx, t, northCl, northApps[i], 1)
			for _, target := range addrs {
				dp.reaches(ctx, t, "tcp", target, 20, "north")
			}
		})
	}
}

// stampedAnswer is a line of probe -stamp: when the try ended, and the
// cluster that answered ("" for a failed try).
type stampedAnswer struct {
	at      time.Time
	cluster string
	line    string
}

func parseStamped(text string) []stampedAnswer {
	var out []stampedAnswer
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		stamp, rest, ok := strings.Cut(line, " ")
		ns, err := strconv.ParseInt(stamp, 10, 64)
		if !ok || err != nil {
			continue
		}
		a := stampedAnswer{at: time.Unix(0, ns), line: line}
		if f := strings.Fields(rest); len(f) == 4 && !strings.HasPrefix(rest, "error:") {
			a.cluster = f[0]
		}
		out = append(out, a)
	}
	return out
}

// scale sets the replicas of a Deployment.
func scale(ctx context.Context, t *testing.T, cl client.Client, d *appsv1.Deployment, replicas int) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	if err := cl.Patch(ctx, d, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// noReadyEndpoint watches north's EndpointSlices of ns matching selector
// and sends the time it first sees them without a ready endpoint.
func noReadyEndpoint(ctx context.Context, t *testing.T, ns, selector string) <-chan time.Time {
	t.Helper()
	at := make(chan time.Time, 1)
	ended := watchReady(ctx, t, "north", ns, selector, func(typ watch.EventType, total int) bool {
		if typ != watch.Added && total == 0 {
			at <- time.Now()
			return false
		}
		return true
	})
	go func() {
		<-ended
		select {
		case at <- time.Time{}: // the watch ended first
		default:
		}
	}()
	return at
}
