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
	"net/http"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/pkg/clusterset"
	"github.com/mcs-syncer/mcs-syncer/pkg/export"
	imports "github.com/mcs-syncer/mcs-syncer/pkg/import"
)

// options are the command-line flags.
type options struct {
	clustersetConfig     string
	localCluster         string
	managedBy            string
	maxEndpointsPerSlice int
	unreachableGrace     time.Duration
	leaderElect          bool
	leaderElectNamespace string
	metricsAddr          string
	probeAddr            string
	pprofAddr            string
	kubeAPIQPS           float64
	kubeAPIBurst         int
	importSyncs          int
	exportSyncs          int
	zap                  zap.Options
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
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus /metrics endpoint (0 disables it)")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz (0 disables them)")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "address of Go's /debug/pprof profiles (0 disables them; for diagnosis, keep it on the loopback)")
	fs.Float64Var(&o.kubeAPIQPS, "kube-api-qps", -1, "requests per second each member's client may send (negative: no client-side limit; the API server's Priority and Fairness protects it, and the controllers' workers bound the requests in flight)")
	fs.IntVar(&o.kubeAPIBurst, "kube-api-burst", 100, "burst of each member's client above --kube-api-qps (ignored when it is negative)")
	fs.IntVar(&o.importSyncs, "concurrent-import-syncs", 10, "ServiceImports synced at once in each consumer cluster")
	fs.IntVar(&o.exportSyncs, "concurrent-export-syncs", 5, "ServiceExports synced at once in each member cluster")
	o.zap.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected argument %q (all settings are flags)", fs.Arg(0))
	case o.clustersetConfig == "":
		return nil, errors.New("--clusterset-config: required")
	case o.localCluster != "" && len(validation.IsDNS1123Label(o.localCluster)) > 0:
		return nil, fmt.Errorf("--local-cluster: %q is not a DNS-1123 label", o.localCluster)
	case len(validation.IsValidLabelValue(o.managedBy)) > 0 || o.managedBy == "":
		return nil, fmt.Errorf("--managed-by: %q is not a valid label value", o.managedBy)
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
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcs-syncer:", err)
		os.Exit(2)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	if os.Getenv("GOGC") == "" {
		// The heap is mostly the informer caches, which live as long as the
		// process: a GC target of 50 % over them instead of Go's 100 % cut
		// the peak RSS of 60,000 imported endpoints from 172 to 138 MiB for
		// no measurable CPU (docs/benchmarks.md). GOGC in the environment wins.
		debug.SetGCPercent(50)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "mcs-syncer:", err)
		os.Exit(1)
	}
}

func run(o *options) error {
	cfg, err := clusterset.LoadConfig(o.clustersetConfig)
	if err != nil {
		return fmt.Errorf("--clusterset-config: %w", err)
	}
	var local *clusterset.Member
	if o.localCluster != "" {
		if local = cfg.Member(clusterset.ClusterID(o.localCluster)); local == nil {
			return fmt.Errorf("--local-cluster: %q is not a member of clusterset %s", o.localCluster, cfg.Clusterset)
		}
	} else {
		local = &cfg.Members[0] // central mode: the Lease lives in the first member
	}
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), mcsv1beta1.Install(scheme)); err != nil {
		return err
	}
	home, err := local.RESTConfig()
	if err != nil {
		return err
	}
	home.QPS, home.Burst = float32(o.kubeAPIQPS), o.kubeAPIBurst
	mgr, err := ctrl.NewManager(home, manager.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "mcs-syncer-" + cfg.Clusterset,
		LeaderElectionNamespace: o.leaderElectNamespace,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}

	members, err := clusterset.NewMembers(cfg, clusterset.MembersOptions{
		Scheme: scheme, ConfigureCache: export.ConfigureCache, Registerer: crmetrics.Registry,
		QPS: float32(o.kubeAPIQPS), Burst: o.kubeAPIBurst,
	})
	if err != nil {
		return err
	}
	if err := members.AddTo(mgr); err != nil {
		return err
	}
	store := clusterset.NewStore()
	importMetrics, err := imports.NewMetrics(crmetrics.Registry)
	if err != nil {
		return err
	}
	for _, id := range members.IDs() {
		crmetrics.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "mcs_syncer_exported_services", Help: "Services the member cluster exports into the clusterset.",
			ConstLabels: prometheus.Labels{"cluster": string(id)},
		}, func() float64 { return float64(store.Count(id)) }))

		cl := members.Cluster(id)
		w, err := export.New(cl, export.Options{
			Cluster: id, Store: store, WriteStatus: o.localCluster == "" || string(id) == o.localCluster,
			Recorder: cl.GetEventRecorder("mcs-syncer"), Members: members.IDs(), Workers: o.exportSyncs,
			Connected: members.Connected,
		})
		if err != nil {
			return err
		}
		if err := w.SetupWithManager(mgr, cl); err != nil {
			return fmt.Errorf("export watcher %s: %w", id, err)
		}
		if o.localCluster != "" && string(id) != o.localCluster {
			continue // per-cluster mode: import only into the local cluster
		}
		c, err := imports.New(cl, imports.Options{
			Consumer: id, Store: store, Members: members, ManagedBy: o.managedBy,
			MaxEndpointsPerSlice: o.maxEndpointsPerSlice, UnreachableGrace: o.unreachableGrace, Metrics: importMetrics,
			Workers: o.importSyncs,
		})
		if err != nil {
			return err
		}
		if err := c.SetupWithManager(mgr, cl); err != nil {
			return fmt.Errorf("import controller %s: %w", id, err)
		}
	}

	synced := &syncedMembers{done: map[clusterset.ClusterID]bool{}}
	for _, id := range members.IDs() {
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			if members.Cluster(id).GetCache().WaitForCacheSync(ctx) {
				synced.set(id)
			}
			return nil
		})); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	// Ready once every member's cache has synced, or the member is known
	// to be unreachable (one cluster down must not keep the others out).
	if err := mgr.AddReadyzCheck("members", func(*http.Request) error {
		for _, id := range members.IDs() {
			if connected, _ := members.Connected(id); connected && !synced.get(id) {
				return fmt.Errorf("member %s: cache not synced yet", id)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	ctrl.Log.Info("Starting", "clusterset", cfg.Clusterset, "members", members.IDs(), "localCluster", o.localCluster)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// syncedMembers records which members' caches have synced.
type syncedMembers struct {
	mu   sync.Mutex
	done map[clusterset.ClusterID]bool
}

func (s *syncedMembers) set(id clusterset.ClusterID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done[id] = true
}

func (s *syncedMembers) get(id clusterset.ClusterID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done[id]
}
