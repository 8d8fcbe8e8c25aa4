package testbed

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Cluster is one member of a running testbed.
type Cluster struct {
	// Name is the cluster's name, also its cluster ID in the clusterset
	// config.
	Name string
	// PodCIDR and ServiceCIDR are this cluster's address ranges; no two
	// clusters of a testbed overlap.
	PodCIDR, ServiceCIDR string
	// PodCIDRv6 and ServiceCIDRv6 are its IPv6 ranges when
	// Options.DualStack is set (fd00:100:<i>::/48 and fd00:200:<i>::/108,
	// i in hex), else empty.
	PodCIDRv6     string `json:",omitempty"`
	ServiceCIDRv6 string `json:",omitempty"`
	// Zones are the values of topology.kubernetes.io/zone on its nodes.
	Zones []string
	// Nodes are the names of its fake nodes.
	Nodes []string
	// KubeconfigPath is an admin kubeconfig for this cluster alone, whose
	// current context is Context.
	KubeconfigPath string
	Context        string
	// DNSAddr is the host:port (UDP and TCP) of this cluster's CoreDNS.
	DNSAddr string
	// AuditLogPath is the kube-apiserver's audit log when
	// Options.AuditPolicy is set.
	AuditLogPath string
	// Index is the cluster's position in the clusterset; it fixes the CIDRs.
	Index int
	// RealNode is the cluster's real node when Options.RealNodes is set.
	RealNode *RealNode `json:",omitempty"`

	bed        *Clusterset
	restConfig *rest.Config
	dnsPort    int
}

func newCluster(cs *Clusterset, index int, name string) *Cluster {
	c := &Cluster{
		Name:           name,
		PodCIDR:        fmt.Sprintf("10.%d.0.0/16", 100+index),
		ServiceCIDR:    fmt.Sprintf("10.%d.0.0/16", 200+index),
		KubeconfigPath: filepath.Join(cs.StateDir, name+".kubeconfig"),
		Context:        "kwok-" + name,
		Index:          index,
		bed:            cs,
	}
	if cs.opts.DualStack {
		c.PodCIDRv6 = fmt.Sprintf("fd00:100:%x::/48", index)
		c.ServiceCIDRv6 = fmt.Sprintf("fd00:200:%x::/108", index)
	}
	if cs.opts.RealNodes {
		c.RealNode = newRealNode(cs, c)
	}
	if cs.opts.AuditPolicy != "" {
		c.AuditLogPath = filepath.Join(c.kwokClusterDir(), "logs", "audit.log")
	}
	for z := 0; z < cs.opts.Zones; z++ {
		zone := fmt.Sprintf("%s-%c", name, 'a'+z)
		c.Zones = append(c.Zones, zone)
		for n := 0; n < cs.opts.NodesPerZone; n++ {
			c.Nodes = append(c.Nodes, fmt.Sprintf("%s-node-%d", zone, n))
		}
	}
	return c
}

// nodePodCIDR is the slice of the pod CIDR that node number i owns; kwok
// gives the node's pods their IPs from it. Slice 0 is kwok's fallback for
// nodes without a podCIDR.
func (c *Cluster) nodePodCIDR(i int) string {
	return fmt.Sprintf("10.%d.%d.0/24", 100+c.Index, i+1)
}

// ipFamilies lists an IPv4 value and, when set, its IPv6 counterpart, in
// the order dual-stack fields and flags want them.
func ipFamilies(v4, v6 string) []string {
	if v6 == "" {
		return []string{v4}
	}
	return []string{v4, v6}
}

// JoinIPFamilies is ipFamilies as the Kubernetes components' dual-stack
// flags take it: "v4,v6", or "v4" alone.
func JoinIPFamilies(v4, v6 string) string { return strings.Join(ipFamilies(v4, v6), ",") }

func (c *Cluster) kwokWorkdir() string { return filepath.Join(c.bed.StateDir, "kwok") }

func (c *Cluster) kwokClusterDir() string {
	return filepath.Join(c.kwokWorkdir(), "clusters", c.Name)
}

// LogDir holds the logs of this cluster's processes (one file each).
func (c *Cluster) LogDir() string { return filepath.Join(c.kwokClusterDir(), "logs") }

func (c *Cluster) start(ctx context.Context) error {
	if err := createCluster(ctx, c); err != nil {
		return err
	}
	if err := c.loadRESTConfig(); err != nil {
		return err
	}
	if err := c.createNodes(ctx); err != nil {
		return err
	}
	if err := c.InstallCRDs(ctx); err != nil {
		return err
	}
	if err := c.startCoreDNS(ctx); err != nil {
		return err
	}
	if c.RealNode == nil {
		return nil
	}
	if err := c.createDNSService(ctx); err != nil {
		return err
	}
	return c.startRealNode(ctx)
}

