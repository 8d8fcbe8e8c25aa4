package e2e

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/workloads"
)

// The data plane: pods on the clusters' real nodes, packets from a client
// pod in north through north's kube-proxy to server pods in east and west,
// names asked from inside the pod through the kube-dns Service.

// dataPlane is the setup of a data-plane test: a namespace in every
// cluster and a client pod in north, Ready.
type dataPlane struct {
	ns     string
	north  *testbed.Cluster
	client string
}

func newDataPlane(ctx context.Context, t *testing.T, ns string) *dataPlane {
	t.Helper()
	needTestbed(t)
	bed.Namespace(ctx, t, ns)
	dp := &dataPlane{ns: ns, north: bed.Cluster("north"), client: "client"}
	north := bed.ClientOf(t, "north")
	if err := north.Create(ctx, workloads.ClientPod(ns, dp.client)); err != nil {
		t.Fatal(err)
	}
	podsReady(ctx, t, north, ns, 1, client.MatchingFields{"metadata.name": dp.client})
	return dp
}

// probe runs probe in north's client pod; a failed try is a line
// "error: ..." of the output, and err says that some try failed.
func (dp *dataPlane) probe(ctx context.Context, args ...string) (string, error) {
	return dp.north.Exec(ctx, dp.ns, dp.client, append([]string{"/probe"}, args...)...)
}

// answeredBy counts, by cluster, the netserver answers in probe's output
// ("<cluster> <pod> <ip> <proto>/<port>"), and the failed tries.
func answeredBy(out string) (clusters map[string]int, failed int) {
	clusters = map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) == 4 && !strings.HasPrefix(line, "error:") {
			clusters[f[0]]++
		} else {
			failed++
		}
	}
	return clusters, failed
}

// reaches waits until tries connections to target (probe's protocol and
// address) all succeed and are answered by exactly the clusters want, and
// then asks again, at once: those rounds must fail no try and reach no
// other cluster, and between them reach every wanted one. One round alone
// could pass by luck (kube-proxy picks at random: ten tries all land on
// one of two clusters once in 512 rounds, and eventually runs many), two
// in a row cannot. The confirmation may take up to three rounds to hear
// from every wanted cluster again, for the same reason: with one round, a
// CI run failed when ten tries all reached east of east and west, whose
// slices north held, both ready.
func (dp *dataPlane) reaches(ctx context.Context, t *testing.T, proto, target string, tries int, want ...string) {
	t.Helper()
	slices.Sort(want)
	round := func() (map[string]int, string, error) {
		// 3 s for each try: a CI rehearsal (2026-11-29) failed on one
		// answer of ten that took over 1 s to come from the right cluster
		// ("read tcp ...: i/o timeout" after the connection was made),
		// under the load of both e2e processes. A wrong or gone endpoint
		// still fails: refused, or no connection at all.
		out, _ := dp.probe(ctx, "-n", fmt.Sprint(tries), "-timeout", "3s", proto, target)
		by, failed := answeredBy(out)
		for c := range by {
			if !slices.Contains(want, c) {
				failed++ // counted as a failure: a cluster that must not answer
			}
		}
		if failed > 0 {
			return by, out, fmt.Errorf("answers by cluster %v, %d failed or unwanted: %s", by, failed, out)
		}
		return by, out, nil
	}
	eventually(ctx, t, fmt.Sprintf("%s %s from north to reach %v", proto, target, want), func() error {
		by, out, err := round()
		if err == nil && !slices.Equal(slices.Sorted(maps.Keys(by)), want) {
			err = fmt.Errorf("answers by cluster %v: %s", by, out)
		}
		return err
	})
	heard := map[string]bool{}
	last := ""
	for i := 0; i < 3 && len(heard) < len(want); i++ {
		by, out, err := round()
		if err != nil {
			dp.reachFailed(ctx, t, proto, target, want, err)
		}
		for c := range by {
			heard[c] = true
		}
		last = out
	}
	if len(heard) < len(want) {
		dp.reachFailed(ctx, t, proto, target, want, fmt.Errorf("three rounds heard only %v: %s", slices.Sorted(maps.Keys(heard)), last))
	}
}

