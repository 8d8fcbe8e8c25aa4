// Command kubectl-mcs is a kubectl plugin for a clusterset of
// mcs-syncer, copied onto the PATH: `kubectl mcs status` reports every
// member, every exported Service and its import into each member, and
// exits non-zero when anything is not converged (internal/status);
// `diagnose` checks what the clusterset needs of its members
// (internal/diagnose); `gather` writes a support bundle; `verify` sends
// real traffic from a client Pod (internal/verify); `export` and
// `unexport` write and delete a ServiceExport.
//
// The clusterset is read as mcs-syncer's own config names it
// (--clusterset-config), or as the contexts of a kubeconfig, one per
// member, named after its cluster ID (--kubeconfig, --contexts).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/mcsapi"
	"github.com/mcs-syncer/mcs-syncer/internal/status"
)

// Exit codes: done (converged, every check passed, written); not done
// (not converged, a check failed, a write refused), naming why; the
// command could not run (bad input, no clusterset).
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

const usage = `kubectl mcs: the clusterset of mcs-syncer, seen from its members.

Usage:
  kubectl mcs status [namespace/name] [flags]
  kubectl mcs diagnose [flags]
  kubectl mcs gather [-f bundle.tar.gz] [flags]
  kubectl mcs verify [namespace/name] [--from member,...] [--image image] [flags]
  kubectl mcs export <service> [-n namespace] [--exported-labels k=v,...] [--exported-annotations k=v,...]
  kubectl mcs unexport <service> [-n namespace]

status lists each member with its health as mcs-syncer sees it (up,
held, silent, down, since when; its last heartbeat; the version of its
mcs-syncer: read from /members of the mcs-syncer Pods in the members, or
of --syncer), each exported Service with the clusters that
export it, its conflicts, and per member its ServiceImport (clusterset IP,
Ready) and the endpoints imported from each source against those the
source holds now. It exits 0 when every import is converged, 1 when not
(naming what), 2 when it cannot run. -o wide adds each member's state and
what each mcs-syncer sees of it, and each import's type and clusters.

diagnose checks what the clusterset needs of its members: the MCS CRDs
served in a version mcs-syncer speaks, every version the CRDs store still
served, members' credentials not expiring within 7 days, CoreDNS
answering clusterset.local, pod and service CIDRs that do not overlap,
mcs-syncer ready at one version, clocks that agree; in hub mode (a config
with a hub, or --hub-kubeconfig), the hub's admission policy and what each
member's hub identity may do. Each check passes, fails (saying what to
do), warns (saying what to do, without failing) or is skipped (saying
why); it exits 1 when one fails.

gather writes a support bundle: each member's ServiceExports,
ServiceImports, imported EndpointSlices and their events, and each
mcs-syncer Pod's log, /metrics and /readyz?verbose (through the API
server's pods/proxy), with the status and diagnose reports.

The clusterset (status, diagnose, gather, verify): --clusterset-config (mcs-syncer's
config file), or the contexts of --kubeconfig (default $KUBECONFIG or
~/.kube/config), one per member, named after its cluster ID (--contexts:
which; default all). In hub mode, the members without connection settings
of their own are read through their publications in the hub of the config
(or of --hub-kubeconfig). --syncer names an mcs-syncer that runs outside
the members by its probe address; those that run as Pods are found.

verify sends real traffic: in each member (or those of --from) a
short-lived client Pod (mcs-syncer's image, its probe) resolves
<name>.<namespace>.svc.clusterset.local of each imported Service (or the
one named), connects to its clusterset IP on each TCP port, and to the
endpoints each source cluster contributed; it reports which clusters
answered against those that export the Service, exits 1 naming what
failed, and deletes its Pods, also when interrupted (they carry
app.kubernetes.io/name=mcs-verify). --overrides patches the Pods (node
selectors, tolerations).

export creates (or updates) the ServiceExport of a Service of the current
context's cluster (--kubeconfig, --context), as subctl export does;
unexport deletes it.
`

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// options are the flags of status, diagnose and gather.
type options struct {
	clustersetFlags
	output  string
	timeout time.Duration
	// syncers are the probe addresses of mcs-syncers that run outside the
	// members (--syncer).
	syncers []string
}

