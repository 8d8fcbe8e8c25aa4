package controlplane

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
)

// Spec says which control plane to start.
type Spec struct {
	// Name is the cluster's name (a DNS-1123 label), also kwokctl's.
	Name string
	// Index is the cluster's position in its clusterset; it fixes the
	// CIDRs (pods from 10.(100+Index).0.0/16, services from
	// 10.(200+Index).0.0/16), so no two clusters of a testbed overlap.
	Index int
	// WorkDir is kwokctl's work directory (KWOK_WORKDIR), which several
	// control planes may share; KubeconfigPath where its admin kubeconfig
	// goes.
	WorkDir, KubeconfigPath string
	// BinDir holds the binaries (kube-apiserver, kwokctl, ...).
	BinDir string
	// DualStack adds IPv6 pod and service CIDRs.
	DualStack bool
	// AuditPolicy, if set, is a kube-apiserver audit policy file.
	AuditPolicy string
	// Zones is the number of zones (at least 1), NodesPerZone the number of
	// fake nodes in each.
	Zones, NodesPerZone int
	// ZoneCPU is the allocatable CPU of the nodes of each zone, in order
	// (a resource quantity such as "8"); zones past its end have "32".
	ZoneCPU []string
	// ControllerManagerFlags are added to kube-controller-manager's
	// command line, each "name=value".
	ControllerManagerFlags []string
	// Hub starts an API server and etcd only, no controllers and no nodes:
	// a hub for hub mode (Zones and NodesPerZone are ignored).
	Hub bool
	// HA (with Hub) makes the control plane highly available as kind
	// does: three etcd members, two kube-apiservers and haproxy in front
	// of them on the kubeconfig's address (ha.go).
	HA bool
	// Generic (with Hub, without HA) serves the hub from the KEP-4080
	// generic control plane instead of kube-apiserver (generic.go).
	Generic bool
	// AdvertiseAddress is the address the API server gives the
	// `kubernetes` Service as its endpoint: where a pod's in-cluster
	// client (rest.InClusterConfig) is sent by kube-proxy. Set it to the
	// host's address on the real nodes' bridge for pods to reach the API
	// server; empty leaves kube-apiserver's choice (an address of the
	// host's default interface).
	AdvertiseAddress string
	// SystemNamespaceAnnotations are given to the namespace mcs-system
	// when the control plane creates it. With AdvertiseAddress set, the API
	// server runs the admission plugins PodNodeSelector and
	// PodTolerationRestriction, which read a namespace's node selector and
	// default tolerations from such annotations.
	SystemNamespaceAnnotations map[string]string
}

// ControlPlane is one running (or described) control plane. Its exported
// fields are what the testbed records in its state file; Load makes a
// ControlPlane read back from there usable again.
type ControlPlane struct {
	// Name is the cluster's name, also its cluster ID in the clusterset
	// config.
	Name string
	// PodCIDR and ServiceCIDR are this cluster's address ranges; no two
	// clusters of a testbed overlap.
	PodCIDR, ServiceCIDR string
	// PodCIDRv6 and ServiceCIDRv6 are its IPv6 ranges with
	// Spec.DualStack (fd00:100:<i>::/48 and fd00:200:<i>::/108, i in hex),
	// else empty.
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
	// AuditLogPath is the kube-apiserver's audit log when
	// Spec.AuditPolicy is set.
	AuditLogPath string `json:",omitempty"`
	// Index is the cluster's position in the clusterset; it fixes the CIDRs.
	Index int
	// WorkDir is kwokctl's work directory.
	WorkDir string
	// HA describes the processes of an HA control plane (Spec.HA), else
	// nil. It is not read back by Load: an HA control plane lives as long
	// as the process that created it.
	HA *HA `json:",omitempty"`

	binDir       string
	auditPolicy  string
	nodesPerZone int
	zoneCPU      []string
	kcmFlags     []string
	hub          bool
	ha           bool
	generic      bool
	advertise    string
	nsAnnotation map[string]string
	restConfig   *rest.Config
	// genericArgs are the generic control plane's flags (Spec.Generic),
	// else nil.
	genericArgs []string
	// procs are the processes this control plane started itself (an HA
	// control plane's, a generic control plane), by name; they live as
	// long as the process that created it.
	procs map[string]*exec.Cmd
}