// reachFailed fails the test: target was reached by want once, then err;
// with north's slices and conntrack entries, to tell a slice that names a
// gone endpoint from a lost packet.
func (dp *dataPlane) reachFailed(ctx context.Context, t *testing.T, proto, target string, want []string, err error) {
	t.Helper()
	t.Fatalf("%s %s from north: reached %v once, then: %v\nnorth's EndpointSlices of %s now (what kube-proxy serves):\n%s"+
		"north's node's conntrack entries of %s (a stale entry of a connection to a gone pod catches a new connection that reuses its source port):\n%s",
		proto, target, want, err, dp.ns, dp.slicesOfNorth(ctx), target, dp.conntrackOfNorth(ctx, target))
}

// conntrackOfNorth lists the conntrack entries in north's node's network
// namespace (where kube-proxy's DNAT happens) that name target's address.
func (dp *dataPlane) conntrackOfNorth(ctx context.Context, target string) string {
	node := dp.north.RealNode
	if node == nil {
		return "(no real node)"
	}
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		host = target
	}
	out, err := exec.CommandContext(ctx, "nsenter", "--net=/run/netns/"+node.Netns, "--", "cat", "/proc/net/nf_conntrack").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("(%v: %s)", err, out)
	}
	// IPv6 addresses are written out in full there.
	expanded := host
	if addr, err := netip.ParseAddr(host); err == nil {
		expanded = addr.StringExpanded()
	}
	var b strings.Builder
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "="+host+" ") || strings.Contains(line, "="+expanded+" ") {
			b.WriteString("  " + line + "\n")
		}
	}
	return b.String()
}

// slicesOfNorth lists north's EndpointSlices of the test's namespace, one
// line each with its endpoints' addresses and conditions: for a failed
// reaches, to tell a slice that names a gone endpoint from a lost packet.
func (dp *dataPlane) slicesOfNorth(ctx context.Context) string {
	var list discoveryv1.EndpointSliceList
	cl, err := dp.north.Client()
	if err == nil {
		err = cl.List(ctx, &list, client.InNamespace(dp.ns))
	}
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, s := range list.Items {
		fmt.Fprintf(&b, "  %s (managed by %s, resourceVersion %s):", s.Name, s.Labels[discoveryv1.LabelManagedBy], s.ResourceVersion)
		for _, ep := range s.Endpoints {
			fmt.Fprintf(&b, " %v ready=%v serving=%v terminating=%v;", ep.Addresses,
				ptr.Deref(ep.Conditions.Ready, false), ptr.Deref(ep.Conditions.Serving, false), ptr.Deref(ep.Conditions.Terminating, false))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// lookup asks north's DNS from the client pod.
func (dp *dataPlane) lookup(ctx context.Context, kind, name string) ([]string, error) {
	out, err := dp.probe(ctx, "dns", kind, name)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", kind, name, err, strings.TrimSpace(out))
	}
	return strings.Split(strings.TrimSpace(out), "\n"), nil
}

// resolvesTo waits until name's A records, asked from north's client pod,
// are exactly want (sorted).
func (dp *dataPlane) resolvesTo(ctx context.Context, t *testing.T, name string, want ...string) {
	t.Helper()
	eventually(ctx, t, fmt.Sprintf("%s to resolve to %v in the pod", name, want), func() error {
		got, err := dp.lookup(ctx, "A", name)
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("%s resolves to %v, want %v", name, got, want)
		}
		return nil
	})
}

// podsReady waits until n pods of ns matching opts are Ready, and returns
// them.
func podsReady(ctx context.Context, t *testing.T, cl client.Client, ns string, n int, opts ...client.ListOption) []corev1.Pod {
	t.Helper()
	var ready []corev1.Pod
	eventually(ctx, t, fmt.Sprintf("%d ready pods in %s", n, ns), func() error {
		var pods corev1.PodList
		if err := cl.List(ctx, &pods, append(opts, client.InNamespace(ns))...); err != nil {
			return err
		}
		ready = ready[:0]
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
					ready = append(ready, p)
				}
			}
		}
		if len(ready) != n {
			return fmt.Errorf("%d of %d ready", len(ready), n)
		}
		return nil
	})
	return ready
}

