package testbed

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mcs-syncer/mcs-syncer/test/testbed/controlplane"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/realnode"
)

// DefaultClusters are the member clusters started when Options.Clusters is
// empty.
var DefaultClusters = []string{"east", "west", "north"}

// ErrNoBinaries is wrapped by the error of Start when the binary folder
// lacks some of Binaries (or, with real nodes, the host lacks what they
// need): tests that need real control planes skip then, saying how to get
// them.
var ErrNoBinaries = host.ErrNoBinaries

// Binaries are the executables the testbed needs in its binary folder.
var Binaries = []string{
	"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl",
	"etcd", "kwok", "kwokctl", "coredns",
}

// maxClusters bounds the clusterset so that every cluster's CIDRs fit the
// 10.(100+i) and 10.(200+i) scheme of the package doc.
const maxClusters = 50

// stateMarker marks a folder as a testbed's state folder; teardown removes
// no folder without it.
const stateMarker = ".mcs-testbed"

//go:embed teardown.sh
var teardownScript string

// Options configure Start. The zero value starts DefaultClusters with the
// binaries of `make tools` and the state folder <repo>/.cache/testbed.
type Options struct {
	// Clusters names the member clusters (DNS-1123 labels), in order; the
	// order fixes each cluster's CIDRs. Default: DefaultClusters.
	Clusters []string
	// StateDir holds everything the testbed writes and is removed by Stop.
	// Default: <repo>/.cache/testbed.
	StateDir string
	// BinDir holds the binaries named in Binaries. Default: $MCS_TOOLS_DIR
	// if set, else <repo>/.cache/bin (where `make tools` builds them).
	BinDir string
	// Zones is the number of zones per cluster (default 2, at least 1);
	// NodesPerZone the number of fake nodes in each (default 1).
	Zones        int
	NodesPerZone int
	// ZoneCPU is the allocatable CPU of each zone's nodes, in zone order
	// (default "32" each).
	ZoneCPU []string
	// AuditPolicy, if set, is the path of a kube-apiserver audit policy; each
	// kube-apiserver then writes its audit log to Cluster.AuditLogPath.
	AuditPolicy string
	// ControllerManagerFlags are added to each kube-controller-manager's
	// command line, each "name=value" (such as "vmodule=x=4").
	ControllerManagerFlags []string
	// TeardownOnExit starts a watchdog process that tears the testbed down
	// when the calling process exits without calling Stop. Tests want it;
	// `testbed up`, whose clusters must outlive it, does not.
	TeardownOnExit bool
	// RealNodes adds to each cluster a node with a real kubelet, containerd
	// and kube-proxy in a network namespace of its own (package realnode),
	// and makes CoreDNS the pods' DNS behind a kube-dns Service. Needs root
	// and the Debian packages that realnode.CheckHost names.
	RealNodes bool
	// RealNodeZones sets the topology.kubernetes.io/zone of the real node of
	// the clusters it names; the others' real nodes are in their cluster's
	// first zone ("<cluster>-a"). Giving nodes of several clusters one zone
	// name lets tests see zone-aware routing across clusters.
	RealNodeZones map[string]string
	// RealNodeNames names the real node of the clusters it names; the
	// others' are "<cluster>-worker". Giving nodes of several clusters one
	// name shows that a node name from another cluster never counts as a
	// consumer's own node (kind-based clustersets share node names).
	RealNodeNames map[string]string
	// Hub starts a hub for hub mode besides the members: a kube-apiserver
	// and etcd without controllers or nodes, with config/hub applied
	// (Clusterset.Hub), and writes each member's hub-mode clusterset
	// config (Clusterset.HubConfigPath).
	Hub bool
	// GenericHub (with Hub) serves the hub from the KEP-4080 generic
	// control plane (binary generic-controlplane) instead of kube-apiserver.
	GenericHub bool
	// DualStack gives every cluster IPv6 pod and service CIDRs besides the
	// IPv4 ones (IPv4 stays the primary family), and real nodes IPv6
	// addresses and routes: dual-stack Services get both ClusterIPs and
	// real pods both IPs. kwok's pods keep one IPv4 address.
	DualStack bool
	// Log receives one line per step; nil discards them.
	Log io.Writer
}

// Clusterset is a running testbed.
type Clusterset struct {
	// Clusters in the order of Options.Clusters.
	Clusters []*Cluster
	// StateDir is the state folder; ConfigPath the clusterset config file in
	// it, in the format internal/clusterset reads.
	StateDir   string
	ConfigPath string
	// BinDir holds the binaries the testbed runs.
	BinDir string
	// Hub is the hub's control plane with Options.Hub, else nil.
	Hub *controlplane.ControlPlane

	opts     Options
	watchdog *exec.Cmd
	// watchdogPipe is the only writer of the watchdog's stdin; closing it (or
	// exiting) tells the watchdog to tear down.
	watchdogPipe *os.File
}