// createCluster runs `kwokctl create cluster` holding a lock that every
// testbed of this machine takes: kwokctl v0.8.0 picks its components' ports
// by counting down from 32767 to the first one free *now*, the same
// sequence in every process, so two testbeds created at once (go test runs
// packages in parallel) would pick the same ports and one's components
// would fail to bind. Once create returns, its components listen and the
// next one skips their ports.
func createCluster(ctx context.Context, c *Cluster) error {
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "mcs-testbed-kwokctl.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return fmt.Errorf("testbed: lock: %w", err)
	}
	defer lock.Close() // releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("testbed: lock %s: %w", lock.Name(), err)
	}
	return c.kwokctl(ctx, c.createArgs()...)
}

func (c *Cluster) createArgs() []string {
	bin := func(name string) string { return filepath.Join(c.bed.BinDir, name) }
	args := []string{
		"create", "cluster",
		"--name", c.Name,
		"--runtime", "binary",
		"--kubeconfig", c.KubeconfigPath,
		"--kube-authorization=true",
		"--kube-apiserver-binary", bin("kube-apiserver"),
		"--kube-controller-manager-binary", bin("kube-controller-manager"),
		"--kube-scheduler-binary", bin("kube-scheduler"),
		"--kwok-controller-binary", bin("kwok"),
		"--etcd-binary", bin("etcd"),
		"--wait", "2m",
		// kwokctl v0.8.0 files a repeated component's args under the index
		// of its first --extra-args among all of them, not among the
		// components: each component's first one must come before any
		// repeat, in this order, or kwokctl panics.
		"--extra-args", "kube-apiserver=service-cluster-ip-range=" + JoinIPFamilies(c.ServiceCIDR, c.ServiceCIDRv6),
		"--extra-args", "kube-controller-manager=service-cluster-ip-range=" + JoinIPFamilies(c.ServiceCIDR, c.ServiceCIDRv6),
		"--extra-args", "kwok-controller=cidr=" + c.nodePodCIDR(-1),
		"--extra-args", "kube-controller-manager=cluster-cidr=" + JoinIPFamilies(c.PodCIDR, c.PodCIDRv6),
		// kwok plays only the fake nodes: a real node's kubelet reports
		// its own status and runs its own pods.
		"--extra-args", "kwok-controller=manage-all-nodes=false",
		"--extra-args", "kwok-controller=manage-nodes-with-label-selector=type=kwok",
		// exec and logs reach a real node's kubelet at its address: node
		// names do not resolve on this host.
		"--extra-args", "kube-apiserver=kubelet-preferred-address-types=InternalIP,Hostname",
	}
	if c.bed.opts.AuditPolicy != "" {
		args = append(args, "--kube-audit-policy", c.bed.opts.AuditPolicy)
	}
	return args
}

// kwokctl runs kwokctl with this testbed's work directory, so that it never
// reads or writes ~/.kwok, and with the testbed's binaries first in PATH:
// kwokctl runs whatever `kubectl` PATH finds to probe a cluster, and a
// different one (or a cloud SDK's wrapper) may not speak v1.36 or may hang.
func (c *Cluster) kwokctl(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bed.BinDir, "kwokctl"), args...)
	cmd.Env = append(os.Environ(),
		"KWOK_WORKDIR="+c.kwokWorkdir(),
		"PATH="+c.bed.BinDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kwokctl %s: %w\n%s", strings.Join(args[:2], " "), err, out)
	}
	return nil
}

func (c *Cluster) loadRESTConfig() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.KubeconfigPath)
	if err != nil {
		return fmt.Errorf("testbed: read kubeconfig %s: %w", c.KubeconfigPath, err)
	}
	// The testbed's callers create many objects quickly; client-go's
	// default 5 QPS would make the tests measure the client, not the server.
	cfg.QPS, cfg.Burst = 200, 400
	// The certificates inline, not by file name: client-go caches a
	// transport per certificate *file name*, so a process that starts a
	// testbed again in the same folder (new CA, same paths) got the first
	// one's transport and failed with "x509: certificate signed by unknown
	// authority".
	if err := rest.LoadTLSFiles(cfg); err != nil {
		return fmt.Errorf("testbed: kubeconfig %s: %w", c.KubeconfigPath, err)
	}
	cfg.CAFile, cfg.CertFile, cfg.KeyFile = "", "", ""
	c.restConfig = cfg
	return nil
}

