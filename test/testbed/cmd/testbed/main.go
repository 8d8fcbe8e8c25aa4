// Command testbed brings a local clusterset of real control planes up or
// down (see package github.com/mcs-syncer/mcs-syncer/test/testbed).
//
//	testbed up [--clusters east,west,north] [--state DIR] [--bin DIR]
//	testbed status [--state DIR] [--bin DIR]
//	testbed lookup [--state DIR] --cluster NAME DNS-NAME
//	testbed down [--state DIR] [--bin DIR]
//
// up returns once every cluster is ready, leaving the clusters running, and
// prints their kubeconfigs and DNS addresses; status prints each cluster's
// processes with their resident memory; lookup asks a cluster's CoreDNS for
// the A records of a name; down stops them all.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/coredns"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || (args[0] != "up" && args[0] != "down" && args[0] != "status" && args[0] != "lookup") {
		return fmt.Errorf("usage: testbed up|status|lookup|down [flags]; testbed up -h lists the flags")
	}
	verb := args[0]
	fs := flag.NewFlagSet("testbed "+verb, flag.ContinueOnError)
	state := fs.String("state", "", "state folder (default <repo>/.cache/testbed)")
	bin := fs.String("bin", "", "folder of the binaries (default $MCS_TOOLS_DIR, else <repo>/.cache/bin)")
	clusters := fs.String("clusters", strings.Join(testbed.DefaultClusters, ","), "comma-separated cluster names (up only)")
	cluster := fs.String("cluster", "", "the cluster whose CoreDNS answers (lookup only)")
	dualStack := fs.Bool("dual-stack", false, "IPv6 pod and service CIDRs besides the IPv4 ones (up only)")
	hub := fs.Bool("hub", false, "start a hub for hub mode too (an API server without nodes, config/hub applied) and write each member's hub-mode clusterset config (up only)")
	realNodes := fs.Bool("real-nodes", true, "give each cluster a real node (kubelet, containerd, kube-proxy) besides the fake ones (up only; needs root)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	wantArgs := 0
	if verb == "lookup" {
		wantArgs = 1
	}
	if fs.NArg() != wantArgs {
		return fmt.Errorf("testbed %s: %d arguments, want %d", verb, fs.NArg(), wantArgs)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := testbed.Options{StateDir: *state, BinDir: *bin, Log: os.Stderr}

	switch verb {
	case "down":
		stateDir, binDir, err := opts.Paths()
		if err != nil {
			return err
		}
		return testbed.Down(ctx, stateDir, binDir)
	case "lookup":
		cs, err := attach(ctx, opts)
		if err != nil {
			return err
		}
		c := cs.Cluster(*cluster)
		if c == nil {
			return fmt.Errorf("testbed lookup: --cluster %q is not a cluster of the testbed", *cluster)
		}
		ips, err := coredns.Lookup(ctx, c.DNSAddr, fs.Arg(0))
		if err != nil {
			return err
		}
		fmt.Println(strings.Join(ips, " "))
		return nil
	case "status":
		cs, err := attach(ctx, opts)
		if err != nil {
			return err
		}
		return printStatus(cs)
	}

	opts.Clusters = strings.Split(*clusters, ",")
	opts.RealNodes = *realNodes
	opts.DualStack = *dualStack
	opts.Hub = *hub
	cs, err := testbed.Start(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Printf("clusterset config: %s\n", cs.ConfigPath)
	fmt.Printf("every cluster in one kubeconfig, a context each (east, ...; hub): KUBECONFIG=%s\n", cs.KubeconfigPath())
	for _, c := range cs.Clusters {
		fmt.Printf("%-8s KUBECONFIG=%s  pods %s  services %s  DNS %s\n",
			c.Name, c.KubeconfigPath, host.JoinIPFamilies(c.PodCIDR, c.PodCIDRv6), host.JoinIPFamilies(c.ServiceCIDR, c.ServiceCIDRv6), c.DNSAddr)
		if n := c.RealNode; n != nil {
			fmt.Printf("         real node %s  IP %s  pods %s  netns %s  logs %s\n",
				n.Name, host.JoinIPFamilies(n.IP, n.IPv6), host.JoinIPFamilies(n.PodCIDR, n.PodCIDRv6), n.Netns, n.LogDir())
		}
	}
	if cs.Hub != nil {
		fmt.Printf("%-8s KUBECONFIG=%s  (admin; each member's identity there is in its hub-mode config)\n", cs.Hub.Name, cs.Hub.KubeconfigPath)
		for _, c := range cs.Clusters {
			fmt.Printf("hub-mode clusterset config of %s: %s\n", c.Name, cs.HubConfigPath(c.Name))
		}
	}
	fmt.Printf("stop it with: go run ./test/testbed/cmd/testbed down --state %s\n", cs.StateDir)
	return nil
}

// attach finds the testbed that `up` left in the options' state folder.
func attach(ctx context.Context, opts testbed.Options) (*testbed.Clusterset, error) {
	stateDir, binDir, err := opts.Paths()
	if err != nil {
		return nil, err
	}
	return testbed.Attach(ctx, stateDir, binDir)
}

func printStatus(cs *testbed.Clusterset) error {
	for _, c := range cs.Clusters {
		pids, err := c.Pids()
		if err != nil {
			return err
		}
		rss, err := c.ResidentBytes()
		if err != nil {
			return err
		}
		names := make([]string, 0, len(pids))
		for name := range pids {
			names = append(names, name)
		}
		sort.Strings(names)
		var total int64
		fmt.Printf("%s (KUBECONFIG=%s, DNS %s)\n", c.Name, c.KubeconfigPath, c.DNSAddr)
		for _, name := range names {
			fmt.Printf("  %-24s pid %-8d %6.0f MiB\n", name, pids[name], float64(rss[name])/(1<<20))
			total += rss[name]
		}
		fmt.Printf("  %-24s %-12s %6.0f MiB\n", "total", "", float64(total)/(1<<20))
		if n := c.RealNode; n != nil {
			node, err := n.ResidentBytes()
			if err != nil {
				return err
			}
			fmt.Printf("  real node %s (%s, netns %s): %.0f MiB (containerd, kubelet, kube-proxy, shims, pods); logs in %s\n",
				n.Name, n.IP, n.Netns, float64(node)/(1<<20), n.LogDir())
		}
	}
	return nil
}
