package membership

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/mcsapi"
	"github.com/mcs-syncer/mcs-syncer/internal/notify"
	"github.com/mcs-syncer/mcs-syncer/internal/plumbing"
)

// deps is what a member needs of its Set: the settings, where it reports,
// and the seams that the unit tests replace (the cluster factory and the
// health check).
type deps struct {
	opts    Options
	metrics *metrics
	// changed is called when a member becomes connected or disconnected.
	changed func()
	// states is notified at each change of a member's state (Set.Changes).
	states *notify.Signal
	// identified is called when a member's cluster identity is first known.
	identified func(id clusterset.ClusterID, uid types.UID)
	// newCluster builds a member's client and cache for the version of the
	// API it is engaged on (Options.schemeFor: the MCS API's, or for a
	// member read through its publications theirs, which Scheme speaks);
	// onWatchError gets every failed list or watch of the cache.
	newCluster func(id clusterset.ClusterID, api schema.GroupVersion, rc *rest.Config, onWatchError func(context.Context, error)) (cluster.Cluster, error)
	// mcsAPI is the MCS API as members must serve it (mcsAPIOf).
	mcsAPI requiredAPI
	// newProber returns a member's health check, which asks for api.
	newProber func(rc *rest.Config, api requiredAPI) (prober, error)
	// stopTimeout bounds the wait for a disengaged member's controllers
	// (StopTimeout).
	stopTimeout time.Duration
	// processDone is closed when the Set's Start ends (nil: ctx of the
	// member's engagement stands for it).
	processDone func() <-chan struct{}
	// failingLimit is how long a member's cache may fail before it is
	// disengaged (failureStreak).
	failingLimit time.Duration
	// hubs are the connections shared by the members read through a hub.
	hubs *hubs
	// clusterset is the clusterset's name, which a member's ClusterProperty
	// must not contradict.
	clusterset string
}

// prober asks a member's API server whether the member can be engaged.
type prober interface {
	// probe returns Engaged when it can be, else the member's state and why.
	probe(ctx context.Context) (State, error)
	// identity returns the UID of the cluster's kube-system namespace (the
	// cluster's identity, as KEP-2149 recommends), or "" when it cannot be
	// read: then the cluster is known by its API server's address only.
	identity(ctx context.Context) types.UID
	// claims reads what the cluster says of itself (KEP-2149).
	claims(ctx context.Context) (claims, error)
	// served is the version of the API it needs that the last successful
	// probe found served (the preferred, when it serves more than one).
	served() schema.GroupVersion
}

// member is one member's lifecycle.
type member struct {
	deps   *deps
	config Member
	print  [32]byte
	cancel context.CancelFunc
	done   chan struct{}

	mu sync.Mutex
	// host is the API server's address in the member's settings ("" while
	// they cannot be read): how a member not identified yet is recognised.
	// Read when the member is made, and again on each connection: a
	// kubeconfig caught half written (an editor, a test that rewrote it in
	// place) left a member that then engaged without an address, and its
	// rename was taken for a departure.
	host   string
	status Status
	// upSince is when the member was last engaged (zero while it is not);
	// lastUp is when it last stopped being engaged, or when it joined: the
	// import side's grace counts from it, and a failure that repeats
	// (forbidden, syncing, forbidden) does not move it.
	upSince, lastUp time.Time
	// engaged says whether the member was ever engaged; uid is its
	// cluster's identity once read.
	engaged bool
	// settled says whether the member ever came out of its first
	// connecting and syncing: engaged, or refused for a reason.
	settled bool
	uid     types.UID
	// api is the version of the API the member was last engaged on (the
	// MCS API's, or its publications').
	api schema.GroupVersion
}

func newMember(d *deps, config Member, now time.Time) *member {
	m := &member{deps: d, config: config, print: config.fingerprint(), done: make(chan struct{}),
		status: Status{State: Connecting, Since: now}, lastUp: now}
	if rc, err := config.RESTConfig(); err == nil && !config.ThroughHub {
		m.host = rc.Host // the hub's address says nothing of the member's cluster
	}
	return m
}

