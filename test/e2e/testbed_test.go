package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/coredns"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/workloads"
)

// TestTestbedClustersServeMCSCRDs: every cluster serves ServiceExport and
// ServiceImport in v1beta1 (stored) and v1alpha1 (read by CoreDNS).
func TestTestbedClustersServeMCSCRDs(t *testing.T) {
	needTestbed(t)
	for _, c := range bed.Clusters {
		cs, err := c.Kubernetes()
		if err != nil {
			t.Fatal(err)
		}
		for _, gv := range []string{"multicluster.x-k8s.io/v1beta1", "multicluster.x-k8s.io/v1alpha1"} {
			list, err := cs.Discovery().ServerResourcesForGroupVersion(gv)
			if err != nil {
				t.Fatalf("%s: %s not served: %v", c.Name, gv, err)
			}
			served := map[string]bool{}
			for _, r := range list.APIResources {
				served[r.Name] = true
			}
			for _, want := range []string{"serviceexports", "serviceexports/status", "serviceimports", "serviceimports/status"} {
				if !served[want] {
					t.Errorf("%s: %s does not serve %s (serves %v)", c.Name, gv, want, served)
				}
			}
		}
	}
}

// TestTestbedClustersHaveDistinctNetworksAndZones: each kube-apiserver
// allocates from its own service CIDR, and each cluster's nodes span at
// least two zones and carry pod CIDRs inside the cluster's pod CIDR.
func TestTestbedClustersHaveDistinctNetworksAndZones(t *testing.T) {
	needTestbed(t)
	ctx := context.Background()
	var prefixes []netip.Prefix
	for _, c := range bed.Clusters {
		for _, cidr := range []string{c.PodCIDR, c.ServiceCIDR} {
			p := netip.MustParsePrefix(cidr)
			for _, other := range prefixes {
				if p.Overlaps(other) {
					t.Errorf("%s: %s overlaps %s of another cluster", c.Name, p, other)
				}
			}
			prefixes = append(prefixes, p)
		}
		cs, err := c.Kubernetes()
		if err != nil {
			t.Fatal(err)
		}
		svc, err := cs.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !inCIDR(svc.Spec.ClusterIP, c.ServiceCIDR) {
			t.Errorf("%s: kubernetes Service has ClusterIP %s, want one in %s", c.Name, svc.Spec.ClusterIP, c.ServiceCIDR)
		}
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		zones := map[string]bool{}
		for _, n := range nodes.Items {
			zones[n.Labels[corev1.LabelTopologyZone]] = true
			if !prefixWithin(n.Spec.PodCIDR, c.PodCIDR) {
				t.Errorf("%s: node %s has podCIDR %q outside %s", c.Name, n.Name, n.Spec.PodCIDR, c.PodCIDR)
			}
		}
		delete(zones, "")
		if len(zones) < 2 {
			t.Errorf("%s: nodes span zones %v, want at least two", c.Name, zones)
		}
	}
}

