// Command mcs-syncer implements the Kubernetes Multi-Cluster Services API
// (KEP-1645) for a clusterset: it exports the Services marked with a
// ServiceExport in any member cluster and imports them into every member
// (central mode) or into its own cluster (per-cluster mode, with
// --local-cluster) as ServiceImports, derived Services and EndpointSlices.
//
// Run `mcs-syncer -h` for the flags; docs/ has the user guide.
package main

import (
	"cmp"
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

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/export"
	"github.com/mcs-syncer/mcs-syncer/internal/imports"
	"github.com/mcs-syncer/mcs-syncer/internal/membership"
	"github.com/mcs-syncer/mcs-syncer/internal/plumbing"
	"github.com/mcs-syncer/mcs-syncer/internal/publish"
	"github.com/mcs-syncer/mcs-syncer/internal/version"
)

// options are the command-line flags.
type options struct {
	clustersetConfig      string
	localCluster          string
	managedBy             string
	maxEndpointsPerSlice  int
	unreachableGrace      time.Duration
	leaderElect           bool
	leaderElectNamespace  string
	leaderElectKubeconfig string
	leaderElectCluster    string
	metricsAddr           string
	probeAddr             string
	pprofAddr             string
	kubeAPIQPS            float64
	kubeAPIBurst          int
	importSyncs           int
	exportSyncs           int
	heartbeat             time.Duration
	zap                   zap.Options
	printVersion          bool
}