func (m *member) id() clusterset.ClusterID { return m.config.ID }

func (m *member) getStatus() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.status
}

// firstSync reports whether the member is still in its first connecting
// and syncing since it joined.
func (m *member) firstSync() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.settled
}

// health is the member's health as far as its own state tells: a member
// read through a hub that cannot be read is held, not down.
func (m *member) health() clusterset.Health {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.status.State == Engaged:
		return clusterset.Health{Up: true, Since: m.upSince, Answering: true}
	case m.config.ThroughHub:
		return clusterset.Health{Held: true, Since: m.lastUp, Answering: m.status.State.connected()}
	}
	return clusterset.Health{Since: m.lastUp, Answering: m.status.State.connected()}
}

// apiVersion is the version of the API the member was last engaged on.
func (m *member) apiVersion() schema.GroupVersion {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.api
}

// mcsAPI names the version of the MCS API the member was last engaged on,
// "" for a member read through its publications or never engaged.
func (m *member) mcsAPI() string {
	if api := m.apiVersion(); api.Group == mcsapi.V1beta1.Group {
		return api.String()
	}
	return ""
}

// identity returns the member's cluster identity, as far as it is known,
// and whether it was ever engaged.
func (m *member) identity() (uid types.UID, everEngaged bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.uid, m.engaged
}

// sameCluster reports whether m's cluster is the one with identity uid
// (when both are known) or API server address host.
func (m *member) sameCluster(uid types.UID, host string) bool {
	mine, _ := m.identity()
	if mine != "" && uid != "" {
		return mine == uid
	}
	return host != "" && m.address() == host
}

// address is the API server's address in the member's settings, "" while
// they cannot be read (and for a member read through a hub, whose address
// says nothing of the member's cluster).
func (m *member) address() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.host
}

// markTimes records, for a change from state was to state at now, when
// the member came up or went down, and whether it was ever engaged or
// settled; m.mu is held.
func (m *member) markTimes(was, state State, now time.Time) {
	switch {
	case state == Engaged && was != Engaged:
		m.upSince = now
	case was == Engaged && state != Engaged:
		m.upSince, m.lastUp = time.Time{}, now
	}
	if state == Engaged {
		m.engaged = true
	}
	if state != Connecting && state != Syncing {
		m.settled = true
	}
}

// setState records a new state; a change of health is announced.
func (m *member) setState(ctx context.Context, state State, cause error) {
	now := time.Now()
	m.mu.Lock()
	old := m.status
	status := Status{State: state, Since: old.Since}
	if cause != nil {
		status.Cause = cause.Error()
	}
	if old.State != state {
		status.Since = now
	}
	// What the Set's health reports of the member changes when it starts
	// or stops answering, or being engaged.
	flipped := old.State.connected() != state.connected() || (old.State == Engaged) != (state == Engaged)
	m.markTimes(old.State, state, now)
	m.status = status
	m.mu.Unlock()
	if old.State == state && old.Cause == status.Cause {
		return
	}
	m.announce(ctx, old, status, cause != nil, flipped)
}

// announce tells of a change of the member's status from old: a log line,
// the state metric, the Set's Changes (a new state), and (flipped: the
// Set's health of the member changed) the Set's changed hook.
func (m *member) announce(ctx context.Context, old, status Status, failed, flipped bool) {
	logger := log.FromContext(ctx).WithValues("cluster", m.id(), "state", status.State)
	switch {
	case failed && old.Cause != status.Cause:
		logger.Info("Member cannot be engaged; retrying", "cause", status.Cause)
	case old.State != status.State:
		logger.Info("Member state changed", "was", old.State)
	}
	m.deps.metrics.setState(m.id(), status.State)
	if old.State != status.State {
		m.deps.states.Notify()
	}
	if flipped && m.deps.changed != nil {
		m.deps.changed()
	}
}

