// Command testbed brings a local clusterset of real control planes up or
// down (see package github.com/mcs-syncer/mcs-syncer/test/testbed).
//
//	testbed up [--clusters east,west,north] [--state DIR] [--bin DIR]
//	testbed down [--state DIR] [--bin DIR]
//
// up returns once every cluster is ready, leaving the clusters running, and
// prints their kubeconfigs and DNS addresses; down stops them all.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/mcs-syncer/mcs-syncer/test/testbed"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || (args[0] != "up" && args[0] != "down") {
		return fmt.Errorf("usage: testbed up|down [flags]; testbed up -h lists the flags")
	}
	verb := args[0]
	fs := flag.NewFlagSet("testbed "+verb, flag.ContinueOnError)
	state := fs.String("state", "", "state folder (default <repo>/.cache/testbed)")
	bin := fs.String("bin", "", "folder of the binaries (default $MCS_TOOLS_DIR, else <repo>/.cache/bin)")
	clusters := fs.String("clusters", strings.Join(testbed.DefaultClusters, ","), "comma-separated cluster names (up only)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("testbed %s: unexpected argument %q", verb, fs.Arg(0))
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := testbed.Options{StateDir: *state, BinDir: *bin, Log: os.Stderr}

	if verb == "down" {
		stateDir, binDir, err := opts.Paths()
		if err != nil {
			return err
		}
		return testbed.Down(ctx, stateDir, binDir)
	}

	opts.Clusters = strings.Split(*clusters, ",")
	cs, err := testbed.Start(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Printf("clusterset config: %s\n", cs.ConfigPath)
	for _, c := range cs.Clusters {
		fmt.Printf("%-8s KUBECONFIG=%s  pods %s  services %s  DNS %s\n",
			c.Name, c.KubeconfigPath, c.PodCIDR, c.ServiceCIDR, c.DNSAddr)
	}
	fmt.Printf("stop it with: go run ./test/testbed/cmd/testbed down --state %s\n", cs.StateDir)
	return nil
}
