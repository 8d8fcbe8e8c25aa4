package clusterset

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// MembersOptions configure NewMembers.
type MembersOptions struct {
	// Scheme of every member's client and cache. Required.
	Scheme *runtime.Scheme
	// ConfigureCache, if set, adjusts each member's cache options (the
	// export watcher selects which EndpointSlices it caches).
	ConfigureCache func(*cache.Options)
	// Registerer receives mcs_syncer_member_connected{cluster}; nil means
	// none.
	Registerer prometheus.Registerer
	// QPS and Burst limit each member's client (rest.Config's fields of the
	// same names): zero keeps client-go's defaults (5 and 10), a negative
	// QPS removes the client-side limit.
	QPS   float32
	Burst int
	// ProbeInterval is how often a disconnected member is probed until it
	// answers again (default 2s, doubling up to 10s).
	ProbeInterval time.Duration
	// HealthInterval is how often a connected member is probed (default
	// 10s). A failed watch triggers a probe at once; the periodic probe
	// catches what watches do not report: client-go retries a refused
	// connection inside its reflectors without calling the watch error
	// handler, so a member whose API server is gone can look healthy to its
	// informers for as long as it stays gone.
	HealthInterval time.Duration
}

// probeTimeout bounds one /readyz probe of a member.
const probeTimeout = 5 * time.Second

// Members holds one controller-runtime cluster.Cluster (client and cache)
// per member, and each member's connection state. Add it to a manager:
// the clusters start and stop with it.
type Members struct {
	ids      []ClusterID
	clusters map[ClusterID]cluster.Cluster
	probes   map[ClusterID]*connection
	gauge    *prometheus.GaugeVec
	interval time.Duration
	health   time.Duration

	mu        sync.Mutex
	listeners []func(ClusterID, bool)
}

// connection is one member's connection state.
type connection struct {
	mu        sync.Mutex
	connected bool
	since     time.Time
	// lost is signalled when a watch fails, to start probing.
	lost  chan struct{}
	probe func(context.Context) error
}

// NewMembers creates (but does not start) a cluster.Cluster per member of
// cfg. Every member starts disconnected until it first answers.
func NewMembers(cfg *Config, opts MembersOptions) (*Members, error) {
	if opts.Scheme == nil {
		return nil, errors.New("members: scheme is required")
	}
	m := &Members{
		clusters: map[ClusterID]cluster.Cluster{},
		probes:   map[ClusterID]*connection{},
		interval: opts.ProbeInterval,
		health:   opts.HealthInterval,
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcs_syncer_member_connected",
			Help: "1 while mcs-syncer reaches the member cluster's API server, 0 otherwise.",
		}, []string{"cluster"}),
	}
	if m.interval <= 0 {
		m.interval = 2 * time.Second
	}
	if m.health <= 0 {
		m.health = 10 * time.Second
	}
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(m.gauge); err != nil {
			return nil, fmt.Errorf("members: register metric: %w", err)
		}
	}
	now := time.Now()
	for i := range cfg.Members {
		member := &cfg.Members[i]
		rc, err := member.RESTConfig()
		if err != nil {
			return nil, err
		}
		rc.QPS, rc.Burst = opts.QPS, opts.Burst
		conn := &connection{since: now, lost: make(chan struct{}, 1)}
		id := member.ID
		cl, err := cluster.New(rc, func(o *cluster.Options) {
			o.Scheme = opts.Scheme
			// What mcs-syncer never reads stays out of memory.
			o.Cache.DefaultTransform = StripUnread
			if opts.ConfigureCache != nil {
				opts.ConfigureCache(&o.Cache)
			}
			o.Cache.DefaultWatchErrorHandler = func(ctx context.Context, r *toolscache.Reflector, err error) {
				m.watchFailed(ctx, id, err)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", id, err)
		}
		dc, err := discovery.NewDiscoveryClientForConfig(rc)
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", id, err)
		}
		conn.probe = func(ctx context.Context) error {
			// A bounded probe: a request on a connection to a server that
			// died can otherwise wait for HTTP/2's ping timeouts (seen: two
			// minutes before a second outage was noticed).
			ctx, cancel := context.WithTimeout(ctx, probeTimeout)
			defer cancel()
			_, err := dc.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			return err
		}
		m.ids = append(m.ids, id)
		m.clusters[id] = cl
		m.probes[id] = conn
		m.gauge.WithLabelValues(string(id)).Set(0)
	}
	return m, nil
}

