package membership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/credentials"
	"github.com/mcs-syncer/mcs-syncer/internal/mcsapi"
	"github.com/mcs-syncer/mcs-syncer/internal/notify"
	"github.com/mcs-syncer/mcs-syncer/internal/plumbing"
)

// State is where a member is in its lifecycle.
type State string

const (
	// Connecting: not tried yet.
	Connecting State = "connecting"
	// BadConfig: its kubeconfig (or in-cluster config) cannot be read.
	BadConfig State = "config-error"
	// Unreachable: its API server does not answer.
	Unreachable State = "unreachable"
	// MissingCRDs: it answers but serves no version of the MCS API that
	// mcs-syncer speaks (or, for a member read through its publications,
	// not mcs-syncer's PublishedExports).
	MissingCRDs State = "missing-crds"
	// Forbidden: it refuses a list or watch mcs-syncer needs.
	Forbidden State = "forbidden"
	// WrongCluster: its ClusterProperties (KEP-2149) name another cluster
	// ID or another clusterset than the config: it is not engaged.
	WrongCluster State = "wrong-cluster"
	// Failed: mcs-syncer could not set up its controllers for it, or its
	// credential plugin gave no credentials (internal/credentials: it did
	// not return in time, or failed).
	Failed State = "failed"
	// Syncing: it answers; its cache is being built.
	Syncing State = "syncing"
	// Engaged: its cache is synced and its controllers run.
	Engaged State = "engaged"
)

// states are all States, for the one-hot state metric.
var states = []State{Connecting, BadConfig, Unreachable, MissingCRDs, Forbidden, WrongCluster, Failed, Syncing, Engaged}

// connected reports whether a member in state s answers.
func (s State) connected() bool { return s == Syncing || s == Engaged }

// Status is a member's state, since when it holds, and why (for the states
// that are problems).
type Status struct {
	State State
	Since time.Time
	Cause string
}

// probeTimeout bounds one probe of a member.
const probeTimeout = 5 * time.Second

// stopTimeout bounds the wait for a disengaged member's controllers to
// stop; past it they are left to finish in the background. It is shorter
// than the manager's graceful shutdown (30 s): a controller whose worker
// hangs must not turn a SIGTERM into a failed exit. (Seen in CI: a SIGTERM
// within a second of the controllers' start left one worker of a
// controller that had just started its workers running past 30 s.)
const stopTimeout = 15 * time.Second

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
	// stopTimeout bounds the wait for a disengaged member's controllers.
	stopTimeout time.Duration
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

// engage connects to the member, builds its cache, runs its controllers
// and watches its health until it fails or ctx ends. It reports whether
// the member was engaged at all.
func (m *member) engage(ctx context.Context) (wasEngaged bool) {
	rc, check, ok := m.connect(ctx)
	if !ok {
		return false
	}
	e, err := m.start(ctx, rc, check.served())
	if err != nil {
		m.setState(ctx, Failed, err)
		return false
	}
	defer e.stop(ctx)
	return e.supervise(ctx, check)
}

// engagement is one engagement of a member: its cache, its controllers,
// and what they report.
type engagement struct {
	m *member
	// api is the version of the API the member is engaged on (its probe's
	// served): a probe that finds another disengages it, to be engaged
	// anew on that one.
	api       schema.GroupVersion
	ctx       context.Context // ends when the member is disengaged
	cancel    context.CancelFunc
	runnables []func(context.Context) error
	// refused receives the API server's refusals of a list or watch (403,
	// or 404 for a resource it stopped serving); lost a watch failure that
	// calls for a probe; exited the error of a controller or cache that
	// ended; synced the outcome of the cache's first sync.
	refused chan error
	lost    chan struct{}
	// failing follows the cache's other failures (watchFailed).
	failing failureStreak
	exited  chan error
	synced  chan bool
	// controllers are waited for when the member is disengaged, so that
	// the next engagement's never run beside them. Its cache is not: an
	// informer whose request hangs on a dead connection took ~10 s to stop,
	// and the member's return would wait for it.
	controllers sync.WaitGroup
	// release lets go of the member's share of a hub's connection.
	release func()
}