// parseFlags parses args; every bad value is an error naming its flag.
func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("mcs-syncer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.clustersetConfig, "clusterset-config", "", "path of the clusterset config file (required; see config/samples/clusterset.yaml)")
	fs.StringVar(&o.localCluster, "local-cluster", "", "per-cluster mode: the ID of the member this mcs-syncer runs in; it imports only into it and writes only its ServiceExports' status (empty: central mode, every member)")
	fs.StringVar(&o.managedBy, "managed-by", "mcs", "value of the endpointslice.kubernetes.io/managed-by label of the imported EndpointSlices")
	fs.IntVar(&o.maxEndpointsPerSlice, "max-endpoints-per-slice", 100, "most endpoints in one imported EndpointSlice (1..1000)")
	fs.DurationVar(&o.unreachableGrace, "cluster-unreachable-grace", 2*time.Minute, "how long a disconnected member keeps its endpoints in the imports (0: forever)")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader through a Lease, for several replicas")
	fs.StringVar(&o.leaderElectNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's namespace in a cluster; required outside one)")
	fs.StringVar(&o.leaderElectKubeconfig, "leader-election-kubeconfig", "", "kubeconfig of the cluster that holds the leader election Lease (default: the cluster mcs-syncer runs in; in per-cluster mode outside a cluster, --local-cluster)")
	fs.StringVar(&o.leaderElectCluster, "leader-election-cluster", "", "ID of the member whose API server holds the leader election Lease, instead of --leader-election-kubeconfig")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint (0 disables it)")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz (0 disables them)")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "address of Go's /debug/pprof profiles (0 disables them; for diagnosis, keep it on the loopback)")
	fs.Float64Var(&o.kubeAPIQPS, "kube-api-qps", -1, "requests per second each member's client may send (negative: no client-side limit; the API server's Priority and Fairness protects it, and the controllers' workers bound the requests in flight)")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", 100, "burst of each member's client above --kube-api-qps (ignored when it is negative)")
	fs.IntVar(&o.importSyncs, "concurrent-import-syncs", 10, "ServiceImports synced at once in each consumer cluster")
	fs.IntVar(&o.exportSyncs, "concurrent-export-syncs", 5, "ServiceExports synced at once in each member cluster")
	fs.DurationVar(&o.heartbeat, "heartbeat-interval", publish.DefaultHeartbeat, "per-cluster mode: how often this member renews its marker where it publishes (the other members count it gone after 3 intervals without a renewal, then withdraw its endpoints after --cluster-unreachable-grace)")
	fs.BoolVar(&o.printVersion, "version", false, "print the version and the source revision, then exit")
	o.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.printVersion {
		return o, nil
	}
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected argument %q (all settings are flags)", fs.Arg(0))
	case o.clustersetConfig == "":
		return nil, errors.New("--clusterset-config: required")
	case o.localCluster != "" && clusterIDError(o.localCluster) != nil:
		return nil, fmt.Errorf("--local-cluster: %w", clusterIDError(o.localCluster))
	case o.leaderElectCluster != "" && clusterIDError(o.leaderElectCluster) != nil:
		return nil, fmt.Errorf("--leader-election-cluster: %w", clusterIDError(o.leaderElectCluster))
	case len(validation.IsValidLabelValue(o.managedBy)) > 0 || o.managedBy == "":
		return nil, fmt.Errorf("--managed-by: %q is not a valid label value", o.managedBy)
	case kubernetesOwned(o.managedBy):
		return nil, fmt.Errorf("--managed-by: %q belongs to a Kubernetes controller, which would fight mcs-syncer over the slices; choose a value of your own (default mcs)", o.managedBy)
	case o.maxEndpointsPerSlice < 1 || o.maxEndpointsPerSlice > 1000:
		return nil, fmt.Errorf("--max-endpoints-per-slice: %d is outside 1..1000", o.maxEndpointsPerSlice)
	case o.unreachableGrace < 0:
		return nil, fmt.Errorf("--cluster-unreachable-grace: %s is negative", o.unreachableGrace)
	case o.kubeAPIQPS == 0 || math.IsNaN(o.kubeAPIQPS) || math.IsInf(o.kubeAPIQPS, 0) || o.kubeAPIQPS > math.MaxFloat32:
		return nil, fmt.Errorf("--kube-api-qps: %v is not a rate (a positive number, or negative for no client-side limit)", o.kubeAPIQPS)
	case o.kubeAPIBurst < 1:
		return nil, fmt.Errorf("--kube-api-burst: %d is not positive", o.kubeAPIBurst)
	case o.importSyncs < 1:
		return nil, fmt.Errorf("--concurrent-import-syncs: %d is not positive", o.importSyncs)
	case o.exportSyncs < 1:
		return nil, fmt.Errorf("--concurrent-export-syncs: %d is not positive", o.exportSyncs)
	case o.heartbeat < time.Second:
		return nil, fmt.Errorf("--heartbeat-interval: %s is under a second", o.heartbeat)
	case !o.leaderElect && (o.leaderElectKubeconfig != "" || o.leaderElectCluster != ""):
		return nil, errors.New("--leader-election-kubeconfig and --leader-election-cluster need --leader-elect")
	case o.leaderElectKubeconfig != "" && o.leaderElectCluster != "":
		return nil, errors.New("--leader-election-kubeconfig and --leader-election-cluster: set one, not both")
	}
	return o, nil
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

// configError is a bad setting in the clusterset config or in how flags
// and config fit together: like a bad flag, it exits 2.
type configError struct{ error }

func (e configError) Unwrap() error { return e.error }