// IDs returns the members' IDs in the config's order.
func (m *Members) IDs() []ClusterID { return m.ids }

// Cluster returns a member's cluster.Cluster, or nil.
func (m *Members) Cluster(id ClusterID) cluster.Cluster { return m.clusters[id] }

// Connected reports whether a member's API server answers, and since when
// that is so.
func (m *Members) Connected(id ClusterID) (connected bool, since time.Time) {
	c, ok := m.probes[id]
	if !ok {
		return false, time.Time{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.connected, c.since
}

// OnChange registers f to be called (from a goroutine of Members) whenever
// a member connects or disconnects.
func (m *Members) OnChange(f func(id ClusterID, connected bool)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.listeners = append(m.listeners, f)
}

// AddTo adds every member's cluster, and the connection prober, to mgr.
func (m *Members) AddTo(mgr manager.Manager) error {
	for _, id := range m.ids {
		if err := mgr.Add(m.clusters[id]); err != nil {
			return fmt.Errorf("member %s: %w", id, err)
		}
	}
	return mgr.Add(manager.RunnableFunc(m.run))
}

// run keeps every member's connection state until ctx ends: probing a
// disconnected member with backoff until it answers, a connected one every
// HealthInterval and whenever one of its watches fails.
func (m *Members) run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, id := range m.ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.watch(ctx, id)
		}()
	}
	wg.Wait()
	return nil
}

func (m *Members) watch(ctx context.Context, id ClusterID) {
	c := m.probes[id]
	logger := log.FromContext(ctx).WithValues("cluster", id)
	for {
		// Probe until the member answers, backing off up to 10 s: a member
		// that is back should be noticed within seconds, and one probe every
		// 10 s of an absent member costs nothing. (A wait.Backoff with a Cap
		// would stop retrying once the cap is reached; that once marked an
		// absent member connected.)
		for delay := m.interval; ; delay = min(2*delay, max(m.interval, 10*time.Second)) {
			err := c.probe(ctx)
			if err == nil {
				break
			}
			logger.V(4).Info("Member not reachable", "err", err.Error())
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
		}
		m.set(ctx, id, true)
		// Connected: probe now and then, and at once when a watch fails.
		for connected := true; connected; {
			timer := time.NewTimer(m.health)
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-c.lost:
			case <-timer.C:
			}
			timer.Stop()
			if err := c.probe(ctx); err != nil && ctx.Err() == nil {
				logger.V(2).Info("Member stopped answering", "err", err.Error())
				connected = false
			}
		}
		m.set(ctx, id, false)
	}
}

// watchFailed is the member caches' watch error handler: a failure to
// reach the API server triggers a probe, which decides.
func (m *Members) watchFailed(ctx context.Context, id ClusterID, err error) {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return // shutting down
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return // the API server answered (an expired resourceVersion, a refusal): it is reachable
	}
	log.FromContext(ctx).V(2).Info("Watch of member failed", "cluster", id, "err", err.Error())
	c := m.probes[id]
	select {
	case c.lost <- struct{}{}:
	default:
	}
}

func (m *Members) set(ctx context.Context, id ClusterID, connected bool) {
	c := m.probes[id]
	c.mu.Lock()
	changed := c.connected != connected
	if changed {
		c.connected = connected
		c.since = time.Now()
	}
	c.mu.Unlock()
	if !changed {
		return
	}
	value := 0.0
	if connected {
		value = 1
	}
	m.gauge.WithLabelValues(string(id)).Set(value)
	log.FromContext(ctx).Info("Member connection changed", "cluster", id, "connected", connected)
	m.mu.Lock()
	listeners := append([]func(ClusterID, bool){}, m.listeners...)
	m.mu.Unlock()
	for _, f := range listeners {
		f(id, connected)
	}
}