// start builds the member's cache and what runs on it (Options.Engage),
// and starts the cache.
func (m *member) start(ctx context.Context, rc *rest.Config, api schema.GroupVersion) (*engagement, error) {
	m.mu.Lock()
	m.api = api
	m.mu.Unlock()
	e := &engagement{m: m, api: api, refused: make(chan error, 1), lost: make(chan struct{}, 1), synced: make(chan bool, 1)}
	e.ctx, e.cancel = context.WithCancel(ctx)
	onWatchError := func(ctx context.Context, err error) { watchFailed(ctx, err, e.refused, e.lost, &e.failing) }
	// The controllers' writes that the API server fails count as its
	// watches' failures do: a member whose every status write fails (a
	// conversion webhook that cannot be reached) is failed, not engaged.
	e.ctx = plumbing.WithFailureReporter(e.ctx, func(err error) { onWatchError(e.ctx, err) })
	var cl cluster.Cluster
	var err error
	e.release = func() {}
	if m.config.ThroughHub {
		cl, e.release, err = m.deps.hubs.attach(ctx, m.config, rc, onWatchError)
	} else {
		cl, err = m.deps.newCluster(m.id(), api, rc, onWatchError)
	}
	if err != nil {
		e.cancel()
		return nil, err
	}
	if e.runnables, err = m.deps.opts.Engage(m.id(), cl); err != nil {
		e.release()
		e.cancel()
		return nil, err
	}
	e.exited = make(chan error, len(e.runnables)+1)
	m.setState(ctx, Syncing, nil)
	go e.run(cl.Start)
	go func() { e.synced <- cl.GetCache().WaitForCacheSync(e.ctx) }()
	return e, nil
}

// run runs f until the member is disengaged; an error before then is
// reported.
func (e *engagement) run(f func(context.Context) error) {
	if err := f(e.ctx); err != nil && e.ctx.Err() == nil {
		e.exited <- err
	}
}

// stop disengages the member and waits (bounded) for its controllers.
func (e *engagement) stop(ctx context.Context) {
	e.cancel()
	defer e.release()
	if !waitTimeout(&e.controllers, e.m.deps.stopTimeout) {
		// The stacks say which worker did not return (a hang seen
		// when SIGTERM came right after the controllers started).
		log.FromContext(ctx).Info("Member's controllers still stopping; going on", "cluster", e.m.id(), "workerStacks", workerStacks())
	}
}

// supervise waits for the cache's first sync, then starts the controllers.
// Until the cache has synced, and then while engaged, it probes the member
// now and then, and at once when a watch fails; a probe that fails, a
// refusal or a controller that ends disengages it (a member that goes away
// while its cache syncs would otherwise be waited for forever). It reports
// whether the member was engaged.
func (e *engagement) supervise(ctx context.Context, check prober) (wasEngaged bool) {
	m := e.m
	synced := e.synced
	for {
		interval := m.deps.opts.HealthInterval
		if synced != nil {
			interval = min(interval, syncingProbeInterval)
		}
		timer := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return wasEngaged
		case err := <-e.refused:
			timer.Stop()
			e.refusedWith(ctx, check, err)
			return wasEngaged
		case err := <-e.exited:
			timer.Stop()
			m.setState(ctx, Failed, err)
			return wasEngaged
		case ok := <-synced:
			timer.Stop()
			if !ok {
				return wasEngaged // stopping
			}
			synced = nil
			for _, r := range e.runnables {
				e.controllers.Add(1)
				go func() {
					defer e.controllers.Done()
					e.run(r)
				}()
			}
			m.setState(ctx, Engaged, nil)
			wasEngaged = true
			continue
		case <-e.lost:
		case <-timer.C:
		}
		timer.Stop()
		if !e.stillEngaged(ctx, check) {
			return wasEngaged
		}
	}
}

// refusedWith sets the state of a member whose API server refused a list
// or watch with err. A resource no longer found may be served in another
// version now (its CRD replaced): that is no missing CRD.
func (e *engagement) refusedWith(ctx context.Context, check prober, err error) {
	if apierrors.IsNotFound(err) {
		if _, perr := check.probe(ctx); perr == nil && check.served() != e.api {
			e.m.setState(ctx, Connecting, e.apiChanged(check))
			return
		}
	}
	e.m.setState(ctx, refusal(err), err)
}

