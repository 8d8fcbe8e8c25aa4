package membership

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/log"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/pkg/clusterset"
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
	// MissingCRDs: it answers but does not serve the MCS v1beta1 API.
	MissingCRDs State = "missing-crds"
	// Forbidden: it refuses a list or watch mcs-syncer needs.
	Forbidden State = "forbidden"
	// Failed: mcs-syncer could not set up its controllers for it.
	Failed State = "failed"
	// Syncing: it answers; its cache is being built.
	Syncing State = "syncing"
	// Engaged: its cache is synced and its controllers run.
	Engaged State = "engaged"
)

// states are all States, for the one-hot state metric.
var states = []State{Connecting, BadConfig, Unreachable, MissingCRDs, Forbidden, Failed, Syncing, Engaged}

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

// member is one member's lifecycle.
type member struct {
	set    *Set
	config Member
	print  [32]byte
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	status Status
	// connectedSince is when the member last became connected or
	// disconnected (the import side's grace counts from it).
	connectedSince time.Time
}

func newMember(s *Set, config Member, now time.Time) *member {
	return &member{set: s, config: config, print: config.fingerprint(), done: make(chan struct{}),
		status: Status{State: Connecting, Since: now}, connectedSince: now}
}

func (m *member) id() clusterset.ClusterID { return m.config.ID }

func (m *member) getStatus() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.status
}

func (m *member) connected() (bool, time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.status.State.connected(), m.connectedSince
}

// setState records a new state; a change of connectedness is announced.
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
	flipped := old.State.connected() != state.connected()
	if flipped {
		m.connectedSince = now
	}
	m.status = status
	m.mu.Unlock()
	if old.State == state && old.Cause == status.Cause {
		return
	}
	logger := log.FromContext(ctx).WithValues("cluster", m.id(), "state", state)
	switch {
	case cause != nil && old.Cause != status.Cause:
		logger.Info("Member cannot be engaged; retrying", "cause", status.Cause)
	case old.State != state:
		logger.Info("Member state changed", "was", old.State)
	}
	m.set.metrics.setState(m.id(), state)
	if flipped {
		m.set.changed()
	}
}

// run engages the member, again and again, until ctx ends.
func (m *member) run(ctx context.Context) {
	defer close(m.done)
	delay := m.set.opts.RetryInterval
	for ctx.Err() == nil {
		if m.engage(ctx) {
			delay = m.set.opts.RetryInterval // it was up: look again at once
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, m.set.opts.MaxRetryInterval)
	}
}

// connect reads the member's kubeconfig and probes its API server; on
// failure the member's state says why.
func (m *member) connect(ctx context.Context) (*rest.Config, *healthCheck, bool) {
	rc, err := m.config.RESTConfig()
	if err != nil {
		m.setState(ctx, BadConfig, err)
		return nil, nil, false
	}
	rc.QPS, rc.Burst = m.set.opts.QPS, m.set.opts.Burst
	check, err := newHealthCheck(rc)
	if err != nil {
		m.setState(ctx, BadConfig, err)
		return nil, nil, false
	}
	if state, err := check.run(ctx); err != nil {
		log.FromContext(ctx).V(1).Info("Member probe failed", "cluster", m.id(), "err", err.Error())
		m.setState(ctx, state, err)
		return nil, nil, false
	}
	return rc, check, true
}

// newCluster builds a new client and cache of the member whose failed
// lists and watches are sorted into refused and lost (see watchFailed).
func (m *member) newCluster(rc *rest.Config, refused chan<- error, lost chan<- struct{}) (cluster.Cluster, error) {
	return cluster.New(rc, func(o *cluster.Options) {
		o.Scheme = m.set.opts.Scheme
		o.Cache.DefaultTransform = clusterset.StripUnread
		if m.set.opts.ConfigureCache != nil {
			m.set.opts.ConfigureCache(&o.Cache)
		}
		o.Cache.DefaultWatchErrorHandler = func(ctx context.Context, r *toolscache.Reflector, err error) {
			watchFailed(ctx, err, refused, lost)
		}
	})
}