// New describes the control plane of spec; Create starts it.
func New(spec Spec) *ControlPlane {
	cp := &ControlPlane{
		Name:           spec.Name,
		PodCIDR:        fmt.Sprintf("10.%d.0.0/16", 100+spec.Index),
		ServiceCIDR:    fmt.Sprintf("10.%d.0.0/16", 200+spec.Index),
		KubeconfigPath: spec.KubeconfigPath,
		Context:        "kwok-" + spec.Name,
		Index:          spec.Index,
		WorkDir:        spec.WorkDir,
		binDir:         spec.BinDir,
		auditPolicy:    spec.AuditPolicy,
		nodesPerZone:   spec.NodesPerZone,
		zoneCPU:        spec.ZoneCPU,
		kcmFlags:       spec.ControllerManagerFlags,
		hub:            spec.Hub,
		ha:             spec.Hub && spec.HA,
		generic:        spec.Hub && spec.Generic && !spec.HA,
		advertise:      spec.AdvertiseAddress,
		nsAnnotation:   spec.SystemNamespaceAnnotations,
		procs:          map[string]*exec.Cmd{},
	}
	if spec.Hub {
		spec.Zones = 0
	}
	if spec.DualStack {
		cp.PodCIDRv6 = fmt.Sprintf("fd00:100:%x::/48", spec.Index)
		cp.ServiceCIDRv6 = fmt.Sprintf("fd00:200:%x::/108", spec.Index)
	}
	if spec.AuditPolicy != "" {
		cp.AuditLogPath = filepath.Join(cp.LogDir(), "audit.log")
	}
	for z := 0; z < spec.Zones; z++ {
		zone := fmt.Sprintf("%s-%c", spec.Name, 'a'+z)
		cp.Zones = append(cp.Zones, zone)
		for n := 0; n < spec.NodesPerZone; n++ {
			cp.Nodes = append(cp.Nodes, fmt.Sprintf("%s-node-%d", zone, n))
		}
	}
	return cp
}

// nodePodCIDR is the slice of the pod CIDR that node number i owns; kwok
// gives the node's pods their IPs from it. Slice 0 is kwok's fallback for
// nodes without a podCIDR.
func (cp *ControlPlane) nodePodCIDR(i int) string {
	return fmt.Sprintf("10.%d.%d.0/24", 100+cp.Index, i+1)
}

// DNSServiceIP is the ClusterIP reserved for the cluster's kube-dns
// Service (the kubelets' clusterDNS): the tenth address of the service
// CIDR.
func (cp *ControlPlane) DNSServiceIP() string {
	return strings.TrimSuffix(cp.ServiceCIDR, "0.0/16") + "0.10"
}

func (cp *ControlPlane) clusterDir() string {
	return filepath.Join(cp.WorkDir, "clusters", cp.Name)
}

// LogDir holds the logs of this cluster's processes (one file each).
func (cp *ControlPlane) LogDir() string { return filepath.Join(cp.clusterDir(), "logs") }

// Create starts the control plane and returns once its API server
// serves the MCS CRDs and kwok has made its fake nodes Ready, with
// namespace mcs-system created (as deploying config/ does).
func (cp *ControlPlane) Create(ctx context.Context) error {
	if err := createCluster(ctx, cp); err != nil {
		return err
	}
	if err := cp.Load(cp.binDir); err != nil {
		return err
	}
	if err := cp.waitCreated(ctx); err != nil {
		return err
	}
	if !cp.hub {
		if err := cp.createNodes(ctx); err != nil {
			return err
		}
	}
	if cp.ha {
		if err := cp.makeHA(ctx); err != nil {
			return err
		}
	}
	if cp.generic {
		if err := cp.makeGeneric(ctx); err != nil {
			return err
		}
	}
	if err := cp.InstallCRDs(ctx); err != nil {
		return err
	}
	if err := cp.createNamespace(ctx, SystemNamespace); err != nil {
		return err
	}
	if cp.ha || cp.generic {
		return nil // their API servers are no longer kwokctl's
	}
	// Again at the end: a controller may have exited while the above ran.
	return cp.waitCreated(ctx)
}

// SystemNamespace is where config/ deploys mcs-syncer, its leader
// election Lease and (the default publicationNamespace) its publications.
const SystemNamespace = "mcs-system"