// stillEngaged probes the member: it stays engaged unless the probe fails,
// finds its API served in another version, or its cache has failed for
// too long (then its state says why).
func (e *engagement) stillEngaged(ctx context.Context, check prober) bool {
	state, err := check.probe(ctx)
	switch {
	case ctx.Err() != nil:
		return true // stopping: the caller sees ctx end
	case err != nil:
		e.m.setState(ctx, state, err)
		return false
	case check.served() != e.api:
		e.m.setState(ctx, Connecting, e.apiChanged(check))
		return false
	}
	if err := e.failing.over(time.Now(), e.m.deps.failingLimit); err != nil {
		e.m.setState(ctx, Failed, err)
		return false
	}
	return true
}

// apiChanged says why a member whose API server now serves the API it
// needs in another version than the one it is engaged on is engaged anew
// (a CRD upgraded or rolled back under a running mcs-syncer).
func (e *engagement) apiChanged(check prober) error {
	return fmt.Errorf("its API server now serves %s, no longer (only) %s: engaged anew on it", check.served(), e.api)
}

// syncingProbeInterval is how often a member whose cache is syncing is
// probed.
const syncingProbeInterval = 2 * time.Second

// watchFailed sorts a failed list or watch of the member's cache: a
// refusal disengages the member; an expired resourceVersion is the
// cache's to handle (it lists again); any other failure (the server
// unreachable, an error of the server's, an answer that cannot be
// decoded) is added to failing and calls for a probe.
func watchFailed(ctx context.Context, err error, refused chan<- error, lost chan<- struct{}, failing *failureStreak) {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return // stopping
	}
	if isRefusal(err) {
		select {
		case refused <- err:
		default:
		}
		return
	}
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return
	}
	failing.add(time.Now(), err)
	select {
	case lost <- struct{}{}:
	default:
	}
}

// failureStreak follows a member's cache failing to list or watch for
// another reason than a refusal. A cache that keeps failing for
// failingLimit (no pause of streakPause) is no view of the member, whatever its
// probe says (seen elsewhere: a CRD upgraded in place stopped a peer's
// export sync while its heartbeat went on, and the other clusters kept a
// view that was no longer true); the member is then disengaged, so that
// nothing runs as if it were read, its publisher's heartbeat least of
// all. A nil streak records nothing.
type failureStreak struct {
	mu          sync.Mutex
	first, last time.Time
	count       int
	err         error
}

const (
	// failingLimit is how long a cache may fail before its member is
	// disengaged: four heartbeat intervals, past the reflector's longest
	// backoff (30 s).
	failingLimit = time.Minute
	// streakPause ends a streak: client-go's reflector retries a failed
	// list or watch after 0.8 s, doubling up to 30 s, with as much jitter,
	// so the failures of a cache that keeps failing are never more than
	// 60 s apart; failures further apart are sporadic (a relist that
	// worked in between), not a streak.
	streakPause = 65 * time.Second
	// streakFailures is the fewest failures a streak has: a cache that
	// keeps failing retries five times in its first 30 s, while two
	// sporadic failures up to streakPause apart are no streak.
	streakFailures = 5
)

func (f *failureStreak) add(now time.Time, err error) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last.IsZero() || now.Sub(f.last) > streakPause {
		f.first, f.count = now, 0
	}
	f.last, f.err = now, err
	f.count++
}

// over returns why the member must be disengaged when by now its cache
// has failed for limit (and streakFailures times), nil otherwise.
func (f *failureStreak) over(now time.Time, limit time.Duration) error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last.IsZero() || now.Sub(f.last) > streakPause || now.Sub(f.first) < limit || f.count < streakFailures {
		return nil
	}
	return fmt.Errorf("its API server has failed mcs-syncer's lists, watches or writes %d times since %s (last: %w): no longer read as if it were", f.count, stamp(f.first), f.err)
}

// isRefusal tells whether a failed list or watch was the API server's
// refusal (403, 401, or 404 for a resource it stopped serving).
func isRefusal(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err)
}

// refusal is the state of a member that refused a list or watch.
func refusal(err error) State {
	if apierrors.IsNotFound(err) {
		return MissingCRDs
	}
	return Forbidden
}

