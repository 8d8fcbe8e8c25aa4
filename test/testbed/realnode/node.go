package realnode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mcs-syncer/mcs-syncer/test/images"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
)

// Binaries are the executables a real node needs besides the control
// plane's:
// kubelet and kube-proxy from the binary folder, the rest from Debian's
// packages (containerd, runc, containernetworking-plugins, iptables,
// util-linux, iproute2).
var Binaries = []string{"kubelet", "kube-proxy"}

// hostCommands are the host's programs a real node runs, with the Debian
// package that has them.
var hostCommands = map[string]string{
	"containerd": "containerd", "ctr": "containerd", "runc": "runc",
	"ip": "iproute2", "nsenter": "util-linux", "unshare": "util-linux",
	"iptables": "iptables", "/usr/lib/cni/bridge": "containernetworking-plugins",
	"/usr/lib/cni/host-local": "containernetworking-plugins", "/usr/lib/cni/loopback": "containernetworking-plugins",
}

// Taint keeps every pod off a real node that does not tolerate it: the
// tests' and benchmarks' many kwok pods stay on the fake nodes, and only
// pods placed with Place run for real.
var Taint = corev1.Taint{Key: Label, Effect: corev1.TaintEffectNoSchedule}

// Label marks real nodes (value "true"); the taint has the same key.
const Label = "mcs-syncer.io/real-node"

// NamespacePolicy are the annotations that put every pod of a namespace
// on the real node, as Place does one pod: read by the API server's
// admission plugins PodNodeSelector and PodTolerationRestriction. The
// testbed gives them to mcs-system, a cluster's policy as an operator
// would pin system pods to system nodes, so that mcs-syncer's Pods,
// installed from config/ unchanged, run for real instead of on a fake
// node.
var NamespacePolicy = map[string]string{
	"scheduler.alpha.kubernetes.io/node-selector":      Label + "=true",
	"scheduler.alpha.kubernetes.io/defaultTolerations": `[{"key":"` + Label + `","operator":"Exists","effect":"NoSchedule"}]`,
}

// Node is a cluster's node with a real kubelet, containerd, runc, CNI
// bridge and kube-proxy, in a network namespace of its own.
type Node struct {
	// Name is the Node's name, "<cluster>-worker" unless set before Start
	// (the state folder, network namespace and cgroup are the cluster's,
	// so nodes of several clusters may share a name).
	Name string
	// IP is its address on the nodes' bridge (its InternalIP); PodCIDR the
	// range its pods get their IPs from, routed from every other node.
	IP, PodCIDR string
	// HostIP is the host's address on the bridge, where the node reaches
	// the API servers and CoreDNS (Network.HostIP).
	HostIP string
	// IPv6 and PodCIDRv6 are the same for IPv6 on a dual-stack node.
	IPv6      string `json:",omitempty"`
	PodCIDRv6 string `json:",omitempty"`
	// Zone is its topology.kubernetes.io/zone (set by Start).
	Zone string `json:",omitempty"`
	// Netns is its network namespace (`ip netns exec <Netns> ...`).
	Netns string
	// Dir holds its state: configs, containerd's root and state, the
	// kubelet's root, pod logs; LogDir the components' logs.
	Dir string
	// Cgroup is its cgroup path in every hierarchy: containerd, kubelet and
	// kube-proxy in <Cgroup>/node, pods in <Cgroup>/kubepods.
	Cgroup string

	index int
}

// Place puts a pod on its cluster's real node: a node selector and a
// toleration of Taint.
func Place(pod *corev1.PodSpec) {
	if pod.NodeSelector == nil {
		pod.NodeSelector = map[string]string{}
	}
	pod.NodeSelector[Label] = "true"
	pod.Tolerations = append(pod.Tolerations, corev1.Toleration{
		Key: Taint.Key, Operator: corev1.TolerationOpExists, Effect: Taint.Effect,
	})
}