// serve creates in cluster a Deployment of replicas netservers on the real
// node and a Service selecting them with ports (changed by mutate, if
// given), exported if export.
func serve(ctx context.Context, t *testing.T, cluster, ns, name string, replicas int32, export bool, mutate func(*corev1.Service), ports ...corev1.ServicePort) *appsv1.Deployment {
	t.Helper()
	cl := bed.ClientOf(t, cluster)
	var serverPorts []workloads.ServerPort
	for _, p := range ports {
		serverPorts = append(serverPorts, workloads.ServerPort{Name: p.TargetPort.StrVal, Protocol: p.Protocol, Port: 8000 + p.Port})
	}
	d := workloads.ServerDeployment(ns, name, cluster, replicas, serverPorts...)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: ports},
	}
	if mutate != nil {
		mutate(svc)
	}
	objs := []client.Object{d, svc}
	if export {
		objs = append(objs, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
	}
	for _, obj := range objs {
		if err := cl.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// port is a Service port name/protocol/port whose pods listen on 8000+port
// (a container port of the same name).
func port(name string, proto corev1.Protocol, number int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: proto, Port: number, TargetPort: intstr.FromString(name)}
}

// families are the IP family variants of a data-plane test: IPv4 (false)
// and, on a dual-stack testbed, IPv4 and IPv6 (true).
func families() []bool {
	if bed.Cluster("north").ServiceCIDRv6 == "" {
		return []bool{false}
	}
	return []bool{false, true}
}

// familyName names a variant of families in a Service name.
func familyName(dual bool) string {
	if dual {
		return "v4v6"
	}
	return "v4"
}

// addressTypesOf are the EndpointSlice address types of a family variant.
func addressTypesOf(dual bool) []string {
	if dual {
		return []string{string(discoveryv1.AddressTypeIPv4), string(discoveryv1.AddressTypeIPv6)}
	}
	return []string{string(discoveryv1.AddressTypeIPv4)}
}

// dualStack makes a Service require both IP families.
func dualStack(s *corev1.Service) {
	s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
	s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
}

// targets are the addresses a pod in north reaches port of the import si
// at: its clusterset name, or each of its clusterset IPs when dual (the
// name resolves to the IPv4 one).
func targets(si *mcsv1beta1.ServiceImport, port int32, dual bool) []string {
	if !dual {
		return []string{fmt.Sprintf("%s.%s.svc.clusterset.local:%d", si.Name, si.Namespace, port)}
	}
	var out []string
	for _, ip := range si.Spec.IPs {
		out = append(out, net.JoinHostPort(ip, fmt.Sprint(port)))
	}
	return out
}

// importIP waits until north's ServiceImport ns/name has an IP and returns
// it.
func importIP(ctx context.Context, t *testing.T, ns, name string) string {
	t.Helper()
	north := bed.ClientOf(t, "north")
	var ip string
	eventually(ctx, t, "north's ServiceImport "+name+" to have an IP", func() error {
		si := &mcsv1beta1.ServiceImport{}
		if err := north.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, si); err != nil {
			return err
		}
		if len(si.Spec.IPs) == 0 {
			return fmt.Errorf("no IP yet")
		}
		ip = si.Spec.IPs[0]
		return nil
	})
	return ip
}