// createNamespace creates namespace ns unless it exists.
func (cp *ControlPlane) createNamespace(ctx context.Context, ns string) error {
	kube, err := cp.Kubernetes()
	if err != nil {
		return err
	}
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Annotations: cp.nsAnnotation}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return nil
}

// createCluster runs `kwokctl create cluster` holding a lock that every
// testbed of this machine takes: kwokctl v0.8.0 picks its components' ports
// by counting down from 32767 to the first one free *now*, the same
// sequence in every process, so two testbeds created at once (go test runs
// packages in parallel) would pick the same ports and one's components
// would fail to bind. Once create returns, its components listen and the
// next one skips their ports.
func createCluster(ctx context.Context, cp *ControlPlane) error {
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "mcs-testbed-kwokctl.lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return fmt.Errorf("testbed: lock: %w", err)
	}
	defer lock.Close() // releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("testbed: lock %s: %w", lock.Name(), err)
	}
	config, err := cp.writeKwokctlConfig()
	if err != nil {
		return err
	}
	args := append(cp.createArgs(), "--config", config)
	ports, err := componentPorts(cp.hub)
	if err != nil {
		return fmt.Errorf("testbed: %s: %w", cp.Name, err)
	}
	args = append(args, ports...)
	return cp.kwokctl(ctx, args...)
}

// componentPorts gives a cluster's kube-apiserver and etcd, and a
// member's kube-controller-manager, kube-scheduler and kwok-controller,
// ports of host.FreePort's range, at random, rather than kwokctl's count
// down from 32767: those components exit when an API server outage
// outlasts their leader Lease, and while one was down another testbed's
// new cluster (make e2e runs two testbeds) counted down to its free port
// and took it, so it never started again (CI: west's
// kube-controller-manager, "bind: address already in use", and every
// later namespace of west without its default ServiceAccount). The same
// befell a new cluster's own kube-apiserver while the other testbed's
// tests had theirs stopped (CI rehearsal, 2026-11-29:
// TestTestbedTeardownLeavesNoProcess's "solo" never served /version).
// Chance alone would now have to pick that port, from 10,000.
func componentPorts(hub bool) ([]string, error) {
	flags := []string{"--kube-apiserver-port", "--etcd-port"}
	if !hub {
		flags = append(flags, "--kube-controller-manager-port", "--kube-scheduler-port", "--controller-port")
	}
	var args []string
	for _, flag := range flags {
		port, err := host.FreePort(false)
		if err != nil {
			return nil, err
		}
		args = append(args, flag, strconv.Itoa(port))
	}
	return args, nil
}

// writeKwokctlConfig writes the kwokctl configuration this control plane
// is created with, and returns its path. The API server's certificate
// names, besides the host's addresses kwokctl adds, the first address of
// each service CIDR: the `kubernetes` Service's ClusterIP, which a pod's
// in-cluster client dials and checks the certificate against.
func (cp *ControlPlane) writeKwokctlConfig() (string, error) {
	var sans []string
	for _, cidr := range []string{cp.ServiceCIDR, cp.ServiceCIDRv6} {
		if cidr == "" {
			continue
		}
		prefix, err := netip.ParsePrefix(cidr)
		if err != nil {
			return "", fmt.Errorf("testbed: service CIDR %q: %w", cidr, err)
		}
		sans = append(sans, prefix.Addr().Next().String())
	}
	config := "apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokctlConfiguration\noptions:\n  kubeApiserverCertSANs: [" + strings.Join(sans, ", ") + "]\n"
	path := filepath.Join(cp.WorkDir, cp.Name+".kwokctl.yaml")
	if err := os.MkdirAll(cp.WorkDir, 0o755); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, []byte(config), 0o644)
}