// TestTestbedDeploymentGetsEndpointSliceAndDNS: in one cluster, a
// Deployment of 3 replicas behind a Service gets a kube-controller-manager
// EndpointSlice with 3 ready endpoints whose IPs lie in the cluster's pod
// CIDR, and the cluster's CoreDNS resolves the Service's name to its
// ClusterIP.
func TestTestbedDeploymentGetsEndpointSliceAndDNS(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	east := bed.Cluster("east")
	cs, err := east.Kubernetes()
	if err != nil {
		t.Fatal(err)
	}
	ns := createNamespace(ctx, t, east)

	deploy := workloads.Deployment(ns, "smoke", 3)
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := cs.CoreV1().Services(ns).Create(ctx, workloads.Service(ns, "smoke", 80), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !inCIDR(svc.Spec.ClusterIP, east.ServiceCIDR) {
		t.Errorf("ClusterIP %s outside %s", svc.Spec.ClusterIP, east.ServiceCIDR)
	}

	var slice discoveryv1.EndpointSlice
	eventually(ctx, t, "an EndpointSlice with 3 ready endpoints", func() error {
		slices, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
			LabelSelector: discoveryv1.LabelServiceName + "=smoke," + discoveryv1.LabelManagedBy + "=endpointslice-controller.k8s.io",
		})
		if err != nil {
			return err
		}
		if len(slices.Items) != 1 {
			return fmt.Errorf("%d slices", len(slices.Items))
		}
		slice = slices.Items[0]
		ready := 0
		for _, ep := range slice.Endpoints {
			if ptr.Deref(ep.Conditions.Ready, false) {
				ready++
			}
		}
		if ready != 3 {
			return fmt.Errorf("%d ready endpoints of %d", ready, len(slice.Endpoints))
		}
		return nil
	})
	if len(slice.Ports) != 1 || ptr.Deref(slice.Ports[0].Port, 0) != 8080 {
		t.Errorf("slice ports %v, want the named target port resolved to 8080", slice.Ports)
	}
	for _, ep := range slice.Endpoints {
		for _, addr := range ep.Addresses {
			if !inCIDR(addr, east.PodCIDR) {
				t.Errorf("endpoint address %s outside the pod CIDR %s", addr, east.PodCIDR)
			}
		}
		if zone := ptr.Deref(ep.Zone, ""); !contains(east.Zones, zone) {
			t.Errorf("endpoint %v has zone %q, want one of %v", ep.Addresses, zone, east.Zones)
		}
		if ptr.Deref(ep.NodeName, "") == "" || ep.TargetRef == nil || ep.TargetRef.Kind != "Pod" {
			t.Errorf("endpoint %v lacks nodeName or pod targetRef", ep.Addresses)
		}
	}

	name := fmt.Sprintf("smoke.%s.svc.cluster.local.", ns)
	eventually(ctx, t, "CoreDNS to answer "+name, func() error {
		ips, err := coredns.Lookup(ctx, east.DNSAddr, name)
		if err != nil {
			return err
		}
		if len(ips) != 1 || ips[0] != svc.Spec.ClusterIP {
			return fmt.Errorf("answer %v, want [%s]", ips, svc.Spec.ClusterIP)
		}
		return nil
	})
}