// TestDataPlaneClusterSetIP: web is exported from east and west, only-east
// from east alone, private from nowhere. From a pod in north, the
// ClusterSetIP name resolves to the ServiceImport's IP and connections to
// it (TCP and UDP) reach pods of both clusters; only-east is reached only in
// east; private has no clusterset name. After the exports are withdrawn the
// name stops resolving and the IP stops routing.
func TestDataPlaneClusterSetIP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dp := newDataPlane(ctx, t, "dataplane-ip")
	ports := []corev1.ServicePort{port("tcp", corev1.ProtocolTCP, 80), port("udp", corev1.ProtocolUDP, 80)}
	for _, c := range []string{"east", "west"} {
		serve(ctx, t, c, dp.ns, "web", 1, true, nil, ports...)
	}
	serve(ctx, t, "east", dp.ns, "only-east", 1, true, nil, ports...)
	serve(ctx, t, "east", dp.ns, "private", 1, false, nil, ports...)

	name := "web." + dp.ns + ".svc.clusterset.local"
	ip := importIP(ctx, t, dp.ns, "web")
	dp.resolvesTo(ctx, t, name, ip)
	dp.reaches(ctx, t, "tcp", name+":80", 20, "east", "west")
	dp.reaches(ctx, t, "udp", ip+":80", 20, "east", "west")
	dp.reaches(ctx, t, "tcp", "only-east."+dp.ns+".svc.clusterset.local:80", 10, "east")

	// private is served in east, but not exported: it has no name.
	if got, err := dp.lookup(ctx, "A", "private."+dp.ns+".svc.clusterset.local"); err == nil {
		t.Errorf("private (not exported) resolves in north: %v", got)
	} else if !strings.Contains(err.Error(), "no such host") {
		t.Errorf("private: want no such host, got %v", err)
	}

	for _, c := range []string{"east", "west"} {
		se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: dp.ns}}
		if err := bed.ClientOf(t, c).Delete(ctx, se); err != nil {
			t.Fatal(err)
		}
	}
	eventually(ctx, t, name+" to stop resolving", func() error {
		if got, err := dp.lookup(ctx, "A", name); err == nil {
			return fmt.Errorf("still resolves to %v", got)
		}
		return nil
	})
	eventually(ctx, t, "the clusterset IP "+ip+" to stop routing", func() error {
		out, err := dp.probe(ctx, "-timeout", "1s", "tcp", ip+":80")
		if err == nil {
			return fmt.Errorf("still answered: %s", out)
		}
		return nil
	})
}

// TestDataPlaneHeadless: a StatefulSet behind a headless Service, exported
// from east and west. From a pod in north the name's A records are the pod
// IPs of both clusters, its SRV records name every pod by
// <hostname>.<cluster>.<svc>.<ns>.svc.clusterset.local, and such a name
// reaches that one pod.
func TestDataPlaneHeadless(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dp := newDataPlane(ctx, t, "dataplane-headless")
	var podIPs []string
	for _, c := range []string{"east", "west"} {
		cl := bed.ClientOf(t, c)
		labels := map[string]string{"app": "db"}
		sts := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: dp.ns},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To[int32](1), ServiceName: "db",
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       workloads.ServerPodSpec(c, false, workloads.ServerPort{Name: "tcp", Port: 8080}),
				},
			},
		}
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: dp.ns},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: labels,
				Ports: []corev1.ServicePort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 8080}}},
		}
		for _, obj := range []client.Object{sts, svc, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: dp.ns}}} {
			if err := cl.Create(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range podsReady(ctx, t, cl, dp.ns, 1, client.MatchingLabels(labels)) {
			podIPs = append(podIPs, p.Status.PodIP)
		}
	}
	slices.Sort(podIPs)

	name := "db." + dp.ns + ".svc.clusterset.local"
	dp.resolvesTo(ctx, t, name, podIPs...)
	want := []string{"db-0.east." + name + ". 8080", "db-0.west." + name + ". 8080"}
	eventually(ctx, t, "SRV records of "+name, func() error {
		got, err := dp.lookup(ctx, "SRV", "_tcp._tcp."+name)
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("SRV %v, want %v", got, want)
		}
		return nil
	})
	for _, c := range []string{"east", "west"} {
		dp.reaches(ctx, t, "tcp", "db-0."+c+"."+name+":8080", 3, c)
	}
}