func (o *Options) defaults() error {
	if len(o.Clusters) == 0 {
		o.Clusters = DefaultClusters
	}
	if len(o.Clusters) > maxClusters {
		return fmt.Errorf("testbed: %d clusters requested, at most %d are supported", len(o.Clusters), maxClusters)
	}
	seen := map[string]bool{}
	for _, name := range o.Clusters {
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return fmt.Errorf("testbed: cluster name %q: %s", name, strings.Join(errs, "; "))
		}
		if seen[name] {
			return fmt.Errorf("testbed: cluster name %q given twice", name)
		}
		seen[name] = true
	}
	if o.Zones == 0 {
		o.Zones = 2
	}
	if o.Zones < 1 || o.Zones > 26 {
		return fmt.Errorf("testbed: zones per cluster must be 1..26, got %d", o.Zones)
	}
	for name, zone := range o.RealNodeZones {
		if !slices.Contains(o.Clusters, name) {
			return fmt.Errorf("testbed: RealNodeZones names %q, which is not a cluster of the testbed", name)
		}
		if errs := validation.IsValidLabelValue(zone); len(errs) > 0 || zone == "" {
			return fmt.Errorf("testbed: real node zone %q: %s", zone, strings.Join(errs, "; "))
		}
	}
	for name, node := range o.RealNodeNames {
		if !slices.Contains(o.Clusters, name) {
			return fmt.Errorf("testbed: RealNodeNames names %q, which is not a cluster of the testbed", name)
		}
		if errs := validation.IsDNS1123Subdomain(node); len(errs) > 0 {
			return fmt.Errorf("testbed: real node name %q: %s", node, strings.Join(errs, "; "))
		}
	}
	if o.NodesPerZone == 0 {
		o.NodesPerZone = 1
	}
	if o.NodesPerZone < 1 || o.Zones*o.NodesPerZone > 250 {
		return fmt.Errorf("testbed: %d zones x %d nodes per zone: need 1..250 nodes per cluster", o.Zones, o.NodesPerZone)
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	var err error
	if o.StateDir, o.BinDir, err = o.Paths(); err != nil {
		return err
	}
	var missing []string
	needed := Binaries
	if o.Hub && o.GenericHub {
		needed = append(slices.Clone(needed), controlplane.GenericBinary)
	}
	for _, b := range needed {
		if info, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil || info.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("testbed: %s lacks %s: %w: run `make tools` (or set MCS_TOOLS_DIR to a folder that has them)",
			o.BinDir, strings.Join(missing, ", "), ErrNoBinaries)
	}
	if o.RealNodes {
		return realnode.CheckHost(o.BinDir)
	}
	return nil
}

// Paths returns the state and binary folders that Start uses with these
// options, as absolute paths.
func (o Options) Paths() (stateDir, binDir string, err error) {
	stateDir, binDir = o.StateDir, o.BinDir
	if binDir == "" {
		binDir = os.Getenv("MCS_TOOLS_DIR")
	}
	if stateDir == "" || binDir == "" {
		root, err := host.RepoRoot()
		if err != nil {
			return "", "", err
		}
		if stateDir == "" {
			stateDir = filepath.Join(root, ".cache", "testbed")
		}
		if binDir == "" {
			binDir = filepath.Join(root, ".cache", "bin")
		}
	}
	if stateDir, err = filepath.Abs(stateDir); err != nil {
		return "", "", fmt.Errorf("testbed: state folder: %w", err)
	}
	if binDir, err = filepath.Abs(binDir); err != nil {
		return "", "", fmt.Errorf("testbed: binary folder: %w", err)
	}
	return stateDir, binDir, nil
}