// New describes the real node of cluster number index of the testbed whose
// state folder is stateDir, on its network; Start starts it, once
// CreateNetwork has made its network namespace.
func New(stateDir string, network Network, cluster string, index int, dualStack bool) *Node {
	n := &Node{
		Name:    cluster + "-worker",
		IP:      network.nodeIP(index),
		PodCIDR: network.nodePodCIDR(index),
		HostIP:  network.HostIP(),
		Netns:   bridgeName(stateDir) + "-" + cluster,
		Dir:     filepath.Join(stateDir, "nodes", cluster),
		Cgroup:  "/" + bridgeName(stateDir) + "/" + cluster,
		index:   index,
	}
	if dualStack {
		n.IPv6, n.PodCIDRv6 = network.nodeIPv6(index), network.nodePodCIDRv6(index)
	}
	return n
}

// ImportImage imports the image archive (an OCI or docker archive, as
// `make image` writes) into the node's containerd, where the kubelet finds
// it: `ctr -n k8s.io images import`, as on any containerd node.
func (n *Node) ImportImage(ctx context.Context, archive string) error {
	if out, err := n.ctr(ctx, "images", "import", "--snapshotter", "native", archive); err != nil {
		return fmt.Errorf("real node %s: import %s: %w: %s", n.Name, archive, err, out)
	}
	return nil
}

// Spec is what a real node needs of its cluster.
type Spec struct {
	// Zone is the node's topology.kubernetes.io/zone; Region its
	// topology.kubernetes.io/region.
	Zone, Region string
	// KubeconfigPath is an admin kubeconfig of the cluster; the node's
	// own, pointed at the API server through the host's bridge address, is
	// derived from it.
	KubeconfigPath string
	// ClusterCIDRs are the cluster's pod CIDRs as kube-proxy's
	// --cluster-cidr takes them ("v4" or "v4,v6").
	ClusterCIDRs string
	// DNSServiceIP is the kubelet's clusterDNS.
	DNSServiceIP string
	// BinDir holds kubelet, kube-proxy and the images' archives.
	BinDir string
	// Client is a client of the cluster, to register and watch the Node.
	Client kubernetes.Interface
}

// LogDir holds containerd.log, kubelet.log and kube-proxy.log.
func (n *Node) LogDir() string { return filepath.Join(n.Dir, "logs") }

func (n *Node) socket() string { return filepath.Join(n.Dir, "containerd", "containerd.sock") }

// CheckHost says, in one message wrapping host.ErrNoBinaries, which
// programs a real node needs that this host lacks.
func CheckHost(binDir string) error {
	var missing []string
	for _, b := range Binaries {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			missing = append(missing, filepath.Join(binDir, b)+" (make tools)")
		}
	}
	for cmd, pkg := range hostCommands {
		if _, err := exec.LookPath(cmd); err != nil {
			missing = append(missing, cmd+" (Debian package "+pkg+")")
		}
	}
	for _, archive := range images.Archives {
		if _, err := os.Stat(filepath.Join(binDir, "images", archive)); err != nil {
			missing = append(missing, filepath.Join(binDir, "images", archive)+" (make tools)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("testbed: real nodes need: %s: %w (`testbed up --real-nodes=false` starts the clusters without them)",
			strings.Join(missing, ", "), host.ErrNoBinaries)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("testbed: real nodes need root (network namespaces, cgroups, mounts): %w (`testbed up --real-nodes=false` starts the clusters without them)", host.ErrNoBinaries)
	}
	return nil
}

