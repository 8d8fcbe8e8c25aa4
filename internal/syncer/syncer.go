package syncer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/credentials"
	"github.com/mcs-syncer/mcs-syncer/internal/export"
	"github.com/mcs-syncer/mcs-syncer/internal/imports"
	"github.com/mcs-syncer/mcs-syncer/internal/mcsapi"
	"github.com/mcs-syncer/mcs-syncer/internal/membership"
	"github.com/mcs-syncer/mcs-syncer/internal/notify"
	"github.com/mcs-syncer/mcs-syncer/internal/plumbing"
	"github.com/mcs-syncer/mcs-syncer/internal/publish"
)

// Syncer is one mcs-syncer process: its config, its shared state and the
// manager that runs its parts.
type Syncer struct {
	settings Settings
	cfg      *membership.Config
	// local is the member the process runs in, "" in central mode.
	local clusterset.ClusterID
	// scheme speaks the MCS API's v1beta1; mcsSchemes hold one scheme per
	// version of it, for the members.
	scheme     *runtime.Scheme
	mcsSchemes map[schema.GroupVersion]*runtime.Scheme
	store      *clusterset.Store
	// feedback carries what the import side and the publisher learn of
	// the exports back to the export watchers (their Ready condition).
	feedback *clusterset.Feedback
	// metrics are this mcs-syncer's, registered once, and what its
	// publication readers share.
	metrics *metrics
	// heartbeats is what the readers see of the other members' markers.
	heartbeats *publish.Heartbeats
	// published follows the local member's own publications.
	published *publishing
	set       *membership.Set
	mgr       manager.Manager
	// started is when the process was built (publicationReaders).
	started time.Time
	// readers is notified when what publicationReaders answers may have
	// changed (followReaders).
	readers notify.Signal
	// fatal receives what must end the process (membership's
	// ControllersHung); Start stops the manager and returns it.
	fatal chan error
	// credentials run the exec credential plugins of the members' and
	// the hub's configs, each run with a deadline.
	credentials *credentials.Plugins
	// exportedNames are each member's exported Services, which its
	// caches thin the others by; kept across its engagements.
	exportedNames exportedNamesByMember
}

// exportedNamesByMember holds each member's export.ExportedNames.
type exportedNamesByMember struct {
	mu   sync.Mutex
	byID map[clusterset.ClusterID]*export.ExportedNames
}

// of returns member id's names, made at its first engagement.
func (n *exportedNamesByMember) of(id clusterset.ClusterID) *export.ExportedNames {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.byID == nil {
		n.byID = map[clusterset.ClusterID]*export.ExportedNames{}
	}
	names := n.byID[id]
	if names == nil {
		names = export.NewExportedNames()
		n.byID[id] = names
	}
	return names
}

// New loads the clusterset config, checks it against the settings and
// builds the process, registering its metrics with reg. An error the user
// must fix in the config or the settings is a ConfigError.
func New(s Settings, reg prometheus.Registerer) (*Syncer, error) {
	cfg, err := membership.LoadConfig(s.ClustersetConfig)
	if err != nil {
		return nil, ConfigError{fmt.Errorf("--clusterset-config: %w", err)}
	}
	if err := cfg.Usable(); err != nil {
		return nil, ConfigError{fmt.Errorf("--clusterset-config %s: %w", s.ClustersetConfig, err)}
	}
	sy := &Syncer{settings: s, cfg: cfg, local: clusterset.ClusterID(s.LocalCluster),
		store: clusterset.NewStore(), feedback: clusterset.NewFeedback(), heartbeats: publish.NewHeartbeats(), published: &publishing{}, started: time.Now(), fatal: make(chan error, 1),
		credentials: &credentials.Plugins{Timeout: s.CredentialPluginTimeout}}
	if err := checkMode(cfg, sy.local); err != nil {
		return nil, ConfigError{fmt.Errorf("--clusterset-config %s: %w", s.ClustersetConfig, err)}
	}
	// One scheme per version of the MCS API a member may serve: each
	// member's client speaks the version it serves (internal/mcsapi).
	if sy.mcsSchemes, err = mcsapi.Schemes(clientgoscheme.AddToScheme, v1alpha1.AddToScheme); err != nil {
		return nil, err
	}
	sy.scheme = sy.mcsSchemes[mcsapi.V1beta1]
	if sy.mgr, err = sy.newManager(); err != nil {
		return nil, err
	}
	if sy.metrics, err = registerMetrics(reg, sy.store); err != nil {
		return nil, err
	}
	sy.set, err = membership.NewSet(s.ClustersetConfig, cfg, membership.Options{
		Scheme: sy.scheme, MCSSchemes: sy.mcsSchemes, ConfigureCache: sy.configureCache, ReadsPublications: sy.readsPublications,
		Heartbeat: sy.heartbeats.Of, PublicationsLeftOut: sy.heartbeats.LeftOut, Registerer: reg,
		QPS: float32(s.KubeAPIQPS), Burst: s.KubeAPIBurst, Required: sy.local, Credentials: sy.credentials,
		Engage: sy.engage, Departed: sy.departed, Changed: sy.store.AnnounceAll, ControllersHung: sy.exit,
	})
	if err != nil {
		return nil, err
	}
	if err := sy.mgr.Add(sy.set); err != nil {
		return nil, err
	}
	if err := sy.mgr.Add(manager.RunnableFunc(sy.followReaders)); err != nil {
		return nil, err
	}
	if s.ProbeAddr != "0" {
		if err := sy.mgr.Add(sy.probes()); err != nil {
			return nil, err
		}
	}
	return sy, nil
}

