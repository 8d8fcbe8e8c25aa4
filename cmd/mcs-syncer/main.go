// Command mcs-syncer implements the Kubernetes Multi-Cluster Services API
// (KEP-1645) for a clusterset: it exports the Services marked with a
// ServiceExport in any member cluster and imports them into every member
// (central mode) or into its own cluster (per-cluster mode, with
// --local-cluster) as ServiceImports, derived Services and EndpointSlices.
//
// Run `mcs-syncer -h` for the flags; docs/ has the user guide.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/credentials"
	"github.com/mcs-syncer/mcs-syncer/internal/publish"
	"github.com/mcs-syncer/mcs-syncer/internal/syncer"
	"github.com/mcs-syncer/mcs-syncer/internal/verify"
	"github.com/mcs-syncer/mcs-syncer/internal/version"
)

// options are the command-line flags: the process's settings, and what
// only the command reads.
type options struct {
	syncer.Settings
	zap          zap.Options
	printVersion bool
}

// parseFlags parses args; every bad value is an error naming its flag.
func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := newFlagSet(o, stderr)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.printVersion {
		return o, nil
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (all settings are flags)", fs.Arg(0))
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	return o, nil
}

// newFlagSet registers mcs-syncer's flags, bound to o. The docs' flag
// tables are tested against it (docs_test.go).
func newFlagSet(o *options, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("mcs-syncer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.ClustersetConfig, "clusterset-config", "", "path of the clusterset config file (required; see config/samples/clusterset.yaml)")
	fs.StringVar(&o.LocalCluster, "local-cluster", "", "per-cluster mode: the ID of the member this mcs-syncer runs in; it imports only into it and writes only its ServiceExports' status (empty: central mode, every member)")
	fs.StringVar(&o.ManagedBy, "managed-by", "mcs", "value of the endpointslice.kubernetes.io/managed-by label of the imported EndpointSlices, and of app.kubernetes.io/managed-by on the ServiceImports and derived Services it writes (objects with another value are never touched)")
	fs.IntVar(&o.MaxEndpointsPerSlice, "max-endpoints-per-slice", 100, "most endpoints in one imported EndpointSlice and, in per-cluster and hub mode, in one part of a publication (1..1000)")
	fs.DurationVar(&o.UnreachableGrace, "cluster-unreachable-grace", 2*time.Minute, "how long a disconnected member keeps its endpoints in the imports (0: forever)")
	fs.BoolVar(&o.LeaderElect, "leader-elect", false, "elect a leader through a Lease, for several replicas")
	fs.StringVar(&o.LeaderElectNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's namespace in a cluster; required outside one)")
	fs.StringVar(&o.LeaderElectKubeconfig, "leader-election-kubeconfig", "", "kubeconfig of the cluster that holds the leader election Lease (default: the cluster mcs-syncer runs in; in per-cluster mode outside a cluster, --local-cluster)")
	fs.StringVar(&o.LeaderElectCluster, "leader-election-cluster", "", "ID of the member whose API server holds the leader election Lease, instead of --leader-election-kubeconfig")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint (0 disables it)")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz (0 disables them)")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", "0", "address of Go's /debug/pprof profiles (0 disables them; for diagnosis, keep it on the loopback)")
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", -1, "requests per second each member's client may send (negative: no client-side limit; the API server's Priority and Fairness protects it, and the controllers' workers bound the requests in flight)")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", 100, "burst of each member's client above --kube-api-qps (ignored when it is negative)")
	fs.IntVar(&o.ImportSyncs, "concurrent-import-syncs", 10, "ServiceImports synced at once in each consumer cluster")
	fs.IntVar(&o.ExportSyncs, "concurrent-export-syncs", 5, "ServiceExports synced at once in each member cluster")
	fs.DurationVar(&o.Heartbeat, "heartbeat-interval", publish.DefaultHeartbeat, "per-cluster mode: how often this member renews its marker where it publishes (the other members count it gone after 3 intervals without a renewal, then withdraw its endpoints after --cluster-unreachable-grace)")
	fs.DurationVar(&o.CredentialPluginTimeout, "credential-plugin-timeout", credentials.DefaultTimeout, "how long one run of a member's (or the hub's) exec credential plugin may take; past it the plugin is stopped and the member is failed, with the plugin's stderr in its cause")
	fs.IntVar(&o.MaxPublicationsPerMember, "max-publications-per-member", publish.DefaultMaxObjectsPerMember, "per-cluster and hub mode: most publications (heads and parts) held of one member; more are left out, logged and counted (mcs_syncer_publications_over_limit_total)")
	o.MaxPublicationBytesPerMember = publish.DefaultMaxBytesPerMember
	fs.Var(bytesFlag{&o.MaxPublicationBytesPerMember}, "max-publication-bytes-per-member", "per-cluster and hub mode: most bytes of publications (heads and parts, as JSON) held of one member, a quantity such as 256Mi; more are left out, logged and counted as past --max-publications-per-member")
	fs.BoolVar(&o.printVersion, "version", false, "print the version and the source revision, then exit")
	o.zap.BindFlags(fs)
	return fs
}

// validate names every flag whose value mcs-syncer cannot run with, in one
// line, so that a user fixes them all at once.
func (o *options) validate() error {
	var bad []string
	check := func(wrong bool, format string, args ...any) {
		if wrong {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	check(o.ClustersetConfig == "", "--clusterset-config: required")
	check(o.LocalCluster != "" && clusterIDError(o.LocalCluster) != nil, "--local-cluster: %v", clusterIDError(o.LocalCluster))
	check(o.LeaderElectCluster != "" && clusterIDError(o.LeaderElectCluster) != nil, "--leader-election-cluster: %v", clusterIDError(o.LeaderElectCluster))
	check(len(validation.IsValidLabelValue(o.ManagedBy)) > 0 || o.ManagedBy == "", "--managed-by: %q is not a valid label value", o.ManagedBy)
	check(kubernetesOwned(o.ManagedBy), "--managed-by: %q belongs to a Kubernetes controller, which would fight mcs-syncer over the slices; choose a value of your own (default mcs)", o.ManagedBy)
	check(o.MaxEndpointsPerSlice < 1 || o.MaxEndpointsPerSlice > 1000, "--max-endpoints-per-slice: %d is outside 1..1000", o.MaxEndpointsPerSlice)
	check(o.UnreachableGrace < 0, "--cluster-unreachable-grace: %s is negative", o.UnreachableGrace)
	check(o.KubeAPIQPS == 0 || math.IsNaN(o.KubeAPIQPS) || math.IsInf(o.KubeAPIQPS, 0) || o.KubeAPIQPS > math.MaxFloat32,
		"--kube-api-qps: %v is not a rate (a positive number, or negative for no client-side limit)", o.KubeAPIQPS)
	check(o.KubeAPIBurst < 1, "--kube-api-burst: %d is not positive", o.KubeAPIBurst)
	check(o.ImportSyncs < 1, "--concurrent-import-syncs: %d is not positive", o.ImportSyncs)
	check(o.ExportSyncs < 1, "--concurrent-export-syncs: %d is not positive", o.ExportSyncs)
	check(o.Heartbeat < time.Second, "--heartbeat-interval: %s is under a second", o.Heartbeat)
	check(o.MaxPublicationsPerMember < 1, "--max-publications-per-member: %d is not positive", o.MaxPublicationsPerMember)
	check(o.MaxPublicationBytesPerMember < publish.MaxPublicationBytes, "--max-publication-bytes-per-member: %s is under 1Mi, what one publication may take", bytesFlag{&o.MaxPublicationBytesPerMember})
	check(o.CredentialPluginTimeout <= 0, "--credential-plugin-timeout: %s is not positive", o.CredentialPluginTimeout)
	check(!o.LeaderElect && (o.LeaderElectKubeconfig != "" || o.LeaderElectCluster != ""), "--leader-election-kubeconfig and --leader-election-cluster need --leader-elect")
	check(o.LeaderElectKubeconfig != "" && o.LeaderElectCluster != "", "--leader-election-kubeconfig and --leader-election-cluster: set one, not both")
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// bytesFlag is a flag of bytes given as a Kubernetes quantity (128Mi,
// 100M, 1048576), as a Pod's resources are.
type bytesFlag struct{ bytes *int64 }

func (f bytesFlag) String() string {
	if f.bytes == nil {
		return ""
	}
	return resource.NewQuantity(*f.bytes, resource.BinarySI).String()
}

func (f bytesFlag) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("%q is not a quantity of bytes (such as 128Mi)", s)
	}
	*f.bytes = q.Value()
	return nil
}

// clusterIDError says why id is no cluster ID, nil if it is one.
func clusterIDError(id string) error {
	_, err := clusterset.ParseClusterID(id)
	return err
}

// kubernetesOwned reports whether a managed-by value is one that
// Kubernetes' own controllers use (kube-controller-manager's EndpointSlice
// and mirroring controllers) or could use (the k8s.io and kubernetes.io
// domains are reserved for Kubernetes components).
func kubernetesOwned(managedBy string) bool {
	for _, domain := range []string{"k8s.io", "kubernetes.io"} {
		if managedBy == domain || strings.HasSuffix(managedBy, "."+domain) {
			return true
		}
	}
	return false
}

func main() {
	// The client Pod of kubectl mcs verify runs this image as a probe.
	if len(os.Args) > 1 && os.Args[1] == verify.ProbeCommand {
		os.Exit(verify.RunProbe(context.Background(), os.Args[2:], os.Stdout, os.Stderr))
	}
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcs-syncer:", err)
		os.Exit(2)
	}
	if o.printVersion {
		fmt.Println(version.String())
		os.Exit(0)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	v, r := version.Get()
	ctrl.Log.WithName("setup").Info("starting mcs-syncer", "version", v, "revision", r)
	if os.Getenv("GOGC") == "" {
		// The heap is mostly the informer caches, which live as long as the
		// process: a GC target of 50 % over them instead of Go's 100 % cut
		// the peak RSS of 60,000 imported endpoints from 172 to 138 MiB for
		// no measurable CPU (docs/benchmarks.md). GOGC in the environment wins.
		debug.SetGCPercent(50)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "mcs-syncer:", err)
		if errors.As(err, new(syncer.ConfigError)) {
			os.Exit(2) // like a bad flag
		}
		os.Exit(1)
	}
}

// run builds the process from its settings and runs it until a signal
// ends it.
func run(o *options) error {
	sy, err := syncer.New(o.Settings, crmetrics.Registry)
	if err != nil {
		return err
	}
	return sy.Start(ctrl.SetupSignalHandler())
}