func main() {
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
		if errors.As(err, new(configError)) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func run(o *options) error {
	cfg, err := membership.LoadConfig(o.clustersetConfig)
	if err != nil {
		return configError{fmt.Errorf("--clusterset-config: %w", err)}
	}
	if err := cfg.Usable(); err != nil {
		return configError{fmt.Errorf("--clusterset-config %s: %w", o.clustersetConfig, err)}
	}
	local := clusterset.ClusterID(o.localCluster)
	if err := checkMode(cfg, local); err != nil {
		return configError{fmt.Errorf("--clusterset-config %s: %w", o.clustersetConfig, err)}
	}
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), mcsv1beta1.Install(scheme), publish.AddToScheme(scheme)); err != nil {
		return err
	}
	leaseHome, err := leaderElectionConfig(o, cfg)
	if err != nil {
		return configError{err}
	}
	// The manager's own client is never used (every client is a member's):
	// it gets the Lease's cluster when there is one, else an address that
	// is never dialled.
	mgrConfig := cmp.Or(leaseHome, &rest.Config{Host: "https://mcs-syncer.invalid"})
	mgr, err := ctrl.NewManager(mgrConfig, manager.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  "0", // membership.ProbeServer, which says why it is not ready
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "mcs-syncer-" + cfg.Clusterset,
		LeaderElectionNamespace: o.leaderElectNamespace,
		// The process exits once the manager has stopped (its leader
		// runnables first), so the Lease is released on the way out: a
		// successor (a restart, a rolling upgrade's new pod) leads at once
		// instead of waiting out the Lease (it waited 17 s in the e2e).
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()

	store := clusterset.NewStore()
	importMetrics, err := registerMetrics(crmetrics.Registry, store)
	if err != nil {
		return err
	}
	// writesInto tells the members mcs-syncer imports into and whose
	// ServiceExports' status it writes: all in central mode, else its own.
	writesInto := func(id clusterset.ClusterID) bool { return local == "" || id == local }
	// In per-cluster mode the other members are read through what they
	// publish (in their own API server, or in the hub), never through
	// their Services and EndpointSlices; central mode reads every member
	// itself, as each member's own mcs-syncer does.
	readsPublications := func(id clusterset.ClusterID) bool { return local != "" && id != local }
	publications := cfg.PublicationNamespace
	configureCache := func(id clusterset.ClusterID, o *cache.Options) {
		if !readsPublications(id) {
			// Only where the export watcher runs: a cache resolves the
			// resources it is configured for when it is built, and a hub
			// served by a generic control plane (KEP-4080) has no
			// EndpointSlices (every member read through it failed with "no
			// matches for kind EndpointSlice").
			export.ConfigureCache(o)
		}
		if local != "" {
			// The publisher's view of its own publications, a reader's of
			// one member's, or (id "") the view of every member's in the
			// hub that the readers of all members share.
			publish.ConfigureCache(o, publications, id)
		}
	}
	// What the readers see of the other members' heartbeats (their
	// markers' renewals), for their health.
	heartbeats := publish.NewHeartbeats()
	// How the local member's own publications fare (per-cluster mode).
	published := &publishing{}
	var set *membership.Set
	engage := func(id clusterset.ClusterID, cl cluster.Cluster) ([]func(context.Context) error, error) {
		if readsPublications(id) {
			r, err := publish.NewReader(cl, id, store, heartbeats)
			if err != nil {
				return nil, err
			}
			return []func(context.Context) error{r.Start}, nil
		}
		w, err := export.New(cl, export.Options{
			Cluster: id, Store: store, WriteStatus: writesInto(id), Recorder: plumbing.NonBlockingRecorder(cl.GetEventRecorder("mcs-syncer")),
			Membership: set, Workers: o.exportSyncs,
		})
		if err != nil {
			return nil, fmt.Errorf("export watcher: %w", err)
		}
		if !writesInto(id) {
			return []func(context.Context) error{w.Start}, nil
		}
		c, err := imports.New(cl, imports.Options{
			Consumer: id, Store: store, Membership: set, ManagedBy: o.managedBy,
			MaxEndpointsPerSlice: o.maxEndpointsPerSlice, UnreachableGrace: o.unreachableGrace, Metrics: importMetrics,
			Workers: o.importSyncs,
		})
		if err != nil {
			return nil, fmt.Errorf("import controller: %w", err)
		}
		runs := []func(context.Context) error{w.Start, c.Start}
		if local == "" {
			return runs, nil
		}
		publishing, err := publisher(cl, cfg, scheme, id, store, o, published)
		if err != nil {
			return nil, err
		}
		return append(runs, publishing...), nil
	}
	departed := func(d membership.Departure) {
		// It left: its endpoints leave every import at once, no grace.
		store.RemoveCluster(d.ID)
		heartbeats.Forget(d.ID)
		if !writesInto(d.ID) || d.Client == nil {
			return
		}
		logger := ctrl.Log.WithValues("cluster", d.ID)
		switch {
		case d.SameClusterAs != "":
			logger.Info("Member left, but its cluster is still a member under another ID: what mcs-syncer wrote there is that member's now", "sameClusterAs", d.SameClusterAs)
			return
		case !d.Engaged:
			logger.Info("Member left before it was ever engaged: this process wrote nothing there to remove")
			return
		}
		go func() {
			select {
			case <-d.Context.Done():
			case <-time.After(membership.DepartureSettle):
				err := errors.Join(imports.Withdraw(d.Context, d.Client, o.managedBy), export.ClearStatus(d.Context, d.Client))
				if err == nil {
					logger.Info("Removed what mcs-syncer wrote into the member that left")
					return
				}
				if !errors.Is(context.Cause(d.Context), membership.ErrRejoined) {
					logger.Error(err, "Could not remove all mcs-syncer wrote into the member that left; remove its ServiceImports and ServiceExport conditions by hand")
					return
				}
			}
			if errors.Is(context.Cause(d.Context), membership.ErrRejoined) {
				logger.Info("Member's cluster is a member again: what mcs-syncer wrote there stays")
			}
		}()
	}
	set, err = membership.NewSet(o.clustersetConfig, cfg, membership.Options{
		Scheme: scheme, ConfigureCache: configureCache, ReadsPublications: readsPublications, Heartbeat: heartbeats.Of, Registerer: crmetrics.Registry,
		QPS: float32(o.kubeAPIQPS), Burst: o.kubeAPIBurst, Required: local,
		Engage: engage, Departed: departed, Changed: store.AnnounceAll,
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(set); err != nil {
		return err
	}
	if o.probeAddr != "0" {
		probes := &membership.ProbeServer{Addr: o.probeAddr, Set: set}
		if local != "" {
			probes.Publishing = published.Problem
		}
		if o.leaderElect {
			// Without leader election there is no standby: until the
			// members are engaged, the process is not ready.
			probes.Leading = func() bool {
				select {
				case <-mgr.Elected():
					return true
				default:
					return false
				}
			}
		}
		if err := mgr.Add(probes); err != nil {
			return err
		}
	}
	ctrl.Log.Info("Starting", "clusterset", cfg.Clusterset, "members", set.IDs(), "localCluster", o.localCluster, "hub", cfg.Hub != nil)
	return mgr.Start(ctx)
}

// checkMode checks that the config suits the mode: per-cluster mode names
// a member with connection settings of its own; a hub needs per-cluster
// mode (central mode reads every member itself).
func checkMode(cfg *membership.Config, local clusterset.ClusterID) error {
	if local == "" {
		if cfg.Hub != nil {
			return errors.New("hub mode needs per-cluster mode: run each member's own mcs-syncer with --local-cluster")
		}
		return nil
	}
	m := cfg.Member(local)
	switch {
	case m == nil:
		return fmt.Errorf("--local-cluster: %q is not a member of clusterset %s", local, cfg.Clusterset)
	case m.ThroughHub:
		return fmt.Errorf("--local-cluster: member %s has no kubeconfig (nor inCluster): its own cluster cannot be read through the hub", local)
	}
	return nil
}

// publisher returns what publishes the local member's exports: into its
// own API server (through cl, whose cache publish.ConfigureCache set up),
// or into the hub, through a client and cache of its own that run beside
// the publisher and are rebuilt when the hub's kubeconfig changes. A hub
// that does not answer holds up the publications only, never the member's
// own imports.
func publisher(cl cluster.Cluster, cfg *membership.Config, scheme *runtime.Scheme, local clusterset.ClusterID, store *clusterset.Store, o *options, status *publishing) ([]func(context.Context) error, error) {
	opts := publish.PublisherOptions{Cluster: local, Namespace: cfg.PublicationNamespace, Store: store, Workers: o.exportSyncs, Heartbeat: o.heartbeat}
	if cfg.Hub == nil {
		p, err := publish.NewPublisher(cl, opts)
		if err != nil {
			return nil, fmt.Errorf("publisher: %w", err)
		}
		status.set(p)
		return []func(context.Context) error{p.Start}, nil
	}
	build := func(rc *rest.Config) ([]func(context.Context) error, *publish.Publisher, error) {
		hub, err := cluster.New(withClientLimits(rc, o), func(o *cluster.Options) {
			o.Scheme = scheme
			o.Cache.DefaultTransform = plumbing.StripUnread
			publish.ConfigureCache(&o.Cache, cfg.PublicationNamespace, local)
		})
		if err != nil {
			return nil, nil, fmt.Errorf("hub: %w", err)
		}
		p, err := publish.NewPublisher(hub, opts)
		if err != nil {
			return nil, nil, fmt.Errorf("publisher: %w", err)
		}
		return []func(context.Context) error{hub.Start, p.Start}, p, nil
	}
	return []func(context.Context) error{status.throughHub(cfg.Hub, build)}, nil
}

// withClientLimits gives rc (the publisher's config of the hub) the
// members' client limits: client-go's default of 5 requests per second
// made a member's first publications into the hub take 20 s for 100
// exports (make bench-scale).
func withClientLimits(rc *rest.Config, o *options) *rest.Config {
	rc.QPS, rc.Burst = float32(o.kubeAPIQPS), o.kubeAPIBurst
	return rc
}

// leaderElectionConfig returns the REST config of the cluster that holds
// the Lease, or nil without leader election: the cluster mcs-syncer runs
// in, or one the user names; never implicitly a member, whose outage would
// leave the clusterset without a leader.
func leaderElectionConfig(o *options, cfg *membership.Config) (*rest.Config, error) {
	switch {
	case !o.leaderElect:
		return nil, nil
	case o.leaderElectKubeconfig != "":
		rc, err := clientcmd.BuildConfigFromFlags("", o.leaderElectKubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--leader-election-kubeconfig: %w", err)
		}
		return rc, nil
	case o.leaderElectCluster != "":
		m := cfg.Member(clusterset.ClusterID(o.leaderElectCluster))
		if m == nil {
			return nil, fmt.Errorf("--leader-election-cluster: %q is not a member of clusterset %s", o.leaderElectCluster, cfg.Clusterset)
		}
		rc, err := m.RESTConfig()
		if err != nil {
			return nil, fmt.Errorf("--leader-election-cluster: %w", err)
		}
		return rc, nil
	}
	if rc, err := rest.InClusterConfig(); err == nil {
		return rc, nil
	}
	if o.localCluster != "" {
		rc, err := cfg.Member(clusterset.ClusterID(o.localCluster)).RESTConfig()
		if err != nil {
			return nil, fmt.Errorf("--leader-elect: the Lease lives in --local-cluster: %w", err)
		}
		return rc, nil
	}
	return nil, errors.New("--leader-elect: outside a cluster in central mode, name where the Lease lives with --leader-election-kubeconfig or --leader-election-cluster")
}

// registerMetrics registers mcs-syncer's metrics with reg, all but the
// membership's (membership.NewSet registers those), and returns the
// import side's. docs/metrics.md lists them (TestMetricsAreDocumented).
func registerMetrics(reg prometheus.Registerer, store *clusterset.Store) (*imports.Metrics, error) {
	importMetrics, err := imports.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	if err := errors.Join(export.RegisterMetrics(reg, store), publish.RegisterMetrics(reg), version.RegisterBuildInfo(reg)); err != nil {
		return nil, err
	}
	return importMetrics, nil
}