// Start starts the node's components in its network namespace and
// returns once the Node is Ready. On error it names the component and its
// log; the caller tears everything down (the testbed's teardown finds all
// of it by the state folder).
func (n *Node) Start(ctx context.Context, spec Spec) error {
	n.Zone = spec.Zone
	for _, d := range []string{n.LogDir(), filepath.Join(n.Dir, "containerd"), filepath.Join(n.Dir, "cni", "net.d")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if len(n.socket()) > 100 {
		return fmt.Errorf("real node: containerd's socket path %s is longer than a unix socket allows; use a shorter state folder", n.socket())
	}
	if err := createCgroups(n.Cgroup); err != nil {
		return fmt.Errorf("real node: cgroups: %w", err)
	}
	if err := n.writeConfigs(spec); err != nil {
		return err
	}
	anchor, err := n.startAnchor(ctx)
	if err != nil {
		return err
	}
	containerd, err := n.startComponent(anchor, "containerd", "containerd", "--config", filepath.Join(n.Dir, "containerd.toml"))
	if err != nil {
		return err
	}
	if err := n.waitContainerd(ctx, containerd); err != nil {
		return err
	}
	if err := n.importImages(ctx, spec.BinDir); err != nil {
		return err
	}
	if err := n.register(ctx, spec); err != nil {
		return err
	}
	kubelet, err := n.startComponent(anchor, "kubelet", filepath.Join(spec.BinDir, "kubelet"),
		"--config", filepath.Join(n.Dir, "kubelet.yaml"),
		"--kubeconfig", filepath.Join(n.Dir, "kubeconfig"),
		"--hostname-override", n.Name,
		"--node-ip", host.JoinIPFamilies(n.IP, n.IPv6),
		"--root-dir", filepath.Join(n.Dir, "kubelet"),
		"--cert-dir", filepath.Join(n.Dir, "kubelet", "pki"),
		// The same labels as register's, which the kubelet would
		// otherwise set back to its own view of them.
		"--node-labels", strings.Join([]string{
			Label + "=true",
			corev1.LabelTopologyZone + "=" + spec.Zone,
			corev1.LabelTopologyRegion + "=" + spec.Region,
		}, ","),
		"-v", "1")
	if err != nil {
		return err
	}
	proxy, err := n.startComponent(anchor, "kube-proxy", filepath.Join(spec.BinDir, "kube-proxy"),
		"--kubeconfig", filepath.Join(n.Dir, "kubeconfig"),
		"--hostname-override", n.Name,
		"--proxy-mode", "iptables",
		"--cluster-cidr", spec.ClusterCIDRs,
		// 0 leaves the conntrack sysctls alone: nf_conntrack_max is one
		// for the whole machine, not the node's.
		"--conntrack-max-per-core", "0",
		"--conntrack-tcp-timeout-established", "0",
		"--conntrack-tcp-timeout-close-wait", "0",
		"--metrics-bind-address", "127.0.0.1:10249",
		"--healthz-bind-address", "127.0.0.1:10256",
		"-v", "1")
	if err != nil {
		return err
	}
	return n.waitReady(ctx, spec.Client, map[string]int{"containerd": containerd, "kubelet": kubelet, "kube-proxy": proxy})
}

// startAnchor starts the process that holds the node's namespaces: it
// enters the node's network namespace and a mount namespace of its own
// (slave of the host's, so nothing mounted inside shows on the host), puts
// fresh tmpfs over /run, /var/lib and /var/log, whose fixed paths
// containerd's shims and runc, the CNI plugins and the kubelet use, and
// sleeps. Every component joins its namespaces, so they share their mounts
// (the kubelet's volumes are containerd's too) and all of it vanishes when
// the node's processes end.
func (n *Node) startAnchor(ctx context.Context) (int, error) {
	ready := filepath.Join(n.Dir, "anchor.ready")
	script := `set -e
echo $$ > "$1/cgroup.procs"
for d in /run /var/lib /var/log; do mount -t tmpfs -o mode=755 mcs-node "$d"; done
mkdir -p /run/netns /var/log/containers
touch "$2"
exec sleep infinity`
	cmd := exec.Command("unshare", "--mount", "--propagation", "slave", "--",
		"nsenter", "--net=/run/netns/"+n.Netns, "--",
		"/bin/sh", "-c", script, "anchor", nodeCgroupDir("pids", n.Cgroup+"/node"), ready)
	pid, err := n.start(cmd, "anchor")
	if err != nil {
		return 0, err
	}
	err = host.PollUntil(ctx, 30*time.Second, func(context.Context) (bool, error) {
		if !host.ProcessAlive(pid) {
			return false, fmt.Errorf("exited")
		}
		_, err := os.Stat(ready)
		return err == nil, nil
	})
	if err != nil {
		return 0, fmt.Errorf("real node: namespaces did not come up (%w); see %s", err, filepath.Join(n.LogDir(), "anchor.log"))
	}
	return pid, nil
}

// startComponent runs a node component inside the anchor's namespaces and
// the node's cgroup, in a session of its own so it outlives `testbed up`.
func (n *Node) startComponent(anchor int, name, binary string, args ...string) (int, error) {
	wrapper := `echo $$ > "$1/cgroup.procs" && shift && exec "$@"`
	full := append([]string{"--target", strconv.Itoa(anchor), "--mount", "--net", "--",
		"/bin/sh", "-c", wrapper, name, nodeCgroupDir("pids", n.Cgroup+"/node"), binary}, args...)
	return n.start(exec.Command("nsenter", full...), name)
}

func (n *Node) start(cmd *exec.Cmd, name string) (int, error) {
	logFile, err := os.Create(filepath.Join(n.LogDir(), name+".log"))
	if err != nil {
		return 0, err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("real node: start %s: %w", name, err)
	}
	go func() { _ = cmd.Wait() }()
	return cmd.Process.Pid, nil
}

func (n *Node) ctr(ctx context.Context, args ...string) ([]byte, error) {
	return exec.CommandContext(ctx, "ctr", append([]string{"--address", n.socket(), "--namespace", "k8s.io"}, args...)...).CombinedOutput()
}

func (n *Node) waitContainerd(ctx context.Context, pid int) error {
	err := host.PollUntil(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		if !host.ProcessAlive(pid) {
			return false, errors.New("exited")
		}
		_, err := n.ctr(ctx, "version")
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("real node: containerd did not start (%w); see %s", err, filepath.Join(n.LogDir(), "containerd.log"))
	}
	return nil
}

// importImages loads the testbed's images, the sandbox image among them,
// into the node's containerd: no registry is reachable to pull from.
func (n *Node) importImages(ctx context.Context, binDir string) error {
	for _, archive := range images.Archives {
		if err := n.ImportImage(ctx, filepath.Join(binDir, "images", archive)); err != nil {
			return err
		}
	}
	return nil
}

// register creates the Node before its kubelet starts, as kind's
// kube-controller-manager would complete it: with its pod CIDR (the range
// its CNI config hands out, which kube-proxy and users read from the
// Node), its zone and the taint. The kubelet then finds it and reports its
// status.
func (n *Node) register(ctx context.Context, spec Spec) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{
			corev1.LabelHostname:       n.Name,
			corev1.LabelOSStable:       "linux",
			corev1.LabelArchStable:     runtime.GOARCH,
			corev1.LabelTopologyZone:   spec.Zone,
			corev1.LabelTopologyRegion: spec.Region,
			Label:                      "true",
		}},
		Spec: corev1.NodeSpec{PodCIDR: n.PodCIDR, PodCIDRs: host.IPFamilies(n.PodCIDR, n.PodCIDRv6), Taints: []corev1.Taint{Taint}},
	}
	if _, err := spec.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("real node: register %s: %w", n.Name, err)
	}
	return nil
}