// workerStacks returns the stacks of the goroutines that run a controller's
// worker or mcs-syncer's own code.
func workerStacks() string {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var stacks []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if (strings.Contains(g, "processNextWorkItem") || strings.Contains(g, "mcs-syncer/mcs-syncer/pkg/")) &&
			!strings.Contains(g, "membership.workerStacks") {
			stacks = append(stacks, g)
		}
	}
	return strings.Join(stacks, "\n\n")
}

func waitTimeout(wg *sync.WaitGroup, timeout time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// requiredAPI is an API a member must serve to be engaged.
type requiredAPI struct {
	// versions are the versions that do, the preferred first: the member
	// is engaged on the first it serves.
	versions  []schema.GroupVersion
	resources []string
	// what names it in messages; install says how to get it.
	what, install string
}

// mcsAPIOf is the MCS API as the members whose ServiceExports are read, or
// into which mcs-syncer imports, must serve it: in one of the versions
// opts has a scheme for.
func mcsAPIOf(opts Options) requiredAPI {
	api := requiredAPI{resources: mcsapi.Resources, what: "the MCS API", install: "install sigs.k8s.io/mcs-api's config/crd"}
	for _, gv := range mcsapi.Versions {
		if _, ok := opts.MCSSchemes[gv]; ok {
			api.versions = append(api.versions, gv)
		}
	}
	if len(api.versions) == 0 {
		gv, ok := mcsapi.Version(opts.Scheme)
		if !ok {
			gv = mcsapi.V1beta1
		}
		api.versions = []schema.GroupVersion{gv}
	}
	return api
}

// publicationAPI is read from the members (or the hub) whose publications
// are read.
var publicationAPI = requiredAPI{
	versions: []schema.GroupVersion{v1alpha1.GroupVersion}, resources: []string{v1alpha1.Resource},
	what: "mcs-syncer's publications", install: "install config/crd/mcs-syncer.io_publishedexports.yaml",
}

// healthCheck asks a member's API server whether it can be engaged.
type healthCheck struct {
	rest      rest.Interface
	discovery discovery.DiscoveryInterface
	api       requiredAPI

	mu      sync.Mutex
	version schema.GroupVersion // of the last probe that found the API served
}

func newHealthCheck(rc *rest.Config, api requiredAPI) (prober, error) {
	// A bounded request: one on a connection to a server that died can
	// otherwise wait for HTTP/2's ping timeouts (seen: two minutes).
	rc = rest.CopyConfig(rc)
	rc.Timeout = probeTimeout
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &healthCheck{rest: dc.RESTClient(), discovery: dc, api: api}, nil
}

// probe probes the member's /readyz, then whether it serves the API it
// needs, in which version; on failure it returns the member's state and
// why.
func (h *healthCheck) probe(ctx context.Context) (State, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	// Do, not DoRaw: DoRaw's error drops the API Status of a refusal
	// (seen: members logged forbidden with the cause "unknown" while the
	// hub's API server started and its RBAC roles were not loaded yet).
	if err := h.rest.Get().AbsPath("/readyz").Do(ctx).Error(); err != nil {
		var status apierrors.APIStatus
		var plugin *credentials.Error
		if errors.As(err, &plugin) {
			return Failed, plugin
		}
		if errors.As(err, &status) && (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)) {
			return Forbidden, fmt.Errorf("probe /readyz: %w", err)
		}
		return Unreachable, fmt.Errorf("probe /readyz: %w", err)
	}
	gv, err := mcsapi.FirstServed(h.discovery, h.api.resources, h.api.versions...)
	var missing *mcsapi.MissingError
	switch {
	case errors.As(err, &missing):
		return MissingCRDs, fmt.Errorf("%s is not served: %w (%s)", h.api.what, err, h.api.install)
	case err != nil:
		return Unreachable, err
	}
	h.mu.Lock()
	h.version = gv
	h.mu.Unlock()
	return Engaged, nil
}

// served is the version of the API the last successful probe found.
func (h *healthCheck) served() schema.GroupVersion {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.version
}

// identity reads the UID of the kube-system namespace (credentials that
// may not read it leave the cluster known by its address only).
func (h *healthCheck) identity(ctx context.Context) types.UID {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	raw, err := h.rest.Get().AbsPath("/api/v1/namespaces/kube-system").DoRaw(ctx)
	var ns corev1.Namespace
	if err != nil || json.Unmarshal(raw, &ns) != nil {
		return ""
	}
	return ns.UID
}