func (cp *ControlPlane) createArgs() []string {
	bin := func(name string) string { return filepath.Join(cp.binDir, name) }
	args := []string{
		"create", "cluster",
		"--name", cp.Name,
		"--runtime", "binary",
		"--kubeconfig", cp.KubeconfigPath,
		"--kube-authorization=true",
		"--kube-apiserver-binary", bin("kube-apiserver"),
		"--kube-controller-manager-binary", bin("kube-controller-manager"),
		"--kube-scheduler-binary", bin("kube-scheduler"),
		"--kwok-controller-binary", bin("kwok"),
		"--etcd-binary", bin("etcd"),
		"--wait", "2m",
	}
	if cp.hub {
		// An API server and its etcd: a hub has no workloads to control.
		args = append(args,
			"--disable", "kube-controller-manager,kube-scheduler,kwok-controller",
			"--extra-args", "kube-apiserver=service-cluster-ip-range="+cp.ServiceCIDR)
	} else {
		args = append(args, cp.memberArgs()...)
		for _, f := range cp.kcmFlags {
			args = append(args, "--extra-args", "kube-controller-manager="+f)
		}
	}
	if cp.advertise != "" {
		args = append(args, "--extra-args", "kube-apiserver=advertise-address="+cp.advertise,
			"--extra-args", "kube-apiserver=enable-admission-plugins=PodNodeSelector,PodTolerationRestriction")
	}
	if cp.auditPolicy != "" {
		args = append(args, "--kube-audit-policy", cp.auditPolicy)
	}
	return args
}

func (cp *ControlPlane) memberArgs() []string {
	return []string{
		// kwokctl v0.8.0 files a repeated component's args under the index
		// of its first --extra-args among all of them, not among the
		// components: each component's first one must come before any
		// repeat, in this order, or kwokctl panics.
		"--extra-args", "kube-apiserver=service-cluster-ip-range=" + host.JoinIPFamilies(cp.ServiceCIDR, cp.ServiceCIDRv6),
		"--extra-args", "kube-controller-manager=service-cluster-ip-range=" + host.JoinIPFamilies(cp.ServiceCIDR, cp.ServiceCIDRv6),
		"--extra-args", "kwok-controller=cidr=" + cp.nodePodCIDR(-1),
		"--extra-args", "kube-controller-manager=cluster-cidr=" + host.JoinIPFamilies(cp.PodCIDR, cp.PodCIDRv6),
		// kwok plays only the fake nodes: a real node's kubelet reports
		// its own status and runs its own pods.
		"--extra-args", "kwok-controller=manage-all-nodes=false",
		"--extra-args", "kwok-controller=manage-nodes-with-label-selector=type=kwok",
		// exec and logs reach a real node's kubelet at its address: node
		// names do not resolve on this host.
		"--extra-args", "kube-apiserver=kubelet-preferred-address-types=InternalIP,Hostname",
	}
}

// kwokctl runs kwokctl with this testbed's work directory, so that it never
// reads or writes ~/.kwok, and with the testbed's binaries first in PATH:
// kwokctl runs whatever `kubectl` PATH finds to probe a cluster, and a
// different one (or a cloud SDK's wrapper) may not speak v1.36 or may hang.
func (cp *ControlPlane) kwokctl(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(cp.binDir, "kwokctl"), args...)
	cmd.Env = append(os.Environ(),
		"KWOK_WORKDIR="+cp.WorkDir,
		"PATH="+cp.binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kwokctl %s: %w\n%s", strings.Join(args[:2], " "), err, out)
	}
	return nil
}

// Load reads the admin kubeconfig of a control plane that runs (after
// Create, or after reading a ControlPlane back from a state file) and
// takes binDir as its binaries' folder.
func (cp *ControlPlane) Load(binDir string) error {
	cp.binDir = binDir
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.KubeconfigPath)
	if err != nil {
		return fmt.Errorf("testbed: read kubeconfig %s: %w", cp.KubeconfigPath, err)
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
		return fmt.Errorf("testbed: kubeconfig %s: %w", cp.KubeconfigPath, err)
	}
	cfg.CAFile, cfg.CertFile, cfg.KeyFile = "", "", ""
	cp.restConfig = cfg
	return nil
}

// Destroy stops every process of the control plane at once (SIGKILL:
// those the testbed started itself, for an HA or generic control plane;
// kwokctl deletes its own) and removes its data; the testbed's other
// control planes run on. For the control planes a test starts beside the
// testbed's (StartHAHub, StartBareHub).
func (cp *ControlPlane) Destroy(ctx context.Context) error {
	var errs []error
	for name := range cp.procs {
		errs = append(errs, cp.stopProcess(ctx, name))
	}
	if cp.HA == nil {
		errs = append(errs, cp.kwokctl(ctx, "delete", "cluster", "--name", cp.Name))
	}
	errs = append(errs, os.RemoveAll(cp.clusterDir()))
	return errors.Join(errs...)
}

