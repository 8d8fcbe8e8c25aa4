// Command kubectl-mcs is a kubectl plugin for a clusterset of
// mcs-syncer: copied onto the PATH, `kubectl mcs status` reports every
// member, every exported Service and its import into each member, and
// exits non-zero when anything is not converged (see internal/status).
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
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/mcs-syncer/mcs-syncer/internal/membership"
	"github.com/mcs-syncer/mcs-syncer/internal/status"
)

// Exit codes: converged, not converged, the command could not run.
const (
	exitConverged    = 0
	exitNotConverged = 1
	exitUsage        = 2
)

const usage = `kubectl mcs: the clusterset of mcs-syncer, seen from its members.

Usage:
  kubectl mcs status [namespace/name] [flags]
  kubectl mcs export <service> [-n namespace] [--exported-labels k=v,...] [--exported-annotations k=v,...]
  kubectl mcs unexport <service> [-n namespace]

export creates (or updates) the ServiceExport of a Service of the current
context's cluster (--kubeconfig, --context), as subctl export does;
unexport deletes it.

status lists each member, each exported Service with the clusters that
export it, its conflicts, and per member its ServiceImport (clusterset IP,
Ready) and the endpoints imported from each source against those the
source holds now. It exits 0 when every import is converged, 1 when not
(naming what), 2 when it cannot run.

The clusterset: --clusterset-config (mcs-syncer's config file), or the
contexts of --kubeconfig (default $KUBECONFIG or ~/.kube/config), one per
member, named after its cluster ID (--contexts: which; default all).
`

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command line's.
type options struct {
	config     string
	kubeconfig string
	contexts   string
	output     string
	timeout    time.Duration
}

// run runs the command line args (without the program's name) and
// returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) > 0 && (args[0] == "export" || args[0] == "unexport"):
		return runExport(ctx, args[0], args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "status":
		return runStatus(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprint(stderr, usage)
	return exitUsage
}

// runStatus runs status with args.
func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kubectl-mcs status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage+"\nFlags of status:\n"); fs.PrintDefaults() }
	var o options
	fs.StringVar(&o.config, "clusterset-config", "", "mcs-syncer's clusterset config file: its members, as mcs-syncer reads them")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "a kubeconfig with a context per member, named after its cluster ID (default $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&o.contexts, "contexts", "", "comma-separated contexts of --kubeconfig, the members (default every context)")
	fs.StringVar(&o.output, "o", "text", "output: text, json or yaml")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long to wait for the members' API servers, in all")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	only, err := onlyService(fs.Args())
	if err == nil && o.output != "text" && o.output != "json" && o.output != "yaml" {
		err = fmt.Errorf("-o %q: want text, json or yaml", o.output)
	}
	var members []status.Member
	if err == nil {
		members, err = clusterset(o)
	}
	if err != nil {
		fmt.Fprintln(stderr, "kubectl mcs status:", err)
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	report := status.Gather(ctx, members, only)
	if err := write(stdout, o.output, report); err != nil {
		fmt.Fprintln(stderr, "kubectl mcs status:", err)
		return exitUsage
	}
	if !report.Converged() {
		if o.output != "text" {
			fmt.Fprintf(stderr, "not converged: %s\n", strings.Join(report.Problems, "; "))
		}
		return exitNotConverged
	}
	return exitConverged
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

func write(w io.Writer, output string, r status.Report) error {
	switch output {
	case "json":
		raw, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(raw))
		return err
	case "yaml":
		raw, err := yaml.Marshal(r)
		if err != nil {
			return err
		}
		_, err = w.Write(raw)
		return err
	}
	_, err := io.WriteString(w, r.Text())
	return err
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(s), mcsv1beta1.Install(s)); err != nil {
		panic(err)
	}
	return s
}()

// clusterset returns the members to read.
func clusterset(o options) ([]status.Member, error) {
	if o.config != "" {
		if o.kubeconfig != "" || o.contexts != "" {
			return nil, errors.New("--clusterset-config or --kubeconfig, not both")
		}
		return fromConfig(o.config)
	}
	return fromKubeconfig(o.kubeconfig, o.contexts)
}

// fromConfig reads mcs-syncer's config: each member with connection
// settings of its own; one read through the hub is listed, not read.
func fromConfig(path string) ([]status.Member, error) {
	cfg, err := membership.LoadConfig(path)
	if err != nil {
		return nil, err
	}
	var members []status.Member
	for i := range cfg.Members {
		m := &cfg.Members[i]
		if m.ID == "" {
			return nil, fmt.Errorf("member %d has no id (its cluster names itself): kubectl mcs needs the IDs in the config", i+1)
		}
		if m.ThroughHub {
			members = append(members, status.Member{ID: string(m.ID)})
			continue
		}
		rc, err := m.RESTConfig()
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", m.ID, err)
		}
		c, err := newClient(rc)
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", m.ID, err)
		}
		members = append(members, status.Member{ID: string(m.ID), Client: c})
	}
	return members, nil
}

// fromKubeconfig reads each context of a kubeconfig as a member.
func fromKubeconfig(path, contexts string) ([]status.Member, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	raw, err := rules.Load()
	if err != nil {
		return nil, err
	}
	var names []string
	if contexts != "" {
		names = strings.Split(contexts, ",")
	} else {
		for name := range raw.Contexts {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil, errors.New("no context: give --clusterset-config, or a kubeconfig with a context per member")
	}
	var members []status.Member
	for _, name := range slices.Sorted(slices.Values(names)) {
		if _, ok := raw.Contexts[name]; !ok {
			return nil, fmt.Errorf("--contexts: the kubeconfig has no context %q", name)
		}
		rc, err := clientcmd.NewNonInteractiveClientConfig(*raw, name, &clientcmd.ConfigOverrides{}, rules).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("context %s: %w", name, err)
		}
		c, err := newClient(rc)
		if err != nil {
			return nil, fmt.Errorf("context %s: %w", name, err)
		}
		members = append(members, status.Member{ID: name, Client: c})
	}
	return members, nil
}

func newClient(rc *rest.Config) (client.Client, error) {
	rc = rest.CopyConfig(rc)
	rc.Timeout = 10 * time.Second // one member that does not answer holds the report for this long at most per request
	return client.New(rc, client.Options{Scheme: scheme})
}