// engage connects to the member, builds its cache, runs its controllers
// and watches its health until it fails or ctx ends. It reports whether
// the member was engaged at all.
//
// It stays one function of ~90 lines (its complexity is the one select
// loop that supervises the engagement) on purpose: the steps after the
// cache is built share the engaged context, the channels of refusals,
// failures and sync, and the deferred wait for the controllers; split up,
// each part would take all of them.
func (m *member) engage(ctx context.Context) (wasEngaged bool) {
	rc, check, ok := m.connect(ctx)
	if !ok {
		return false
	}
	engaged, stop := context.WithCancel(ctx)
	defer stop()
	// refused receives the API server's refusals of a list or watch (403,
	// or 404 for a resource it stopped serving); lost a watch failure that
	// calls for a probe.
	refused := make(chan error, 1)
	lost := make(chan struct{}, 1)
	cl, err := m.newCluster(rc, refused, lost)
	if err != nil {
		m.setState(ctx, Failed, err)
		return false
	}
	runnables, err := m.set.opts.Engage(m.id(), cl)
	if err != nil {
		m.setState(ctx, Failed, err)
		return false
	}
	m.setState(ctx, Syncing, nil)

	// The controllers are waited for when the member is disengaged, so that
	// the next engagement's never run beside them. Its cache is not: an
	// informer whose request hangs on a dead connection took ~10 s to stop,
	// and the member's return would wait for it.
	var controllers sync.WaitGroup
	exited := make(chan error, len(runnables)+1)
	run := func(f func(context.Context) error) {
		if err := f(engaged); err != nil && engaged.Err() == nil {
			exited <- err
		}
	}
	defer func() {
		stop()
		if !waitTimeout(&controllers, stopTimeout) {
			// The stacks say which worker did not return (a hang seen
			// when SIGTERM came right after the controllers started).
			log.FromContext(ctx).Info("Member's controllers still stopping; going on", "cluster", m.id(), "workerStacks", workerStacks())
		}
	}()
	go run(cl.Start)
	synced := make(chan bool, 1)
	go func() { synced <- cl.GetCache().WaitForCacheSync(engaged) }()

	// Until the cache has synced, and then while engaged: probe now and
	// then, at once when a watch fails; a probe that fails, a refusal or a
	// controller that ends disengages the member. (A member that goes away
	// while its cache syncs would otherwise be waited for forever.)
	for {
		interval := m.set.opts.HealthInterval
		if synced != nil {
			interval = min(interval, 2*time.Second)
		}
		timer := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return wasEngaged
		case err := <-refused:
			timer.Stop()
			m.setState(ctx, refusal(err), err)
			return wasEngaged
		case err := <-exited:
			timer.Stop()
			m.setState(ctx, Failed, err)
			return wasEngaged
		case ok := <-synced:
			timer.Stop()
			if !ok {
				return wasEngaged // stopping
			}
			synced = nil
			for _, r := range runnables {
				controllers.Add(1)
				go func() {
					defer controllers.Done()
					run(r)
				}()
			}
			m.setState(ctx, Engaged, nil)
			wasEngaged = true
			continue
		case <-lost:
		case <-timer.C:
		}
		timer.Stop()
		if state, err := check.run(ctx); err != nil && ctx.Err() == nil {
			m.setState(ctx, state, err)
			return wasEngaged
		}
	}
}

// watchFailed sorts a failed list or watch of the member's cache: a
// refusal disengages the member; a failure to reach it calls for a probe.
func watchFailed(ctx context.Context, err error, refused chan<- error, lost chan<- struct{}) {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return // stopping
	}
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err) {
		select {
		case refused <- err:
		default:
		}
		return
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return // the API server answered (an expired resourceVersion): it is reachable
	}
	select {
	case lost <- struct{}{}:
	default:
	}
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

// healthCheck asks a member whether it can be engaged.
type healthCheck struct {
	rest      rest.Interface
	discovery discovery.DiscoveryInterface
}

func newHealthCheck(rc *rest.Config) (*healthCheck, error) {
	// A bounded request: one on a connection to a server that died can
	// otherwise wait for HTTP/2's ping timeouts (seen: two minutes).
	rc = rest.CopyConfig(rc)
	rc.Timeout = probeTimeout
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &healthCheck{rest: dc.RESTClient(), discovery: dc}, nil
}

// run probes the member's /readyz, then whether it serves the MCS API; on
// failure it returns the member's state and why.
func (h *healthCheck) run(ctx context.Context) (State, error) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if _, err := h.rest.Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		var status apierrors.APIStatus
		if errors.As(err, &status) && (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)) {
			return Forbidden, fmt.Errorf("probe /readyz: %w", err)
		}
		return Unreachable, fmt.Errorf("probe /readyz: %w", err)
	}
	resources, err := h.discovery.ServerResourcesForGroupVersion(mcsv1beta1.SchemeGroupVersion.String())
	if err != nil && !apierrors.IsNotFound(err) {
		return Unreachable, fmt.Errorf("discover %s: %w", mcsv1beta1.SchemeGroupVersion, err)
	}
	var missing []string
	for _, want := range []string{"serviceexports", "serviceimports"} {
		if resources == nil || !slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == want }) {
			missing = append(missing, want+"."+mcsv1beta1.GroupName)
		}
	}
	if len(missing) > 0 {
		return MissingCRDs, fmt.Errorf("the MCS API %s is not served: CRDs %v are missing (install sigs.k8s.io/mcs-api's config/crd)", mcsv1beta1.SchemeGroupVersion, missing)
	}
	return Engaged, nil
}