// run engages the member, again and again, until ctx ends. The waits
// between tries double up to MaxRetryInterval, with jitter, so that members
// that went away together are not all tried at the same instant.
func (m *member) run(ctx context.Context) {
	defer close(m.done)
	delay := m.deps.opts.RetryInterval
	for ctx.Err() == nil {
		if m.engage(ctx) {
			delay = m.deps.opts.RetryInterval // it was up: look again at once
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait.Jitter(delay, retryJitter)):
		}
		delay = min(2*delay, m.deps.opts.MaxRetryInterval)
	}
}

// retryJitter is the largest share of a retry's wait added at random.
const retryJitter = 0.25

// restConfig reads the member's client config anew, its credential plugin
// (if it has one) run with a deadline (internal/credentials).
func (m *member) restConfig() (*rest.Config, error) {
	rc, err := m.config.RESTConfig()
	if err != nil {
		return nil, err
	}
	return m.deps.opts.Credentials.Configure(rc)
}

// connect reads the member's kubeconfig and probes its API server; on
// failure the member's state says why. The first probe that succeeds also
// reads the cluster's identity.
func (m *member) connect(ctx context.Context) (*rest.Config, prober, bool) {
	rc, err := m.restConfig()
	if err != nil {
		m.setState(ctx, BadConfig, err)
		return nil, nil, false
	}
	if !m.config.ThroughHub {
		m.mu.Lock()
		m.host = rc.Host
		m.mu.Unlock()
	}
	rc.QPS, rc.Burst = m.deps.opts.QPS, m.deps.opts.Burst
	api := m.deps.mcsAPI
	if m.deps.opts.ReadsPublications != nil && m.deps.opts.ReadsPublications(m.id()) {
		api = publicationAPI
	}
	var check prober
	if m.config.ThroughHub {
		check, err = m.deps.hubs.prober(m.config, rc, api)
	} else {
		check, err = m.deps.newProber(rc, api)
	}
	if err != nil {
		m.setState(ctx, BadConfig, err)
		return nil, nil, false
	}
	if state, err := check.probe(ctx); err != nil {
		log.FromContext(ctx).V(1).Info("Member probe failed", "cluster", m.id(), "err", err.Error())
		m.setState(ctx, state, err)
		return nil, nil, false
	}
	// A member read through the hub is checked by its own mcs-syncer: the
	// hub's properties are the hub's.
	if !m.config.ThroughHub {
		c, err := check.claims(ctx)
		if err != nil {
			m.setState(ctx, Unreachable, err)
			return nil, nil, false
		}
		if err := c.contradiction(m.id(), m.deps.clusterset); err != nil {
			m.setState(ctx, WrongCluster, err)
			return nil, nil, false
		}
	}
	if uid, _ := m.identity(); uid == "" && !m.config.ThroughHub {
		if uid = check.identity(ctx); uid != "" {
			m.mu.Lock()
			m.uid = uid
			m.mu.Unlock()
			if m.deps.identified != nil {
				m.deps.identified(m.id(), uid)
			}
		}
	}
	return rc, check, true
}

// newCluster builds a real client and cache of a member (deps.newCluster).
func newCluster(opts Options) func(clusterset.ClusterID, schema.GroupVersion, *rest.Config, func(context.Context, error)) (cluster.Cluster, error) {
	return func(id clusterset.ClusterID, api schema.GroupVersion, rc *rest.Config, onWatchError func(context.Context, error)) (cluster.Cluster, error) {
		return cluster.New(reportingUnreadyStorage(rc, onWatchError), func(o *cluster.Options) {
			o.Scheme = opts.schemeFor(api)
			o.Cache.DefaultTransform = plumbing.StripUnread
			if opts.ConfigureCache != nil {
				opts.ConfigureCache(id, &o.Cache)
			}
			o.Cache.DefaultWatchErrorHandler = func(ctx context.Context, _ *toolscache.Reflector, err error) {
				onWatchError(ctx, err)
			}
		})
	}
}