// TestDataPlanePerPort: KEP-1645, "Service Port": "network traffic to a
// conflicting port should only be directed to endpoints from constituent
// services that actually expose the port." Two shapes: the same port name
// with different numbers (east "a" 81, west "a" 82 and "b" 83: the import
// takes east's "a", the oldest), and different names (east "a" 81, west
// "c" 84). Each with session affinity off and ClientIP (affinity must not
// be what makes it pass), single- and dual-stack. Traffic to each port of
// the import reaches only the clusters that define it as the import does;
// none of it fails.
func TestDataPlanePerPort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dp := newDataPlane(ctx, t, "dataplane-ports")
	type shape struct {
		name       string
		east, west []corev1.ServicePort
		// want: the clusters that each port of the import reaches.
		want map[string][]string
	}
	shapes := []shape{
		{"samename", []corev1.ServicePort{port("a", corev1.ProtocolTCP, 81)},
			[]corev1.ServicePort{port("a", corev1.ProtocolTCP, 82), port("b", corev1.ProtocolTCP, 83)},
			map[string][]string{"a": {"east"}, "b": {"west"}}},
		{"othername", []corev1.ServicePort{port("a", corev1.ProtocolTCP, 81)},
			[]corev1.ServicePort{port("c", corev1.ProtocolTCP, 84)},
			map[string][]string{"a": {"east"}, "c": {"west"}}},
	}
	type variant struct {
		name     string
		shape    shape
		affinity corev1.ServiceAffinity
		dual     bool
	}
	var variants []variant
	for _, sh := range shapes {
		for _, aff := range []corev1.ServiceAffinity{corev1.ServiceAffinityNone, corev1.ServiceAffinityClientIP} {
			for _, dual := range families() {
				name := fmt.Sprintf("%s-%s-%s", sh.name, strings.ToLower(string(aff)), familyName(dual))
				variants = append(variants, variant{name, sh, aff, dual})
			}
		}
	}
	// Everything first, so that the pods of all variants start together.
	for _, v := range variants {
		mutate := func(s *corev1.Service) {
			s.Spec.SessionAffinity = v.affinity
			if v.dual {
				dualStack(s)
			}
		}
		serve(ctx, t, "east", dp.ns, v.name, 1, true, mutate, v.shape.east...)
		serve(ctx, t, "west", dp.ns, v.name, 1, true, mutate, v.shape.west...)
	}

	north := bed.ClientOf(t, "north")
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			si := &mcsv1beta1.ServiceImport{}
			eventually(ctx, t, "north's ServiceImport "+v.name+" to have every port and its IPs", func() error {
				if err := north.Get(ctx, types.NamespacedName{Namespace: dp.ns, Name: v.name}, si); err != nil {
					return err
				}
				wantIPs := 1
				if v.dual {
					wantIPs = 2
				}
				if len(si.Spec.Ports) != len(v.shape.want) || len(si.Spec.IPs) != wantIPs {
					return fmt.Errorf("ports %v, IPs %v", si.Spec.Ports, si.Spec.IPs)
				}
				return nil
			})
			for _, p := range si.Spec.Ports {
				want, ok := v.shape.want[p.Name]
				if !ok {
					t.Fatalf("the import has a port %q it should not have: %v", p.Name, si.Spec.Ports)
				}
				for _, target := range targets(si, p.Port, v.dual) {
					dp.reaches(ctx, t, "tcp", target, 10, want...)
				}
			}
		})
	}

	// The exports say whose endpoints are left out of which port.
	eventually(ctx, t, "east's ServiceExport samename-none-v4 to name west as left out of port a", func() error {
		c, err := workloads.ExportCondition(ctx, bed.ClientOf(t, "east"), dp.ns, "samename-none-v4", mcsv1beta1.ServiceExportConditionConflict)
		if err != nil {
			return err
		}
		if c.Status != metav1.ConditionTrue || c.Reason != "PortConflict" || !strings.Contains(c.Message, `the endpoints of west are left out of port "a"`) {
			return fmt.Errorf("%s/%s: %s", c.Status, c.Reason, c.Message)
		}
		return nil
	})
}

