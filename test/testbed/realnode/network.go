package realnode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// The real nodes' network. Every node lives in a network namespace of its
// own, joined by a veth to one bridge in the host's namespace, like kind's
// nodes on their Docker network. A testbed takes one of Slots networks,
// k, the first free one (ReserveNetwork), so that testbeds with real nodes
// can run side by side (make test beside make e2e):
//
//	host:   bridge mcs<id>, 10.250.k.1/24 (the API servers and CoreDNS are
//	        reached there); a route to each node's pod CIDR via the node
//	node i: eth0 10.250.k.(10+i)/24, default route via the host, a route to
//	        every other node's pod CIDR via that node; pods on cni0 in
//	        10.(100+i).(254-k).0/24
//
// Packets between clusters cross the bridge from node to node; the host
// only answers (DNS, API) and never forwards, so its sysctls stay as they
// are. Every name carries <id>, a hash of the state folder, so that the
// teardown finds what a crashed testbed left from the folder alone.
const (
	// Slots is how many testbeds with real nodes can run at once: the
	// nodes' pod CIDRs take the last /24s of each cluster's pod CIDR,
	// above the fake nodes' (at most 250).
	Slots          = 4
	nodeSubnetBits = "/24"
	// With dual-stack nodes, the same for IPv6.
	nodeSubnetBitsV6 = "/64"
	// reserveLock serializes the choice of a slot between testbeds.
	reserveLock = "/run/lock/mcs-testbed-real-nodes.lock"
)

// Network is the address plan of one testbed's real nodes: slot Slot of
// Slots.
type Network struct {
	Slot int
}

// HostIP is the host's address on the nodes' bridge: the nodes reach the
// API servers and CoreDNS there.
func (n Network) HostIP() string { return fmt.Sprintf("10.250.%d.1", n.Slot) }

func (n Network) subnet() string      { return fmt.Sprintf("10.250.%d.0/24", n.Slot) }
func (n Network) hostIPv6() string    { return fmt.Sprintf("fd00:250:0:%x::1", n.Slot) }
func (n Network) nodeIP(i int) string { return fmt.Sprintf("10.250.%d.%d", n.Slot, 10+i) }

// nodePodCIDR is the pod CIDR of cluster i's real node: one of the last
// /24s of the cluster's pod CIDR, which no fake node uses.
func (n Network) nodePodCIDR(i int) string { return fmt.Sprintf("10.%d.%d.0/24", 100+i, 254-n.Slot) }

// nodeIPv6 and nodePodCIDRv6 are the same for IPv6 (dual-stack).
func (n Network) nodeIPv6(i int) string { return fmt.Sprintf("fd00:250:0:%x::%x", n.Slot, 0x10+i) }
func (n Network) nodePodCIDRv6(i int) string {
	return fmt.Sprintf("fd00:100:%x:%x::/64", i, 0xfe-n.Slot)
}

// NetID is the short hash of the state folder that names the bridge, the
// network namespaces and the cgroups of a testbed's real nodes ("mcs" and
// the hash). The same hash is computed by teardown.sh.
func NetID(stateDir string) string {
	sum := sha256.Sum256([]byte(stateDir))
	return hex.EncodeToString(sum[:])[:6]
}

func bridgeName(stateDir string) string { return "mcs" + NetID(stateDir) }

func hostVeth(stateDir string, index int) string {
	return fmt.Sprintf("%sv%d", bridgeName(stateDir), index)
}