// waitReady waits until the Node reports Ready, failing at once when a
// component exits.
func (n *Node) waitReady(ctx context.Context, cs kubernetes.Interface, pids map[string]int) error {
	return host.PollUntil(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		for name, pid := range pids {
			if !host.ProcessAlive(pid) {
				return false, fmt.Errorf("real node %s: %s exited; see %s", n.Name, name, filepath.Join(n.LogDir(), name+".log"))
			}
		}
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// createCgroups makes path in every cgroup hierarchy of the host, with the
// node's own "node" child for its daemons. A new cpuset cgroup starts with
// no CPUs and no memory nodes; it gets its parent's.
func createCgroups(path string) error {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hierarchies {
		parent := filepath.Join("/sys/fs/cgroup", h)
		for _, part := range strings.Split(strings.Trim(path+"/node", "/"), "/") {
			dir := filepath.Join(parent, part)
			if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
				return err
			}
			if h == "cpuset" {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					v, err := os.ReadFile(filepath.Join(parent, f))
					if err != nil {
						return err
					}
					if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
						return err
					}
				}
			}
			parent = dir
		}
	}
	return nil
}

// cgroupHierarchies lists the folders under /sys/fs/cgroup that are cgroup
// mounts (v1 controllers, name=systemd, the unified hierarchy).
func cgroupHierarchies() ([]string, error) {
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(mounts), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && (f[2] == "cgroup" || f[2] == "cgroup2") && strings.HasPrefix(f[1], "/sys/fs/cgroup/") {
			out = append(out, strings.TrimPrefix(f[1], "/sys/fs/cgroup/"))
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no cgroup hierarchy is mounted under /sys/fs/cgroup")
	}
	return out, nil
}