// Start runs the process until ctx ends, or until something must end it
// (exit): then it stops the manager and returns why.
func (sy *Syncer) Start(ctx context.Context) error {
	ctrl.Log.Info("Starting", "clusterset", sy.cfg.Clusterset, "members", sy.set.IDs(), "localCluster", sy.local, "hub", sy.cfg.Hub != nil)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case err := <-sy.fatal:
			cancel(err)
		case <-ctx.Done():
		}
	}()
	err := sy.mgr.Start(ctx)
	if cause := context.Cause(ctx); errors.Is(cause, membership.ErrControllersHung) {
		return errors.Join(cause, err)
	}
	return err
}

// exit ends the process with err (the first such error; later ones are
// dropped): Start returns it, and main exits 1.
func (sy *Syncer) exit(err error) {
	select {
	case sy.fatal <- err:
	default:
	}
}

// newManager builds the manager: metrics, pprof and leader election. Its
// own client is never used (every client is a member's): it gets the
// Lease's cluster when there is one, else an address that is never
// dialled.
func (sy *Syncer) newManager() (manager.Manager, error) {
	leaseHome, err := leaderElectionConfig(sy.settings, sy.cfg)
	if err != nil {
		return nil, ConfigError{err}
	}
	mgr, err := ctrl.NewManager(cmp.Or(leaseHome, &rest.Config{Host: "https://mcs-syncer.invalid"}), manager.Options{
		Scheme:                  sy.scheme,
		Metrics:                 metricsserver.Options{BindAddress: sy.settings.MetricsAddr},
		HealthProbeBindAddress:  "0", // membership.ProbeServer, which says why it is not ready
		PprofBindAddress:        sy.settings.PprofAddr,
		LeaderElection:          sy.settings.LeaderElect,
		LeaderElectionID:        "mcs-syncer-" + sy.cfg.Clusterset,
		LeaderElectionNamespace: sy.settings.LeaderElectNamespace,
		// The process exits once the manager has stopped (its leader
		// runnables first), so the Lease is released on the way out: a
		// successor (a restart, a rolling upgrade's new pod) leads at once
		// instead of waiting out the Lease (it waited 17 s in the e2e).
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	return mgr, nil
}

// probes is the server of /healthz and /readyz.
func (sy *Syncer) probes() *membership.ProbeServer {
	probes := &membership.ProbeServer{Addr: sy.settings.ProbeAddr, Set: sy.set, Cluster: string(sy.local)}
	if sy.local != "" {
		probes.Publishing = sy.published.Problem
	}
	if sy.settings.LeaderElect {
		// Without leader election there is no standby: until the
		// members are engaged, the process is not ready.
		probes.Leading = func() bool {
			select {
			case <-sy.mgr.Elected():
				return true
			default:
				return false
			}
		}
	}
	return probes
}

// writesInto tells the members mcs-syncer imports into and whose
// ServiceExports' status it writes: all in central mode, else its own.
func (sy *Syncer) writesInto(id clusterset.ClusterID) bool { return sy.local == "" || id == sy.local }

// readsPublications tells the members read through what they publish (in
// their own API server, or in the hub): in per-cluster mode, the other
// members, never through their Services and EndpointSlices. Central mode
// reads every member itself, as each member's own mcs-syncer does.
func (sy *Syncer) readsPublications(id clusterset.ClusterID) bool {
	return sy.local != "" && id != sy.local
}

// configureCache sets up member id's cache for what runs there.
func (sy *Syncer) configureCache(id clusterset.ClusterID, o *cache.Options) {
	if !sy.readsPublications(id) {
		// Only where the export watcher runs: a cache resolves the
		// resources it is configured for when it is built, and a hub
		// served by a generic control plane (KEP-4080) has no
		// EndpointSlices (every member read through it failed with "no
		// matches for kind EndpointSlice").
		export.ConfigureCache(o, sy.exportedNames.of(id))
	}
	if sy.local != "" {
		// The publisher's view of its own publications, a reader's of
		// one member's, or (id "") the view of every member's in the
		// hub that the readers of all members share.
		publish.ConfigureCache(o, sy.cfg.PublicationNamespace, id)
	}
}

// engage returns what runs while member id is engaged (see the package
// doc).
func (sy *Syncer) engage(id clusterset.ClusterID, cl cluster.Cluster) ([]func(context.Context) error, error) {
	if sy.readsPublications(id) {
		r, err := publish.NewReader(cl, id, sy.store, publish.ReaderOptions{
			Heartbeats: sy.heartbeats, Namespaces: sy.cfg.Namespaces, MaxObjects: sy.settings.MaxPublicationsPerMember,
			MaxBytes: sy.settings.MaxPublicationBytesPerMember, Group: sy.metrics.readers,
		})
		if err != nil {
			return nil, err
		}
		return []func(context.Context) error{r.Start}, nil
	}
	s := sy.settings
	w, err := export.New(cl, export.Options{
		Cluster: id, Store: sy.store, Feedback: sy.feedback, WriteStatus: sy.writesInto(id), Recorder: plumbing.NonBlockingRecorder(cl.GetEventRecorder("mcs-syncer")),
		Membership: sy.set, Workers: s.ExportSyncs, Namespaces: sy.cfg.Namespaces, ExportedNames: sy.exportedNames.of(id),
		Metrics: sy.metrics.exports,
	})
	if err != nil {
		return nil, fmt.Errorf("export watcher: %w", err)
	}
	if !sy.writesInto(id) {
		return []func(context.Context) error{w.Start}, nil
	}
	c, err := imports.New(cl, imports.Options{
		Consumer: id, Store: sy.store, Feedback: sy.feedback, Membership: sy.set, ManagedBy: s.ManagedBy,
		MaxEndpointsPerSlice: s.MaxEndpointsPerSlice, UnreachableGrace: s.UnreachableGrace, Metrics: sy.metrics.imports,
		Workers: s.ImportSyncs, AddressRanges: sy.cfg.AddressRanges,
	})
	if err != nil {
		return nil, fmt.Errorf("import controller: %w", err)
	}
	runs := []func(context.Context) error{w.Start, c.Start}
	if sy.local == "" {
		return runs, nil
	}
	publishing, err := sy.publisher(cl)
	if err != nil {
		return nil, err
	}
	return append(runs, publishing...), nil
}

// departed forgets a member that left the config: its endpoints leave
// every import at once, no grace; and, where this process wrote into it,
// what it wrote there is removed once the departure has settled, unless
// its cluster is (again) a member.
func (sy *Syncer) departed(d membership.Departure) {
	sy.store.RemoveCluster(d.ID)
	sy.feedback.ForgetConsumer(d.ID)
	sy.heartbeats.Forget(d.ID)
	if !sy.writesInto(d.ID) || d.Client == nil {
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
			err := errors.Join(imports.Withdraw(d.Context, d.Client, sy.settings.ManagedBy), export.ClearStatus(d.Context, d.Client))
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