// RESTConfig returns a copy of the admin rest.Config of this cluster.
func (cp *ControlPlane) RESTConfig() *rest.Config { return rest.CopyConfig(cp.restConfig) }

// Scheme is the scheme of the clients the testbed hands out: client-go's
// built-in types, the CRD types and both served versions of the MCS API.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme,
		mcsv1beta1.Install, mcsv1alpha1.Install, v1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err) // only fails on conflicting registrations, a programming error
		}
	}
	return s
}

// Client returns a controller-runtime client (no cache) with Scheme.
func (cp *ControlPlane) Client() (client.Client, error) {
	cl, err := client.New(cp.RESTConfig(), client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, fmt.Errorf("testbed: client for %s: %w", cp.Name, err)
	}
	return cl, nil
}

// Kubernetes returns a client-go clientset for this cluster.
func (cp *ControlPlane) Kubernetes() (kubernetes.Interface, error) {
	cs, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		return nil, fmt.Errorf("testbed: clientset for %s: %w", cp.Name, err)
	}
	return cs, nil
}

// Pids returns the process ids of this control plane's running
// processes, by component (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kwok-controller).
func (cp *ControlPlane) Pids() (map[string]int, error) {
	files, err := filepath.Glob(filepath.Join(cp.clusterDir(), "pids", "*.pid"))
	if err != nil {
		return nil, err
	}
	pids := map[string]int{}
	for _, f := range files {
		pid, alive, err := host.ReadPidFile(f)
		if err != nil {
			return nil, fmt.Errorf("controlplane %s: %w", cp.Name, err)
		}
		if alive {
			pids[strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
		}
	}
	return pids, nil
}

// StopAPIServer kills this cluster's kube-apiserver (SIGKILL, as in a
// crash) and waits until it is gone; everything else keeps running. For
// fault tests: clients see connection errors and watches break.
//
// Of an HA control plane it kills every API server replica.
func (cp *ControlPlane) StopAPIServer(ctx context.Context) error {
	if cp.HA != nil {
		for i := range cp.HA.APIServerPorts {
			if err := cp.StopAPIServerReplica(ctx, i); err != nil {
				return err
			}
		}
		return nil
	}
	pid, err := cp.apiServerPid()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("testbed: %s: stop kube-apiserver: %w", cp.Name, err)
	}
	if err := host.PollUntil(ctx, time.Minute, func(context.Context) (bool, error) {
		return !host.ProcessAlive(pid), nil
	}); err != nil {
		return fmt.Errorf("testbed: %s: kube-apiserver did not exit: %w", cp.Name, err)
	}
	// kwokctl restarts a component only if its pid file names no process,
	// and a killed process stays a zombie until init reaps it, which here can
	// take a while. Remove the pid file, as kwokctl's own stop does.
	if err := os.Remove(filepath.Join(cp.clusterDir(), "pids", "kube-apiserver.pid")); err != nil {
		return fmt.Errorf("testbed: %s: %w", cp.Name, err)
	}
	port, err := cp.apiServerPort()
	if err != nil {
		return err
	}
	return holdPort(ctx, port)
}

// PauseAPIServer freezes this cluster's kube-apiserver (SIGSTOP): the
// kernel still accepts connections on its port, and nothing answers, as
// from a server that hangs. ResumeAPIServer thaws it. For a single API
// server (not HA).
func (cp *ControlPlane) PauseAPIServer() error { return cp.signalAPIServer(syscall.SIGSTOP) }

// ResumeAPIServer thaws the kube-apiserver that PauseAPIServer froze.
func (cp *ControlPlane) ResumeAPIServer() error { return cp.signalAPIServer(syscall.SIGCONT) }

func (cp *ControlPlane) signalAPIServer(sig syscall.Signal) error {
	if cp.HA != nil {
		return fmt.Errorf("testbed: %s: pausing an HA control plane's API servers is not supported", cp.Name)
	}
	pid, err := cp.apiServerPid()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("testbed: %s: signal %v to kube-apiserver: %w", cp.Name, sig, err)
	}
	return nil
}