// TestTestbedTeardownLeavesNoProcess: Stop ends every process the testbed
// started (those it recorded and any whose command line names its state
// folder) and removes the state folder.
func TestTestbedTeardownLeavesNoProcess(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stateDir := t.TempDir()
	one, err := testbed.Start(ctx, testbed.Options{
		Clusters:       []string{"solo"},
		StateDir:       stateDir,
		TeardownOnExit: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	pids, err := one.Clusters[0].Pids()
	if err != nil {
		t.Fatal(err)
	}
	for _, component := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller", "coredns"} {
		if _, ok := pids[component]; !ok {
			t.Errorf("no running %s recorded (have %v)", component, pids)
		}
	}
	// Another process finds the running testbed through its state folder.
	attached, err := testbed.Attach(ctx, stateDir, one.BinDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(attached.Clusters) != 1 || attached.Clusters[0].DNSAddr != one.Clusters[0].DNSAddr {
		t.Errorf("Attach found %+v, want the solo cluster with DNS %s", attached.Clusters, one.Clusters[0].DNSAddr)
	}
	rss, err := attached.Clusters[0].ResidentBytes()
	if err != nil {
		t.Fatal(err)
	}
	for component := range pids {
		if rss[component] <= 0 {
			t.Errorf("no resident memory reported for %s: %v", component, rss)
		}
	}

	if err := one.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for component, pid := range pids {
		if processRuns(pid) {
			t.Errorf("%s (pid %d) still runs after Stop", component, pid)
		}
	}
	if left := processesMentioning(t, stateDir); len(left) > 0 {
		t.Errorf("processes still name the state folder after Stop: %v", left)
	}
	if _, err := os.Stat(stateDir); !os.IsNotExist(err) {
		t.Errorf("state folder %s still exists (err %v)", stateDir, err)
	}
}

func inCIDR(ip, cidr string) bool {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return false
	}
	return netip.MustParsePrefix(cidr).Contains(addr)
}

// prefixWithin reports whether CIDR inner lies inside CIDR outer.
func prefixWithin(inner, outer string) bool {
	in, err := netip.ParsePrefix(inner)
	if err != nil {
		return false
	}
	out := netip.MustParsePrefix(outer)
	return in.Bits() >= out.Bits() && out.Contains(in.Addr())
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// processRuns reports whether pid is a live (not zombie) process.
func processRuns(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// processesMentioning lists the live processes whose command line contains
// s.
func processesMentioning(t *testing.T, s string) []string {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, dir := range dirs {
		cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), s) {
			continue
		}
		var pid int
		if _, err := fmt.Sscan(filepath.Base(dir), &pid); err == nil && processRuns(pid) {
			found = append(found, fmt.Sprintf("%d: %s", pid, strings.ReplaceAll(string(cmdline), "\x00", " ")))
		}
	}
	return found
}

// orphanEnv, when set to a state folder, makes the test binary start a
// one-cluster testbed there, print its pids and wait to be killed: the
// process that TestTestbedWatchdogTearsDownAfterSIGKILL kills.
const orphanEnv = "MCS_E2E_ORPHAN_STATE"

func runOrphanedTestbed(stateDir string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := testbed.Start(ctx, testbed.Options{Clusters: []string{"orphan"}, StateDir: stateDir, TeardownOnExit: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pids, err := cs.Clusters[0].Pids()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, pid := range pids {
		fmt.Printf("%d ", pid)
	}
	fmt.Println()
	select {} // until killed
}

// TestTestbedWatchdogTearsDownAfterSIGKILL: when the process that started a
// testbed dies without a chance to clean up (SIGKILL, as on a go test
// timeout), the watchdog still stops every process and removes the state.
func TestTestbedWatchdogTearsDownAfterSIGKILL(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stateDir := filepath.Join(t.TempDir(), "state")
	child := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), orphanEnv+"="+stateDir)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = child.Process.Kill()
		t.Fatalf("child did not report its testbed: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(line) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("child printed %q", line)
		}
		pids = append(pids, pid)
	}
	if len(pids) != 6 {
		t.Errorf("child's testbed runs %d processes, want 6", len(pids))
	}

	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	eventually(ctx, t, "the watchdog to tear the testbed down", func() error {
		for _, pid := range pids {
			if processRuns(pid) {
				return fmt.Errorf("pid %d still runs", pid)
			}
		}
		if _, err := os.Stat(stateDir); !os.IsNotExist(err) {
			return fmt.Errorf("state folder still there (%v)", err)
		}
		return nil
	})
	if left := processesMentioning(t, stateDir); len(left) > 0 {
		t.Errorf("processes still name the state folder: %v", left)
	}
}

// TestTestbedAPIServerStopAndRestart: StopAPIServer takes one cluster's
// kube-apiserver away (requests fail), StartAPIServer brings it back with
// its data, and the other clusters never notice.
func TestTestbedAPIServerStopAndRestart(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	north, west := bed.Cluster("north"), bed.Cluster("west")
	ns := createNamespace(ctx, t, north)
	cs, err := north.Kubernetes()
	if err != nil {
		t.Fatal(err)
	}
	westCS, err := west.Kubernetes()
	if err != nil {
		t.Fatal(err)
	}

	if err := north.StopAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
		t.Error("north answered with its kube-apiserver stopped")
	}
	if _, err := westCS.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("west stopped answering while north was down: %v", err)
	}

	if err := north.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		t.Errorf("namespace %s lost across the restart: %v", ns, err)
	}
	pids, err := north.Pids()
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) != 6 {
		t.Errorf("after the restart north runs %v, want all 6 components", pids)
	}
}