func nodeCgroupDir(hierarchy, path string) string {
	return filepath.Join("/sys/fs/cgroup", hierarchy, path)
}

// ResidentBytes returns the resident memory of every process of the node:
// its daemons, shims and pods.
func (n *Node) ResidentBytes() (int64, error) {
	var total int64
	err := filepath.WalkDir(nodeCgroupDir("pids", n.Cgroup), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.Name() != "cgroup.procs" {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, f := range strings.Fields(string(raw)) {
			pid, _ := strconv.Atoi(f)
			n, err := host.ResidentBytes(pid)
			if err != nil {
				return err
			}
			total += n
		}
		return nil
	})
	return total, err
}

// writeConfigs writes the node's kubeconfig, containerd, CNI and kubelet
// configuration and resolv.conf.
func (n *Node) writeConfigs(spec Spec) error {
	kubeconfig, err := clientcmd.LoadFromFile(spec.KubeconfigPath)
	if err != nil {
		return err
	}
	// The node reaches its API server on the host's bridge address; the
	// server's certificate names localhost, so TLS checks that name.
	for _, cluster := range kubeconfig.Clusters {
		u := cluster.Server[strings.LastIndex(cluster.Server, ":"):]
		cluster.Server = "https://" + n.HostIP + u
		cluster.TLSServerName = "localhost"
	}
	if err := clientcmd.WriteToFile(*kubeconfig, filepath.Join(n.Dir, "kubeconfig")); err != nil {
		return err
	}
	files := map[string]string{
		"containerd.toml":                  fmt.Sprintf(containerdConfig, filepath.Join(n.Dir, "containerd"), images.Pause, filepath.Join(n.Dir, "cni", "net.d")),
		"cni/net.d/10-mcs-bridge.conflist": n.cniConfig(),
		"kubelet.yaml": fmt.Sprintf(kubeletConfig, n.Cgroup, n.socket(), n.IP, spec.DNSServiceIP,
			filepath.Join(n.Dir, "resolv.conf"), filepath.Join(n.Dir, "pod-logs"), Taint.Key),
		// Pods ask only the cluster's DNS; the host's search list and
		// servers stay out of them.
		"resolv.conf": "nameserver " + spec.DNSServiceIP + "\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(n.Dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// cniConfig is the node's CNI network: the bridge plugin on cni0 (the
// pods' gateway, no masquerade: pod IPs are routed between clusters) with
// host-local addresses from the node's pod CIDR(s), and portmap.
func (n *Node) cniConfig() string {
	ranges := [][]map[string]string{{{"subnet": n.PodCIDR}}}
	routes := []map[string]string{{"dst": "0.0.0.0/0"}}
	if n.PodCIDRv6 != "" {
		ranges = append(ranges, []map[string]string{{"subnet": n.PodCIDRv6}})
		routes = append(routes, map[string]string{"dst": "::/0"})
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "mcs-testbed",
		"plugins": []map[string]any{
			{
				"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type": "host-local", "ranges": ranges, "routes": routes,
					"dataDir": filepath.Join(n.Dir, "cni", "ipam"),
				},
			},
			{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	raw, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		panic(err) // maps of strings always marshal
	}
	return string(raw)
}

const containerdConfig = `# A testbed node's containerd: its own root, state and socket; the
# native snapshotter (plain copies, no overlay mounts to clean up).
version = 2
root = "%[1]s/root"
state = "%[1]s/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "%[1]s/containerd.sock"

[plugins."io.containerd.internal.v1.opt"]
  path = "%[1]s/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%[2]s"
  # Root in this VM lacks CAP_SYS_RESOURCE: runc may only raise a
  # process's oom_score_adj, never lower it.
  restrict_oom_score_adj = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "%[3]s"
`

const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine has cgroup v1; kubelet v1.35+ refuses it unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %[1]s
containerRuntimeEndpoint: unix://%[2]s
address: %[3]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization:
  mode: AlwaysAllow
clusterDomain: cluster.local
clusterDNS: [%[4]s]
resolvConf: %[5]s
podLogsDir: %[6]s
failSwapOn: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: "1%%"
  imagefs.available: "1%%"
  nodefs.inodesFree: "1%%"
registerWithTaints:
- {key: %[7]s, effect: NoSchedule}
`