// apiServerPid is the pid of this cluster's (single) kube-apiserver.
func (cp *ControlPlane) apiServerPid() (int, error) {
	pids, err := cp.Pids()
	if err != nil {
		return 0, err
	}
	pid, ok := pids["kube-apiserver"]
	if !ok {
		return 0, fmt.Errorf("testbed: %s: kube-apiserver is not running", cp.Name)
	}
	return pid, nil
}

// StartAPIServer starts the kube-apiserver that StopAPIServer stopped, with
// the same flags and data, and returns once it is ready.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	if cp.HA != nil {
		for i := range cp.HA.APIServerPorts {
			if err := cp.StartAPIServerReplica(ctx, i); err != nil {
				return err
			}
		}
		return cp.waitReady(ctx)
	}
	port, err := cp.apiServerPort()
	if err != nil {
		return err
	}
	releasePort(port)
	if cp.genericArgs != nil {
		return cp.startGeneric(ctx)
	}
	if err := cp.startExited(ctx); err != nil {
		return err
	}
	if err := cp.waitReady(ctx); err != nil {
		// With the end of its log: a restart that never answered once
		// failed an e2e test with nothing but the deadline to go on, and
		// the testbed (its logs with it) is gone when the tests end.
		return fmt.Errorf("testbed: %s: kube-apiserver restarted but not ready: %w%s", cp.Name, err, cp.logTail("kube-apiserver"))
	}
	return cp.keepComponents(ctx)
}

// logTail is the end of a component's log (its last 2 KiB), with a line
// that names it, to end an error with: the testbed, its logs with it, is
// gone when the tests end.
func (cp *ControlPlane) logTail(component string) string {
	log, err := os.ReadFile(filepath.Join(cp.LogDir(), component+".log"))
	if err != nil {
		return fmt.Sprintf("\n(no log of %s: %v)", component, err)
	}
	if len(log) > 2048 {
		log = log[len(log)-2048:]
	}
	return fmt.Sprintf("\nthe end of %s's log:\n%s", component, log)
}

// createdRestarts bounds how often waitCreated starts exited components
// again: a component that keeps exiting has a reason in its log, which
// every start would push further away.
const createdRestarts = 3

// waitCreated returns once the API server that kwokctl created answers
// /readyz and every component runs. kwokctl create's --wait only logs a
// cluster not ready in time and returns success (kwok v0.8.0,
// pkg/kwokctl/cmd/create/cluster), so
// on a loaded machine the first request after it was refused (CI,
// 2026-11-30: "create node solo-a-node-0: ... connection refused", the
// tests beside it five times slower than in the rehearsal); and under
// load a kube-controller-manager or kube-scheduler can exit on a lost
// leader Lease before the cluster is handed out (an e2e rehearsal's
// one-cluster testbed ran 5 of its 6 processes). A component that has
// exited is started again; if the API server is still not ready, or one
// keeps exiting, the error names what is not running and ends with the API
// server's and etcd's logs.
func (cp *ControlPlane) waitCreated(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		return err
	}
	components, err := cp.components()
	if err != nil {
		return err
	}
	var last error
	var down []string
	restarts := 0
	err = host.PollUntil(ctx, 4*time.Minute, func(ctx context.Context) (bool, error) {
		_, last = cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		var err error
		if down, err = cp.notRunning(components); err != nil {
			return false, err
		}
		switch {
		case last == nil && len(down) == 0:
			return true, nil
		case len(down) == 0 || restarts == createdRestarts:
			return false, nil
		}
		restarts++
		return false, cp.startExited(ctx)
	})
	if err != nil {
		return fmt.Errorf("testbed: %s: not up after create: %w (the API server's /readyz: %v; not running: %v, started again %d times)%s%s",
			cp.Name, err, last, down, restarts, cp.logTail("kube-apiserver"), cp.logTail("etcd"))
	}
	return nil
}

// components names this control plane's components: those kwokctl wrote a
// pid file for. Taken once before a restart, not after: startExited removes
// the pid files of those that exited.
func (cp *ControlPlane) components() ([]string, error) {
	files, err := filepath.Glob(filepath.Join(cp.clusterDir(), "pids", "*.pid"))
	if err != nil {
		return nil, err
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = strings.TrimSuffix(filepath.Base(f), ".pid")
	}
	return names, nil
}

