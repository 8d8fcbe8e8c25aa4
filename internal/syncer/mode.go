package syncer

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/export"
	"github.com/mcs-syncer/mcs-syncer/internal/imports"
	"github.com/mcs-syncer/mcs-syncer/internal/membership"
	"github.com/mcs-syncer/mcs-syncer/internal/plumbing"
	"github.com/mcs-syncer/mcs-syncer/internal/publish"
	"github.com/mcs-syncer/mcs-syncer/internal/version"
)

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
func (sy *Syncer) publisher(cl cluster.Cluster) ([]func(context.Context) error, error) {
	cfg, s := sy.cfg, sy.settings
	opts := publish.PublisherOptions{Cluster: sy.local, Namespace: cfg.PublicationNamespace, Store: sy.store, Workers: s.ExportSyncs, Heartbeat: s.Heartbeat}
	if cfg.Hub == nil {
		p, err := publish.NewPublisher(cl, opts)
		if err != nil {
			return nil, fmt.Errorf("publisher: %w", err)
		}
		sy.published.set(p)
		return []func(context.Context) error{p.Start}, nil
	}
	build := func(rc *rest.Config) ([]func(context.Context) error, *publish.Publisher, error) {
		hub, err := cluster.New(withClientLimits(rc, s), func(o *cluster.Options) {
			o.Scheme = sy.scheme
			o.Cache.DefaultTransform = plumbing.StripUnread
			publish.ConfigureCache(&o.Cache, cfg.PublicationNamespace, sy.local)
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
	return []func(context.Context) error{sy.published.throughHub(cfg.Hub, build)}, nil
}

// withClientLimits gives rc (the publisher's config of the hub) the
// members' client limits: client-go's default of 5 requests per second
// made a member's first publications into the hub take 20 s for 100
// exports (make bench-scale).
func withClientLimits(rc *rest.Config, s Settings) *rest.Config {
	rc.QPS, rc.Burst = float32(s.KubeAPIQPS), s.KubeAPIBurst
	return rc
}

// leaderElectionConfig returns the REST config of the cluster that holds
// the Lease, or nil without leader election: the cluster mcs-syncer runs
// in, or one the user names; never implicitly a member, whose outage would
// leave the clusterset without a leader.
func leaderElectionConfig(s Settings, cfg *membership.Config) (*rest.Config, error) {
	switch {
	case !s.LeaderElect:
		return nil, nil
	case s.LeaderElectKubeconfig != "":
		rc, err := clientcmd.BuildConfigFromFlags("", s.LeaderElectKubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--leader-election-kubeconfig: %w", err)
		}
		return rc, nil
	case s.LeaderElectCluster != "":
		m := cfg.Member(clusterset.ClusterID(s.LeaderElectCluster))
		if m == nil {
			return nil, fmt.Errorf("--leader-election-cluster: %q is not a member of clusterset %s", s.LeaderElectCluster, cfg.Clusterset)
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
	if s.LocalCluster != "" {
		rc, err := cfg.Member(clusterset.ClusterID(s.LocalCluster)).RESTConfig()
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