// TestDataPlaneTerminatingEndpoint (KEP-1672): of east's two pods, one is
// deleted but keeps serving through its grace period. North's import shows
// it serving and terminating, not ready, and kube-proxy in north sends new
// connections only to the other pod.
func TestDataPlaneTerminatingEndpoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dp := newDataPlane(ctx, t, "dataplane-terminating")
	east := bed.ClientOf(t, "east")
	// Bare pods, not a Deployment: a deleted pod is not replaced, and the
	// cleanup can cut every pod's long grace period before the namespace
	// goes (later tests wait for no namespace to be terminating).
	t.Cleanup(func() {
		_ = east.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(dp.ns), client.GracePeriodSeconds(0))
	})
	for i := range 2 {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: dp.ns, Labels: map[string]string{"app": "web"}},
			Spec:       workloads.ServerPodSpec("east", true, workloads.ServerPort{Name: "tcp", Port: 8080}),
		}
		pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](300)
		if err := east.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: dp.ns},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "tcp", Port: 80, TargetPort: intstr.FromString("tcp")}}},
	}
	for _, obj := range []client.Object{svc, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: dp.ns}}} {
		if err := east.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	pods := podsReady(ctx, t, east, dp.ns, 2, client.MatchingLabels{"app": "web"})
	name := "web." + dp.ns + ".svc.clusterset.local:80"
	eventually(ctx, t, "both of east's pods to answer north", func() error {
		out, _ := dp.probe(ctx, "-n", "20", "-timeout", "1s", "tcp", name)
		if !strings.Contains(out, pods[0].Status.PodIP) || !strings.Contains(out, pods[1].Status.PodIP) {
			return fmt.Errorf("answers: %s", out)
		}
		return nil
	})

	leaving, staying := pods[0], pods[1]
	if err := east.Delete(ctx, &leaving); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "north's import to show the leaving pod serving and terminating", func() error {
		var slices discoveryv1.EndpointSliceList
		if err := bed.ClientOf(t, "north").List(ctx, &slices, client.InNamespace(dp.ns),
			client.MatchingLabels{"endpointslice.kubernetes.io/managed-by": "mcs"}); err != nil {
			return err
		}
		for _, s := range slices.Items {
			for _, ep := range s.Endpoints {
				if ep.Addresses[0] != leaving.Status.PodIP {
					continue
				}
				c := ep.Conditions
				if !ptr.Deref(c.Ready, true) && ptr.Deref(c.Serving, false) && ptr.Deref(c.Terminating, false) {
					return nil
				}
				return fmt.Errorf("conditions ready=%v serving=%v terminating=%v", ptr.Deref(c.Ready, false), ptr.Deref(c.Serving, false), ptr.Deref(c.Terminating, false))
			}
		}
		return fmt.Errorf("no endpoint %s in north", leaving.Status.PodIP)
	})
	eventually(ctx, t, "new connections to reach only "+staying.Name, func() error {
		out, err := dp.probe(ctx, "-n", "20", "-timeout", "1s", "tcp", name)
		if err != nil || strings.Contains(out, leaving.Status.PodIP) {
			return fmt.Errorf("answers (%v): %s", err, out)
		}
		return nil
	})
	// The leaving pod still serves: it is kube-proxy's choice, not the pod,
	// that keeps connections away.
	if out, err := dp.probe(ctx, "tcp", leaving.Status.PodIP+":8080"); err != nil {
		t.Errorf("the terminating pod does not answer directly: %v: %s", err, out)
	}
}