// ReserveNetwork takes the first of the Slots networks that no other
// testbed uses (no route to its subnet on the host) for the testbed whose
// state folder is stateDir: it makes the testbed's bridge with the host's
// address on it, which routes the subnet, so that the next testbed sees it
// taken. A lock on the host keeps two testbeds from choosing at once. The
// teardown removes the bridge, and with it the reservation.
func ReserveNetwork(ctx context.Context, stateDir string, dualStack bool) (Network, error) {
	if err := os.MkdirAll(filepath.Dir(reserveLock), 0o755); err != nil {
		return Network{}, fmt.Errorf("testbed: real nodes' network: %w", err)
	}
	lock, err := os.OpenFile(reserveLock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return Network{}, fmt.Errorf("testbed: real nodes' network: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return Network{}, fmt.Errorf("testbed: real nodes' network: lock %s: %w", reserveLock, err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	var used []string
	for slot := range Slots {
		n := Network{Slot: slot}
		if out, _ := exec.CommandContext(ctx, "ip", "-o", "route", "show", n.subnet()).Output(); len(strings.TrimSpace(string(out))) > 0 {
			used = append(used, strings.TrimSpace(string(out)))
			continue
		}
		bridge := bridgeName(stateDir)
		steps := [][]string{
			{"ip", "link", "add", bridge, "type", "bridge"},
			{"ip", "addr", "add", n.HostIP() + nodeSubnetBits, "dev", bridge},
		}
		if dualStack {
			// No duplicate address detection: the addresses are ours
			// alone, and DAD would keep them unusable for a second or two.
			steps = append(steps, []string{"ip", "addr", "add", n.hostIPv6() + nodeSubnetBitsV6, "dev", bridge, "nodad"})
		}
		steps = append(steps, []string{"ip", "link", "set", bridge, "up"})
		return n, run(ctx, steps)
	}
	return Network{}, fmt.Errorf("testbed: the real nodes' %d networks (10.250.0-%d.0/24) are all in use on this host (%s): %d testbeds with real nodes run? Stop one with `testbed down --state <its folder>`",
		Slots, Slots-1, strings.Join(used, "; "), Slots)
}

// run runs the ip commands of steps in order, stopping at the first that
// fails.
func run(ctx context.Context, steps [][]string) error {
	for _, step := range steps {
		if out, err := exec.CommandContext(ctx, step[0], step[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("testbed: real nodes' network: %s: %w: %s", strings.Join(step, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// CreateNetwork gives each node, on the bridge ReserveNetwork made for
// the testbed whose state folder is stateDir, a network namespace with its
// veth, addresses and routes. Nothing of the host's own network is changed
// but the bridge (and the routes on it, which go with it).
func CreateNetwork(ctx context.Context, stateDir string, network Network, nodes []*Node) error {
	bridge := bridgeName(stateDir)
	var steps [][]string
	for _, n := range nodes {
		veth := hostVeth(stateDir, n.index)
		steps = append(steps,
			[]string{"ip", "netns", "add", n.Netns},
			[]string{"ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", n.Netns},
			[]string{"ip", "link", "set", veth, "master", bridge, "up"},
			[]string{"ip", "-n", n.Netns, "link", "set", "lo", "up"},
			[]string{"ip", "-n", n.Netns, "addr", "add", n.IP + nodeSubnetBits, "dev", "eth0"},
			[]string{"ip", "-n", n.Netns, "link", "set", "eth0", "up"},
			[]string{"ip", "-n", n.Netns, "route", "add", "default", "via", network.HostIP()},
			[]string{"ip", "route", "add", n.PodCIDR, "via", n.IP, "dev", bridge},
			// The node routes its pods' packets; the bridge plugin's
			// bridge must pass them through iptables, or a reply from a
			// pod to a pod on the same node skips kube-proxy's un-DNAT.
			// Both settings belong to the node's namespace alone.
			[]string{"ip", "netns", "exec", n.Netns, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"},
		)
		if _, err := os.Stat("/proc/sys/net/bridge/bridge-nf-call-iptables"); err == nil {
			steps = append(steps, []string{"ip", "netns", "exec", n.Netns, "sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=1"})
		}
		for _, other := range nodes {
			if other != n {
				steps = append(steps, []string{"ip", "-n", n.Netns, "route", "add", other.PodCIDR, "via", other.IP})
			}
		}
		if n.IPv6 != "" {
			steps = append(steps, ipv6Steps(bridge, network, n, nodes)...)
		}
	}
	return run(ctx, steps)
}

// ipv6Steps give node n its IPv6 address, default route and routes to the
// other nodes' IPv6 pod CIDRs, and the host a route to its pods, as
// CreateNetwork does for IPv4.
func ipv6Steps(bridge string, network Network, n *Node, nodes []*Node) [][]string {
	steps := [][]string{
		{"ip", "-n", n.Netns, "addr", "add", n.IPv6 + nodeSubnetBitsV6, "dev", "eth0", "nodad"},
		{"ip", "-n", n.Netns, "-6", "route", "add", "default", "via", network.hostIPv6()},
		{"ip", "-6", "route", "add", n.PodCIDRv6, "via", n.IPv6, "dev", bridge},
		{"ip", "netns", "exec", n.Netns, "sysctl", "-q", "-w", "net.ipv6.conf.all.forwarding=1"},
	}
	if _, err := os.Stat("/proc/sys/net/bridge/bridge-nf-call-ip6tables"); err == nil {
		steps = append(steps, []string{"ip", "netns", "exec", n.Netns, "sysctl", "-q", "-w", "net.bridge.bridge-nf-call-ip6tables=1"})
	}
	for _, other := range nodes {
		if other != n {
			steps = append(steps, []string{"ip", "-n", n.Netns, "-6", "route", "add", other.PodCIDRv6, "via", other.IPv6})
		}
	}
	return steps
}