// notRunning returns those of components that no running process plays.
func (cp *ControlPlane) notRunning(components []string) ([]string, error) {
	pids, err := cp.Pids()
	if err != nil {
		return nil, err
	}
	var down []string
	for _, name := range components {
		if pids[name] == 0 {
			down = append(down, name)
		}
	}
	return down, nil
}

// componentsSettle is how long every component must have run after a
// restart of the API server for keepComponents to return.
const componentsSettle = 3 * time.Second

// keepComponents starts again, until every component has run for
// componentsSettle, each one that exits after an API server restart.
// kube-controller-manager and kube-scheduler exit once they cannot renew
// their leader Lease (10 s); an outage about that long makes them exit
// while kwokctl start runs, which skips them as still running, and the
// cluster went on without controllers (seen under load: north's
// namespaces got no default ServiceAccount, and two e2e tests failed).
func (cp *ControlPlane) keepComponents(ctx context.Context) error {
	components, err := cp.components()
	if err != nil {
		return err
	}
	var missing []string
	stableSince := time.Now()
	err = host.PollUntil(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		var err error
		if missing, err = cp.notRunning(components); err != nil {
			return false, err
		}
		if len(missing) == 0 {
			return time.Since(stableSince) >= componentsSettle, nil
		}
		if err := cp.startExited(ctx); err != nil {
			return false, err
		}
		stableSince = time.Now()
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("testbed: %s: after the API server's restart, %v did not keep running: %w", cp.Name, missing, err)
	}
	return nil
}

// startExited starts the components of this control plane that are not
// running (the kube-apiserver that StopAPIServer stopped, and any other
// that exited meanwhile).
func (cp *ControlPlane) startExited(ctx context.Context) error {
	// kube-controller-manager exits when it cannot renew its leader Lease
	// during the outage, and stays a zombie for a while: kwokctl would take
	// it for running and not start it again, and the cluster would go on
	// without controllers (a namespace without its default ServiceAccount
	// failed a later test in CI). Remove the pid files of the components
	// that are gone, as kwokctl's own stop does.
	if err := cp.forgetExited(); err != nil {
		return err
	}
	// kwokctl start skips the components that still run. No --wait: that
	// waits for every component to report ready (through kubectl's
	// /healthz), which after an outage took up to two minutes although the
	// API server answered within seconds; its own /readyz is what counts.
	return cp.kwokctl(ctx, "start", "cluster", "--name", cp.Name)
}

// forgetExited removes the pid files of this control plane's components
// whose process has exited (gone, or a zombie).
func (cp *ControlPlane) forgetExited() error {
	files, err := filepath.Glob(filepath.Join(cp.clusterDir(), "pids", "*.pid"))
	if err != nil {
		return err
	}
	for _, f := range files {
		if _, alive, err := host.ReadPidFile(f); err == nil && !alive {
			if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("testbed: %s: %w", cp.Name, err)
			}
		}
	}
	return nil
}

// waitReady waits until the kube-apiserver answers /readyz.
func (cp *ControlPlane) waitReady(ctx context.Context) error {
	return waitReadyAt(ctx, cp.RESTConfig())
}

// waitReadyAt waits until the kube-apiserver at rc answers /readyz.
func waitReadyAt(ctx context.Context, rc *rest.Config) error {
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	// Generous: an HA hub's two API servers start beside two e2e
	// testbeds on two cores (CI once saw one not ready after 2 minutes).
	var last error
	if err := host.PollUntil(ctx, 4*time.Minute, func(ctx context.Context) (bool, error) {
		_, last = cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return last == nil, nil
	}); err != nil {
		return fmt.Errorf("API server %s not ready: %w (its /readyz: %v)", rc.Host, err, last)
	}
	return nil
}

// ResidentBytes returns the resident memory (VmRSS) of each of this
// control plane's running processes, by component, as Pids names them.
func (cp *ControlPlane) ResidentBytes() (map[string]int64, error) {
	pids, err := cp.Pids()
	if err != nil {
		return nil, err
	}
	return ResidentBytes(pids)
}

// ResidentBytes returns the resident memory of each process of pids, by
// the same names.
func ResidentBytes(pids map[string]int) (map[string]int64, error) {
	rss := map[string]int64{}
	for component, pid := range pids {
		n, err := host.ResidentBytes(pid)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", component, err)
		}
		rss[component] = n
	}
	return rss, nil
}