// TestDataPlaneDualStack: a dual-stack Service exported from east and west
// is imported into north with both families: ipFamilies IPv4 and IPv6, two
// clusterset IPs, an A and an AAAA record asked from inside the pod, and
// each of the IPs reaches pods of both clusters (IPv6 routed from node to
// node, kube-proxy's ip6tables in north).
func TestDataPlaneDualStack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	needTestbed(t)
	if bed.Cluster("north").ServiceCIDRv6 == "" {
		t.Skip("the testbed is IPv4 only")
	}
	dp := newDataPlane(ctx, t, "dataplane-dual")
	dual := func(s *corev1.Service) {
		s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicyRequireDualStack)
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	}
	for _, c := range []string{"east", "west"} {
		serve(ctx, t, c, dp.ns, "web", 1, true, dual, port("tcp", corev1.ProtocolTCP, 80))
	}

	north := bed.ClientOf(t, "north")
	var ips []string
	eventually(ctx, t, "north's ServiceImport to be dual-stack", func() error {
		si := &mcsv1beta1.ServiceImport{}
		if err := north.Get(ctx, types.NamespacedName{Namespace: dp.ns, Name: "web"}, si); err != nil {
			return err
		}
		if !slices.Equal(si.Spec.IPFamilies, []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}) || len(si.Spec.IPs) != 2 {
			return fmt.Errorf("ipFamilies %v, ips %v", si.Spec.IPFamilies, si.Spec.IPs)
		}
		ips = si.Spec.IPs
		return nil
	})
	v4, v6 := ips[0], ips[1]
	if ip := net.ParseIP(v6); ip == nil || ip.To4() != nil || !strings.Contains(v6, ":") {
		t.Fatalf("ips %v: want an IPv4 and then an IPv6 address", ips)
	}
	name := "web." + dp.ns + ".svc.clusterset.local"
	for kind, want := range map[string]string{"A": v4, "AAAA": v6} {
		eventually(ctx, t, kind+" "+name+" in the pod", func() error {
			got, err := dp.lookup(ctx, kind, name)
			if err != nil {
				return err
			}
			if !slices.Equal(got, []string{want}) {
				return fmt.Errorf("%v, want %s", got, want)
			}
			return nil
		})
	}
	dp.reaches(ctx, t, "tcp", net.JoinHostPort(v4, "80"), 20, "east", "west")
	dp.reaches(ctx, t, "tcp", net.JoinHostPort(v6, "80"), 20, "east", "west")
}