// RESTConfig returns a copy of the admin rest.Config of this cluster.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// Scheme is the scheme of the clients the testbed hands out: client-go's
// built-in types, the CRD types and both served versions of the MCS API.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme,
		mcsv1beta1.Install, mcsv1alpha1.Install,
	} {
		if err := add(s); err != nil {
			panic(err) // only fails on conflicting registrations, a programming error
		}
	}
	return s
}

// Client returns a controller-runtime client (no cache) with Scheme.
func (c *Cluster) Client() (client.Client, error) {
	cl, err := client.New(c.RESTConfig(), client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, fmt.Errorf("testbed: client for %s: %w", c.Name, err)
	}
	return cl, nil
}

// Kubernetes returns a client-go clientset for this cluster.
func (c *Cluster) Kubernetes() (kubernetes.Interface, error) {
	cs, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return nil, fmt.Errorf("testbed: clientset for %s: %w", c.Name, err)
	}
	return cs, nil
}

// Pids returns the process ids of this cluster's running processes, by
// component (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// kwok-controller, coredns).
func (c *Cluster) Pids() (map[string]int, error) {
	files, err := filepath.Glob(filepath.Join(c.kwokClusterDir(), "pids", "*.pid"))
	if err != nil {
		return nil, err
	}
	byComponent := map[string]string{"coredns": c.coreDNSPidPath()}
	for _, f := range files {
		byComponent[strings.TrimSuffix(filepath.Base(f), ".pid")] = f
	}
	pids := map[string]int{}
	for component, f := range byComponent {
		raw, err := os.ReadFile(f)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil {
			return nil, fmt.Errorf("testbed: pid file %s: %w", f, err)
		}
		if processAlive(pid) {
			pids[component] = pid
		}
	}
	return pids, nil
}

// StopAPIServer kills this cluster's kube-apiserver (SIGKILL, as in a
// crash) and waits until it is gone; everything else keeps running. For
// fault tests: clients see connection errors and watches break.
func (c *Cluster) StopAPIServer(ctx context.Context) error {
	pids, err := c.Pids()
	if err != nil {
		return err
	}
	pid, ok := pids["kube-apiserver"]
	if !ok {
		return fmt.Errorf("testbed: %s: kube-apiserver is not running", c.Name)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("testbed: %s: stop kube-apiserver: %w", c.Name, err)
	}
	if err := pollUntil(ctx, time.Minute, func(context.Context) (bool, error) {
		return !processAlive(pid), nil
	}); err != nil {
		return fmt.Errorf("testbed: %s: kube-apiserver did not exit: %w", c.Name, err)
	}
	// kwokctl restarts a component only if its pid file names no process,
	// and a killed process stays a zombie until init reaps it, which here can
	// take a while. Remove the pid file, as kwokctl's own stop does.
	if err := os.Remove(filepath.Join(c.kwokClusterDir(), "pids", "kube-apiserver.pid")); err != nil {
		return fmt.Errorf("testbed: %s: %w", c.Name, err)
	}
	return nil
}

// StartAPIServer starts the kube-apiserver that StopAPIServer stopped, with
// the same flags and data, and returns once it is ready.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	// kwokctl start skips the components that still run. No --wait: that
	// waits for every component to report ready (through kubectl's
	// /healthz), which after an outage took up to two minutes although the
	// API server answered within seconds; its own /readyz is what counts.
	if err := c.kwokctl(ctx, "start", "cluster", "--name", c.Name); err != nil {
		return err
	}
	return c.waitReady(ctx)
}

// waitReady waits until the kube-apiserver answers /readyz.
func (c *Cluster) waitReady(ctx context.Context) error {
	cs, err := c.Kubernetes()
	if err != nil {
		return err
	}
	return pollUntil(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil, nil
	})
}

// processAlive reports whether pid runs and is not a zombie.
func processAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// ResidentBytes returns the resident memory (VmRSS) of each of this
// cluster's running processes, by component, as Pids names them.
func (c *Cluster) ResidentBytes() (map[string]int64, error) {
	pids, err := c.Pids()
	if err != nil {
		return nil, err
	}
	rss := map[string]int64{}
	for component, pid := range pids {
		n, err := residentBytes(pid)
		if err != nil {
			return nil, fmt.Errorf("testbed: %s: %w", component, err)
		}
		rss[component] = n
	}
	return rss, nil
}