func (o *options) register(fs *flag.FlagSet) {
	o.clustersetFlags.register(fs)
	fs.Func("o", "output: text, wide, json or yaml (default text)", func(v string) error {
		if v != "text" && v != "wide" && v != "json" && v != "yaml" {
			return fmt.Errorf("want text, wide, json or yaml")
		}
		o.output = v
		return nil
	})
	fs.Func("syncer", "the probe address (host:port or URL) of an mcs-syncer that runs outside the members, whose view of them to read; repeatable (those that run as Pods in a member are found there)", func(v string) error {
		if v == "" {
			return errors.New("want host:port or a URL")
		}
		o.syncers = append(o.syncers, v)
		return nil
	})
	o.output = "text"
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long to wait for the members' API servers, in all")
}

// run runs the command line args (without the program's name) and
// returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) > 0 && (args[0] == "export" || args[0] == "unexport"):
		return runExport(ctx, args[0], args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "status":
		return runStatus(ctx, args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "diagnose":
		return runDiagnose(ctx, args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "gather":
		return runGather(ctx, args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "verify":
		return runVerify(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprint(stderr, usage)
	return exitUsage
}

// runStatus runs status with args.
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("status", stderr)
	var o options
	o.register(fs)
	positional, err := parse(fs, args)
	if err != nil {
		return exitUsage
	}
	// --timeout in all: from the first read (an inventory's profiles, the
	// versions the members serve) on.
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	only, err := onlyService(positional)
	var members []status.Member
	var hub *status.Hub
	if err == nil {
		var conns []memberConn
		var leftOut []string
		if conns, leftOut, err = o.members(ctx); err == nil {
			sayLeftOut(stderr, "status", leftOut)
			members, err = statusMembers(conns, o.timeout)
		}
	}
	if err == nil {
		var conn *hubConn
		if conn, err = o.hub(); err == nil {
			hub, err = conn.statusHub(o.timeout)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "kubectl mcs status:", err)
		return exitUsage
	}
	report := status.Gather(ctx, status.Input{Members: members, Syncers: o.statusSyncers(), Only: only, Hub: hub})
	if err := write(stdout, o.output, report, func() string { return report.Text(o.output == "wide") }); err != nil {
		fmt.Fprintln(stderr, "kubectl mcs status:", err)
		return exitUsage
	}
	if !report.Converged() {
		if o.output == "json" || o.output == "yaml" {
			fmt.Fprintf(stderr, "not converged: %s\n", strings.Join(report.Problems, "; "))
		}
		return exitFailed
	}
	return exitOK
}

// statusSyncers are the --syncer mcs-syncers.
func (o *options) statusSyncers() []status.Syncer {
	var syncers []status.Syncer
	for _, addr := range o.syncers {
		syncers = append(syncers, addrSyncer(addr))
	}
	return syncers
}

// onlyService reads the optional namespace/name argument.
func onlyService(args []string) (*types.NamespacedName, error) {
	switch len(args) {
	case 0:
		return nil, nil
	case 1:
		ns, name, ok := strings.Cut(args[0], "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, fmt.Errorf("%q: want namespace/name", args[0])
		}
		return &types.NamespacedName{Namespace: ns, Name: name}, nil
	default:
		return nil, fmt.Errorf("one namespace/name at most, not %d arguments", len(args))
	}
}

// write writes v as output says: text (what text returns), json or yaml.
func write(w io.Writer, output string, v any, text func() string) error {
	switch output {
	case "json":
		raw, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(raw))
		return err
	case "yaml":
		raw, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(raw)
		return err
	}
	_, err := io.WriteString(w, text())
	return err
}

// schemes hold a scheme per version of the MCS API a member may serve
// (internal/mcsapi); scheme is v1beta1's, for the hub. CustomResourceDefinitions
// are in them for diagnose (the CRDs' stored versions).
var (
	schemes = func() map[schema.GroupVersion]*runtime.Scheme {
		m, err := mcsapi.Schemes(clientgoscheme.AddToScheme, v1alpha1.AddToScheme, apiextensionsv1.AddToScheme)
		if err != nil {
			panic(err) // only fails on conflicting registrations, a programming error
		}
		return m
	}()
	scheme = schemes[mcsapi.V1beta1]
)

// newFlagSet returns the flag set of command verb: its errors and usage
// (the command's, then its flags) go to stderr.
func newFlagSet(verb string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("kubectl-mcs "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage+"\nFlags of "+verb+":\n"); fs.PrintDefaults() }
	return fs
}

// parse parses args with fs, flags before, between and after the
// positional arguments, as kubectl takes them ("status demo/web -o
// json"), and returns the positional ones. After "--", everything is
// positional.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		// flag stops at the first non-flag, or after "--" (then the
		// argument before rest is "--").
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}
