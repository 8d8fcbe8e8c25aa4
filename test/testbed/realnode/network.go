package realnode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// The real nodes' network. Every node lives in a network namespace of its
// own, joined by a veth to one bridge in the host's namespace, like kind's
// nodes on their Docker network:
//
//	host:   bridge mcs<id>, 10.250.0.1/24 (the API servers and CoreDNS are
//	        reached there); a route to each node's pod CIDR via the node
//	node i: eth0 10.250.0.(10+i)/24, default route via the host, a route to
//	        every other node's pod CIDR via that node; pods on cni0 in
//	        10.(100+i).254.0/24
//
// Packets between clusters cross the bridge from node to node; the host
// only answers (DNS, API) and never forwards, so its sysctls stay as they
// are. Every name carries <id>, a hash of the state folder, so that the
// teardown finds what a crashed testbed left from the folder alone.
const (
	nodeSubnet     = "10.250.0.0/24"
	nodeSubnetBits = "/24"
	// HostIP is the host's address on the nodes' bridge: the nodes reach
	// the API servers and CoreDNS there.
	HostIP = "10.250.0.1"
	// With dual-stack nodes, the same for IPv6.
	hostNodeIPv6     = "fd00:250::1"
	nodeSubnetBitsV6 = "/64"
)

// netID is the short hash of the state folder that names the bridge, the
// network namespaces and the cgroups of a testbed's real nodes. The same
// hash is computed by teardown.sh.
func netID(stateDir string) string {
	sum := sha256.Sum256([]byte(stateDir))
	return hex.EncodeToString(sum[:])[:6]
}

func bridgeName(stateDir string) string { return "mcs" + netID(stateDir) }

func hostVeth(stateDir string, index int) string {
	return fmt.Sprintf("mcs%sv%d", netID(stateDir), index)
}

// nodeIP is the address of cluster index's real node on the bridge.
func nodeIP(index int) string { return fmt.Sprintf("10.250.0.%d", 10+index) }

// nodeIPv6 and nodePodCIDRv6 are the same for IPv6 (dual-stack).
func nodeIPv6(index int) string      { return fmt.Sprintf("fd00:250::%x", 0x10+index) }
func nodePodCIDRv6(index int) string { return fmt.Sprintf("fd00:100:%x:fe::/64", index) }

// nodePodCIDR is the pod CIDR of cluster index's real node: the last /24
// of the cluster's pod CIDR, which no fake node uses.
func nodePodCIDR(index int) string { return fmt.Sprintf("10.%d.254.0/24", 100+index) }

// CreateNetwork makes the bridge of the testbed whose state folder is
// stateDir and, for each node, a network namespace with its veth,
// addresses and routes. Nothing of the host's own network is changed but
// the bridge it adds (and the routes on it, which go with it).
func CreateNetwork(ctx context.Context, stateDir string, nodes []*Node) error {
	bridge := bridgeName(stateDir)
	dualStack := len(nodes) > 0 && nodes[0].IPv6 != ""
	if out, _ := exec.CommandContext(ctx, "ip", "-o", "route", "show", nodeSubnet).Output(); len(strings.TrimSpace(string(out))) > 0 {
		return fmt.Errorf("testbed: the real nodes' network %s is in use on this host (%s): another testbed with real nodes runs? Stop it with `testbed down --state <its folder>`",
			nodeSubnet, strings.TrimSpace(string(out)))
	}
	steps := [][]string{
		{"ip", "link", "add", bridge, "type", "bridge"},
		{"ip", "addr", "add", HostIP + nodeSubnetBits, "dev", bridge},
	}
	if dualStack {
		// No duplicate address detection: the addresses are ours alone, and
		// DAD would keep them unusable for a second or two.
		steps = append(steps, []string{"ip", "addr", "add", hostNodeIPv6 + nodeSubnetBitsV6, "dev", bridge, "nodad"})
	}
	steps = append(steps, []string{"ip", "link", "set", bridge, "up"})
	for _, n := range nodes {
		veth := hostVeth(stateDir, n.index)
		steps = append(steps,
			[]string{"ip", "netns", "add", n.Netns},
			[]string{"ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", n.Netns},
			[]string{"ip", "link", "set", veth, "master", bridge, "up"},
			[]string{"ip", "-n", n.Netns, "link", "set", "lo", "up"},
			[]string{"ip", "-n", n.Netns, "addr", "add", n.IP + nodeSubnetBits, "dev", "eth0"},
			[]string{"ip", "-n", n.Netns, "link", "set", "eth0", "up"},
			[]string{"ip", "-n", n.Netns, "route", "add", "default", "via", HostIP},
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
			steps = append(steps, ipv6Steps(bridge, n, nodes)...)
		}
	}

	for _, step := range steps {
		if out, err := exec.CommandContext(ctx, step[0], step[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("testbed: real nodes' network: %s: %w: %s", strings.Join(step, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// ipv6Steps give node n its IPv6 address, default route and routes to the
// other nodes' IPv6 pod CIDRs, and the host a route to its pods, as
// CreateNetwork does for IPv4.
func ipv6Steps(bridge string, n *Node, nodes []*Node) [][]string {
	steps := [][]string{
		{"ip", "-n", n.Netns, "addr", "add", n.IPv6 + nodeSubnetBitsV6, "dev", "eth0", "nodad"},
		{"ip", "-n", n.Netns, "-6", "route", "add", "default", "via", hostNodeIPv6},
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
