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
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
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

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// options are the flags of status, diagnose, gather and verify.
type options struct {
	clustersetFlags
	output  outputFormat
	timeout time.Duration
	// syncers are the probe addresses of mcs-syncers that run outside the
	// members (--syncer).
	syncers []string
}

func (o *options) register(fs *pflag.FlagSet, timeout time.Duration) {
	o.clustersetFlags.register(fs)
	o.output = "text"
	fs.VarP(&o.output, "output", "o", "Output format: text, wide, json or yaml.")
	fs.Func("syncer", "The probe address (host:port or URL) of an mcs-syncer that runs outside the members, whose view of them to read; repeatable (those that run as Pods in a member are found there).", func(v string) error {
		if v == "" {
			return errors.New("want host:port or a URL")
		}
		o.syncers = append(o.syncers, v)
		return nil
	})
	fs.DurationVar(&o.timeout, "timeout", timeout, "How long to wait for the members' API servers, in all.")
}

// outputFormat is -o: text, wide, json or yaml.
type outputFormat string

func (f *outputFormat) String() string { return string(*f) }
func (f *outputFormat) Type() string   { return "string" }
func (f *outputFormat) Set(v string) error {
	if v != "text" && v != "wide" && v != "json" && v != "yaml" {
		return errors.New("want text, wide, json or yaml")
	}
	*f = outputFormat(v)
	return nil
}

// runStatus runs status of the Service args names (or every one).
func runStatus(ctx context.Context, o *options, args []string, stdout, stderr io.Writer) int {
	// --timeout in all: from the first read (an inventory's profiles, the
	// versions the members serve) on.
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	only, err := onlyService(args, o.kube.namespace())
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

// onlyService reads the optional argument: namespace/name, or name of
// namespace (--namespace).
func onlyService(args []string, namespace string) (*types.NamespacedName, error) {
	if len(args) == 0 {
		if namespace != "" {
			return nil, fmt.Errorf("--namespace %s: name the Service too (NAME -n NAMESPACE, or NAMESPACE/NAME)", namespace)
		}
		return nil, nil
	}
	ns, name, ok := strings.Cut(args[0], "/")
	if !ok {
		ns, name = namespace, args[0]
		if ns == "" {
			return nil, fmt.Errorf("%q: want namespace/name, or name with -n namespace", args[0])
		}
	}
	switch {
	case ns == "" || name == "" || strings.Contains(name, "/"):
		return nil, fmt.Errorf("%q: want namespace/name", args[0])
	case ok && namespace != "" && namespace != ns:
		return nil, fmt.Errorf("%q is in namespace %s, not --namespace %s", args[0], ns, namespace)
	}
	return &types.NamespacedName{Namespace: ns, Name: name}, nil
}

// write writes v as output says: text (what text returns), json or yaml.
func write(w io.Writer, output outputFormat, v any, text func() string) error {
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