// TestDataPlaneTrafficDistribution: north's and east's real nodes share
// the zone "shared", west's is in another. near (near-v4, and near-v4v6
// dual-stack) is exported from east and west with trafficDistribution
// PreferClose: the import carries zone hints
// that mcs-syncer computes over both clusters' endpoints, and north's
// kube-proxy sends every connection to east (same zone) while east has a
// ready endpoint, and to west once it has none. far is exported from west
// first without a trafficDistribution and then from east with PreferClose:
// the import has none (the oldest export wins, TrafficDistributionConflict)
// and its slices carry no hints at all, although both sources' slices do:
// a source's hints never leak into a consumer.
func TestDataPlaneTrafficDistribution(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	needTestbed(t)
	if z := bed.Cluster("north").RealNode.Zone; z == "" || z != bed.Cluster("east").RealNode.Zone || z == bed.Cluster("west").RealNode.Zone {
		t.Skipf("the testbed's real nodes are not zoned for this test: north %q, east %q, west %q",
			z, bed.Cluster("east").RealNode.Zone, bed.Cluster("west").RealNode.Zone)
	}
	dp := newDataPlane(ctx, t, "dataplane-topology")
	preferClose := func(s *corev1.Service) {
		s.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
	}
	eastNear := map[bool]*appsv1.Deployment{}
	for _, dual := range families() {
		name := "near-" + familyName(dual)
		mutate := func(s *corev1.Service) {
			preferClose(s)
			if dual {
				dualStack(s)
			}
		}
		eastNear[dual] = serve(ctx, t, "east", dp.ns, name, 1, true, mutate, port("tcp", corev1.ProtocolTCP, 80))
		serve(ctx, t, "west", dp.ns, name, 1, true, mutate, port("tcp", corev1.ProtocolTCP, 80))
	}
	serve(ctx, t, "west", dp.ns, "far", 1, true, nil, port("tcp", corev1.ProtocolTCP, 80))
	// creationTimestamps have seconds: east's export must be a later one.
	eventually(ctx, t, "west's export of far to be a second old", func() error {
		se := &mcsv1beta1.ServiceExport{}
		if err := bed.ClientOf(t, "west").Get(ctx, types.NamespacedName{Namespace: dp.ns, Name: "far"}, se); err != nil {
			return err
		}
		if age := time.Since(se.CreationTimestamp.Time); age < 2*time.Second {
			return fmt.Errorf("%s old", age)
		}
		return nil
	})
	serve(ctx, t, "east", dp.ns, "far", 1, true, preferClose, port("tcp", corev1.ProtocolTCP, 80))

	north := bed.ClientOf(t, "north")
	hintsOf := func(name string) (map[string]string, error) {
		var list discoveryv1.EndpointSliceList
		if err := north.List(ctx, &list, client.InNamespace(dp.ns), client.MatchingLabels{mcsv1beta1.LabelServiceName: name}); err != nil {
			return nil, err
		}
		out := map[string]string{}
		for _, s := range list.Items {
			for _, ep := range s.Endpoints {
				h := ""
				if ep.Hints != nil {
					h = fmt.Sprintf("zones=%v nodes=%v", ep.Hints.ForZones, ep.Hints.ForNodes)
				}
				out[s.Labels[mcsv1beta1.LabelSourceCluster]+"/"+string(s.AddressType)] += h
			}
		}
		return out, nil
	}
	for _, dual := range families() {
		name := "near-" + familyName(dual)
		t.Run(name, func(t *testing.T) {
			si := importOf(ctx, t, dp.ns, name, dual, nil)
			eventually(ctx, t, "north's import of "+name+" to carry each cluster's zone as hints", func() error {
				got, err := hintsOf(name)
				if err != nil {
					return err
				}
				want := map[string]string{}
				for _, at := range addressTypesOf(dual) {
					want["east/"+at] = fmt.Sprintf("zones=[{%s}] nodes=[]", bed.Cluster("east").RealNode.Zone)
					want["west/"+at] = fmt.Sprintf("zones=[{%s}] nodes=[]", bed.Cluster("west").RealNode.Zone)
				}
				if !maps.Equal(got, want) {
					return fmt.Errorf("hints by source %v, want %v", got, want)
				}
				return nil
			})
			for _, target := range targets(si, 80, dual) {
				dp.reaches(ctx, t, "tcp", target, 20, "east")
			}
			// No ready endpoint in north's zone: every cluster's.
			scale(ctx, t, bed.ClientOf(t, "east"), eastNear[dual], 0)
			for _, target := range targets(si, 80, dual) {
				dp.reaches(ctx, t, "tcp", target, 20, "west")
			}
		})
	}

	eventually(ctx, t, "north's import of far: no trafficDistribution and no hints, though the sources' slices have them", func() error {
		si := &mcsv1beta1.ServiceImport{}
		if err := north.Get(ctx, types.NamespacedName{Namespace: dp.ns, Name: "far"}, si); err != nil {
			return err
		}
		if si.Spec.TrafficDistribution != nil {
			return fmt.Errorf("trafficDistribution %s, want west's (none)", *si.Spec.TrafficDistribution)
		}
		got, err := hintsOf("far")
		if err != nil {
			return err
		}
		if want := map[string]string{"east/IPv4": "", "west/IPv4": ""}; !maps.Equal(got, want) {
			return fmt.Errorf("hints by source %v, want none", got)
		}
		return nil
	})
	eventually(ctx, t, "east's own slice of far to carry hints (else the no-leak check proves nothing)", func() error {
		var list discoveryv1.EndpointSliceList
		if err := bed.ClientOf(t, "east").List(ctx, &list, client.InNamespace(dp.ns), client.MatchingLabels{discoveryv1.LabelServiceName: "far"}); err != nil {
			return err
		}
		for _, s := range list.Items {
			for _, ep := range s.Endpoints {
				if ep.Hints != nil && len(ep.Hints.ForZones) > 0 {
					return nil
				}
			}
		}
		return fmt.Errorf("no hints in east's slices of far")
	})
	dp.reaches(ctx, t, "tcp", "far."+dp.ns+".svc.clusterset.local:80", 20, "east", "west")
}