// Start brings a clusterset up and returns once every cluster serves the
// MCS CRDs, has Ready nodes and a CoreDNS that answers. A testbed left in
// the same state folder by an earlier run is torn down first. On error,
// whatever was started is torn down again.
func Start(ctx context.Context, opts Options) (*Clusterset, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	cs := &Clusterset{
		StateDir:   opts.StateDir,
		ConfigPath: filepath.Join(opts.StateDir, "clusterset.yaml"),
		BinDir:     opts.BinDir,
		opts:       opts,
	}
	// A testbed with real nodes may have left namespaces and cgroups even
	// when its folder is gone; the teardown finds them by the folder's name.
	if entries, err := os.ReadDir(opts.StateDir); (err == nil && len(entries) > 0) || opts.RealNodes {
		if len(entries) > 0 {
			fmt.Fprintf(opts.Log, "testbed: removing the testbed left in %s\n", opts.StateDir)
		}
		if err := Down(ctx, opts.StateDir, opts.BinDir); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(opts.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	if err := os.WriteFile(filepath.Join(opts.StateDir, stateMarker), nil, 0o644); err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	if opts.TeardownOnExit {
		if err := cs.startWatchdog(); err != nil {
			return nil, errors.Join(err, Down(ctx, opts.StateDir, opts.BinDir))
		}
	}
	var network realnode.Network
	if opts.RealNodes {
		var err error
		if network, err = realnode.ReserveNetwork(ctx, cs.StateDir, opts.DualStack); err != nil {
			return nil, errors.Join(err, cs.Stop(context.WithoutCancel(ctx)))
		}
	}
	for i, name := range opts.Clusters {
		cs.Clusters = append(cs.Clusters, newCluster(cs, i, name, network))
	}
	if opts.RealNodes {
		var nodes []*realnode.Node
		for _, c := range cs.Clusters {
			nodes = append(nodes, c.RealNode)
		}
		if err := realnode.CreateNetwork(ctx, cs.StateDir, network, nodes); err != nil {
			return nil, errors.Join(err, cs.Stop(context.WithoutCancel(ctx)))
		}
	}
	for _, c := range cs.Clusters {
		start := time.Now()
		if err := c.start(ctx); err != nil {
			return nil, errors.Join(fmt.Errorf("testbed: cluster %s: %w", c.Name, err), cs.Stop(context.WithoutCancel(ctx)))
		}
		fmt.Fprintf(opts.Log, "testbed: cluster %s up in %s (pods %s, services %s, DNS %s)\n",
			c.Name, time.Since(start).Round(time.Millisecond), c.PodCIDR, c.ServiceCIDR, c.DNSAddr)
	}
	if opts.Hub {
		start := time.Now()
		if err := cs.startHub(ctx); err != nil {
			return nil, errors.Join(err, cs.Stop(context.WithoutCancel(ctx)))
		}
		if err := cs.writeHubConfigs(ctx); err != nil {
			return nil, errors.Join(err, cs.Stop(context.WithoutCancel(ctx)))
		}
		server := "kube-apiserver"
		if cs.Hub.Generic() {
			server = "the generic control plane"
		}
		fmt.Fprintf(opts.Log, "testbed: hub up in %s, served by %s (KUBECONFIG=%s)\n", time.Since(start).Round(time.Millisecond), server, cs.Hub.KubeconfigPath)
	}
	writeKubeconfig := func(cs *Clusterset) error { return cs.WriteKubeconfig(cs.KubeconfigPath()) }
	for _, write := range []func(*Clusterset) error{writeClustersetConfig, writeState, writeKubeconfig} {
		if err := write(cs); err != nil {
			return nil, errors.Join(err, cs.Stop(context.WithoutCancel(ctx)))
		}
	}
	return cs, nil
}

// Cluster returns the member called name, or nil.
func (cs *Clusterset) Cluster(name string) *Cluster {
	for _, c := range cs.Clusters {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Stop stops every process of the testbed and removes its state folder.
func (cs *Clusterset) Stop(ctx context.Context) error {
	if cs.watchdog != nil {
		// Closing the pipe makes the watchdog run the teardown itself; wait
		// for it so Stop returns with everything gone.
		_ = cs.watchdogPipe.Close()
		err := cs.watchdog.Wait()
		cs.watchdog = nil
		if err != nil {
			return fmt.Errorf("testbed: teardown: %w", err)
		}
		return nil
	}
	return Down(ctx, cs.StateDir, cs.BinDir)
}

// Down tears down the testbed whose state folder is stateDir: it stops the
// processes it started (those whose executable lies in binDir or stateDir)
// and removes stateDir. It is safe to call on a folder that is gone or
// empty, and refuses a non-empty folder that Start did not make.
func Down(ctx context.Context, stateDir, binDir string) error {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", teardownScript, "teardown", stateDir, binDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("testbed: teardown of %s: %w: %s", stateDir, err, out)
	}
	return nil
}

// startWatchdog starts the teardown script in a process of its own that
// waits for end of input on a pipe whose only writer is this process. When
// this process exits for whatever reason, the kernel closes the pipe and the
// watchdog tears the testbed down. It runs in its own process group and
// ignores SIGINT, so a Ctrl-C sent to the test's process group does not stop
// it before it has done its job.
func (cs *Clusterset) startWatchdog() error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("testbed: watchdog pipe: %w", err)
	}
	cmd := exec.Command("/bin/sh", "-c", teardownScript, "teardown", cs.StateDir, cs.BinDir)
	cmd.Env = append(os.Environ(), "TESTBED_WAIT_STDIN=1")
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = r.Close()
		_ = w.Close()
		return fmt.Errorf("testbed: start watchdog: %w", err)
	}
	_ = r.Close()
	cs.watchdog = cmd
	cs.watchdogPipe = w
	return nil
}
