package membership

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/mcsapi"
	"github.com/mcs-syncer/mcs-syncer/internal/notify"
	"github.com/mcs-syncer/mcs-syncer/internal/plumbing"
)

// The member's lifecycle against fakes: a prober whose answers the test
// sets, and a cluster whose cache syncs, and whose watches fail, when the
// test says. Each state transition takes milliseconds.

// fakeProber answers probes as the test sets it.
type fakeProber struct {
	mu     sync.Mutex
	state  State // Engaged: the probe succeeds
	err    error
	uid    types.UID
	probes int
	// says is what the cluster's ClusterProperties say, or saysErr why
	// they cannot be read.
	says    claims
	saysErr error
	// reads counts the reads of the ClusterProperties.
	reads int
	// version is the version of the API it serves (served).
	version schema.GroupVersion
}

func (p *fakeProber) set(state State, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.state, p.err = state, err
}

func (p *fakeProber) probe(context.Context) (State, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.probes++
	if p.state == Engaged {
		return Engaged, nil
	}
	return p.state, p.err
}

func (p *fakeProber) identity(context.Context) types.UID { return p.uid }

func (p *fakeProber) served() schema.GroupVersion {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.version
}

// serve sets the version of the API the member serves.
func (p *fakeProber) serve(gv schema.GroupVersion) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.version = gv
}

func (p *fakeProber) claims(context.Context) (claims, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reads++
	return p.says, p.saysErr
}

// say sets what the cluster's ClusterProperties say, or why they cannot be
// read.
func (p *fakeProber) say(c claims, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.says, p.saysErr = c, err
}

func (p *fakeProber) readCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reads
}

func (p *fakeProber) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.probes
}

// fakeCluster is a cluster whose cache syncs when sync is closed and whose
// Start returns startErr, or blocks until its context ends or an error
// comes on fail (if set); then it closes stopped (if set).
type fakeCluster struct {
	cluster.Cluster // only Start and GetCache are used
	sync            chan struct{}
	startErr        error
	onWatchError    func(context.Context, error)
	fail            chan error
	stopped         chan struct{}
}

func (c *fakeCluster) Start(ctx context.Context) error {
	if c.startErr != nil {
		return c.startErr
	}
	if c.stopped != nil {
		defer close(c.stopped)
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-c.fail:
		return err
	}
}

func (c *fakeCluster) GetCache() cache.Cache { return fakeCache{sync: c.sync} }

type fakeCache struct {
	cache.Cache // only WaitForCacheSync is used
	sync        chan struct{}
}

func (c fakeCache) WaitForCacheSync(ctx context.Context) bool {
	select {
	case <-c.sync:
		return true
	case <-ctx.Done():
		return false
	}
}

// lifecycle is one member with fake seams, and what it reported.
type lifecycle struct {
	t       *testing.T
	m       *member
	prober  *fakeProber
	cluster *fakeCluster
	// clusterErr and engageErr, if set, fail the cluster's creation and
	// Options.Engage.
	clusterErr, engageErr error
	// runnable is what Options.Engage returns to run while engaged.
	runnable func(context.Context) error
	// states is the Set's signal of state changes (deps.states).
	states notify.Signal

	mu         sync.Mutex
	changes    int
	identified []types.UID
	running    int // runnables running now
}

func newLifecycle(t *testing.T) *lifecycle {
	t.Helper()
	dir := t.TempDir()
	kubeconfig(t, dir, "east.kubeconfig", "https://127.0.0.1:6443")
	l := &lifecycle{t: t, prober: &fakeProber{state: Engaged}, cluster: &fakeCluster{sync: make(chan struct{})}}
	l.runnable = func(ctx context.Context) error { <-ctx.Done(); return nil }
	metrics, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Scheme: runtime.NewScheme(), RetryInterval: time.Millisecond, MaxRetryInterval: 5 * time.Millisecond,
		HealthInterval: time.Hour, // probes come from lost watches, or from the test
		Engage: func(clusterset.ClusterID, cluster.Cluster) ([]func(context.Context) error, error) {
			if l.engageErr != nil {
				return nil, l.engageErr
			}
			return []func(context.Context) error{func(ctx context.Context) error {
				l.mu.Lock()
				l.running++
				l.mu.Unlock()
				defer func() { l.mu.Lock(); l.running--; l.mu.Unlock() }()
				return l.runnable(ctx)
			}}, nil
		}}
	d := &deps{opts: opts, metrics: metrics, stopTimeout: time.Second, failingLimit: failingLimit,
		changed: func() { l.mu.Lock(); l.changes++; l.mu.Unlock() },
		states:  &l.states,
		identified: func(_ clusterset.ClusterID, uid types.UID) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.identified = append(l.identified, uid)
		},
		newCluster: func(_ clusterset.ClusterID, _ schema.GroupVersion, _ *rest.Config, onWatchError func(context.Context, error)) (cluster.Cluster, error) {
			if l.clusterErr != nil {
				return nil, l.clusterErr
			}
			l.cluster.onWatchError = onWatchError
			return l.cluster, nil
		},
		newProber:  func(*rest.Config, requiredAPI) (prober, error) { return l.prober, nil },
		clusterset: "prod",
	}
	l.m = newMember(d, Member{ID: "east", Kubeconfig: filepath.Join(dir, "east.kubeconfig")}, time.Now())
	return l
}

// engage runs one engagement in the background; its result arrives on the
// returned channel.
func (l *lifecycle) engage(ctx context.Context) <-chan bool {
	done := make(chan bool, 1)
	go func() { done <- l.m.engage(ctx) }()
	return done
}

func (l *lifecycle) wantState(state State, cause string) {
	l.t.Helper()
	poll(l.t, fmt.Sprintf("state %s", state), func() error {
		st := l.m.getStatus()
		if st.State != state || !strings.Contains(st.Cause, cause) {
			return fmt.Errorf("state %s (%q), want %s with %q", st.State, st.Cause, state, cause)
		}
		return nil
	})
}

func (l *lifecycle) changed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changes
}

func (l *lifecycle) runningNow() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.running
}

func result(t *testing.T, done <-chan bool) bool {
	t.Helper()
	select {
	case ok := <-done:
		return ok
	case <-time.After(30 * time.Second):
		t.Fatal("engage did not return")
		return false
	}
}

// TestEngageCannotConnect: each reason a member cannot be connected to is
// its state, with the cause; engage returns at once, not engaged.
func TestEngageCannotConnect(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(*lifecycle)
		state State
		cause string
	}{
		{"kubeconfig missing", func(l *lifecycle) { l.m.config.Kubeconfig = "/nonexistent/kubeconfig" }, BadConfig, "/nonexistent/kubeconfig"},
		{"health check cannot be built", func(l *lifecycle) {
			l.m.deps.newProber = func(*rest.Config, requiredAPI) (prober, error) { return nil, errors.New("bad TLS settings") }
		}, BadConfig, "bad TLS settings"},
		{"unreachable", func(l *lifecycle) { l.prober.set(Unreachable, errors.New("connection refused")) }, Unreachable, "connection refused"},
		{"missing CRDs", func(l *lifecycle) { l.prober.set(MissingCRDs, errors.New("CRDs missing")) }, MissingCRDs, "CRDs missing"},
		{"forbidden", func(l *lifecycle) { l.prober.set(Forbidden, errors.New("forbidden")) }, Forbidden, "forbidden"},
		{"ClusterProperties unreadable", func(l *lifecycle) { l.prober.saysErr = errors.New("read ClusterProperty: timeout") }, Unreachable, "read ClusterProperty: timeout"},
		{"ClusterProperty of another ID", func(l *lifecycle) { l.prober.says = claims{id: "west", clusterset: "prod"} },
			WrongCluster, `ClusterProperty cluster.clusterset.k8s.io of this cluster is "west", but the clusterset config names this member "east"`},
		{"ClusterProperty of another clusterset", func(l *lifecycle) { l.prober.says = claims{id: "east", clusterset: "staging"} },
			WrongCluster, `ClusterProperty clusterset.k8s.io of this cluster is "staging", but this is clusterset "prod"`},
		{"cluster cannot be built", func(l *lifecycle) { l.clusterErr = errors.New("no REST mapper") }, Failed, "no REST mapper"},
		{"Engage fails", func(l *lifecycle) { l.engageErr = errors.New("index conflict") }, Failed, "index conflict"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLifecycle(t)
			tc.setup(l)
			if result(t, l.engage(t.Context())) {
				t.Error("engaged")
			}
			l.wantState(tc.state, tc.cause)
			if l.changed() != 0 {
				t.Errorf("%d changes announced for a member that never connected", l.changed())
			}
		})
	}
}

// TestEngageSyncingThenEngaged: a member that answers (and whose
// ClusterProperties agree with the config) is syncing until its cache has
// synced; then its controllers run and it is engaged, its identity read
// once and announced; a probe that fails then disengages it and stops its
// controllers.
func TestEngageSyncingThenEngaged(t *testing.T) {
	l := newLifecycle(t)
	l.prober.uid = "uid-east"
	l.prober.says = claims{id: "east", clusterset: "prod"}
	done := l.engage(t.Context())
	l.wantState(Syncing, "")
	if n := l.runningNow(); n != 0 {
		t.Fatalf("%d controllers run before the cache synced", n)
	}
	if h := l.m.health(); h.Up || !h.Answering || l.changed() != 1 {
		t.Errorf("syncing: %+v, %d changes", h, l.changed())
	}
	stateChanged := l.states.Changed()
	close(l.cluster.sync)
	l.wantState(Engaged, "")
	select { // what the publisher's readers follow (Set.Changes)
	case <-stateChanged:
	case <-time.After(30 * time.Second):
		t.Error("the state's change from syncing to engaged was not notified")
	}
	poll(t, "controller running", func() error {
		if n := l.runningNow(); n != 1 {
			return fmt.Errorf("%d running", n)
		}
		return nil
	})
	l.mu.Lock()
	identified := l.identified
	l.mu.Unlock()
	if uid, engaged := l.m.identity(); uid != "uid-east" || !engaged || len(identified) != 1 {
		t.Errorf("identity %q, engaged %v, announced %v", uid, engaged, identified)
	}

	// A watch that fails to reach the server calls for a probe at once.
	l.prober.set(Unreachable, errors.New("i/o timeout"))
	l.cluster.onWatchError(t.Context(), errors.New("dial tcp: i/o timeout"))
	if !result(t, done) {
		t.Error("engage says the member was never engaged")
	}
	l.wantState(Unreachable, "i/o timeout")
	if n := l.runningNow(); n != 0 {
		t.Errorf("%d controllers still running after the member was disengaged", n)
	}
	if n := l.changed(); n != 3 {
		t.Errorf("%d changes, want 3 (answering, engaged, gone)", n)
	}
}

// TestEngageRefusals: a list or watch that the API server refuses (403,
// or 404 for a resource it no longer serves) disengages the member with
// that cause, while it syncs as well as while engaged; an expired
// resourceVersion (the server answered) does not. A 404 is probed: a
// member whose API is now served in another version (its CRD replaced) is
// engaged anew, not missing its CRDs.
func TestEngageRefusals(t *testing.T) {
	gr := schema.GroupResource{Group: "multicluster.x-k8s.io", Resource: "serviceexports"}
	for _, tc := range []struct {
		name    string
		engaged bool
		err     error
		// serves is the version the member serves once the error came.
		serves schema.GroupVersion
		state  State
		cause  string
		probes int
	}{
		{"forbidden while syncing", false, apierrors.NewForbidden(gr, "", errors.New("no RBAC")), schema.GroupVersion{}, Forbidden, "", 1},
		{"unauthorized while engaged", true, apierrors.NewUnauthorized("token expired"), schema.GroupVersion{}, Forbidden, "", 1},
		{"CRDs removed while engaged", true, apierrors.NewNotFound(gr, ""), schema.GroupVersion{}, MissingCRDs, "", 2},
		{"CRDs replaced by another version while engaged", true, apierrors.NewNotFound(gr, ""), mcsapi.V1alpha1, Connecting,
			"now serves multicluster.x-k8s.io/v1alpha1", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLifecycle(t)
			done := l.engage(t.Context())
			l.wantState(Syncing, "")
			if tc.engaged {
				close(l.cluster.sync)
				l.wantState(Engaged, "")
			}
			// The server answered: not a reason to probe or disengage.
			l.cluster.onWatchError(t.Context(), apierrors.NewResourceExpired("too old resource version"))
			l.prober.serve(tc.serves)
			l.cluster.onWatchError(t.Context(), tc.err)
			if got := result(t, done); got != tc.engaged {
				t.Errorf("engage returned %v", got)
			}
			l.wantState(tc.state, tc.cause)
			if n := l.prober.count(); n != tc.probes {
				t.Errorf("%d probes, want %d", n, tc.probes)
			}
		})
	}
}

// TestEngagedOnTheServedVersion: a member is engaged on the version of
// its API that its probe found served; a later probe that finds another
// (the CRD upgraded in place: v1alpha1 only, then v1beta1 too) engages it
// anew, on that one.
func TestEngagedOnTheServedVersion(t *testing.T) {
	l := newLifecycle(t)
	l.m.deps.opts.HealthInterval = 10 * time.Millisecond
	l.prober.serve(mcsapi.V1alpha1)
	done := l.engage(t.Context())
	close(l.cluster.sync)
	l.wantState(Engaged, "")
	if got := l.m.apiVersion(); got != mcsapi.V1alpha1 {
		t.Errorf("engaged on %v, want v1alpha1", got)
	}
	l.prober.serve(mcsapi.V1beta1)
	if !result(t, done) {
		t.Error("engage says the member was never engaged")
	}
	l.wantState(Connecting, "now serves multicluster.x-k8s.io/v1beta1, no longer (only) multicluster.x-k8s.io/v1alpha1")
}

// TestEngageFailures: the cache or a controller that ends with an error
// disengages the member as failed; a probe failing while the cache syncs
// disengages it as unreachable.
func TestEngageFailures(t *testing.T) {
	t.Run("cache ends", func(t *testing.T) {
		l := newLifecycle(t)
		l.cluster.startErr = errors.New("informer died")
		if result(t, l.engage(t.Context())) {
			t.Error("engaged")
		}
		l.wantState(Failed, "informer died")
	})
	t.Run("controller ends", func(t *testing.T) {
		l := newLifecycle(t)
		l.runnable = func(context.Context) error { return errors.New("controller crashed") }
		close(l.cluster.sync)
		if !result(t, l.engage(t.Context())) {
			t.Error("never engaged")
		}
		l.wantState(Failed, "controller crashed")
	})
	t.Run("unreachable while syncing", func(t *testing.T) {
		l := newLifecycle(t)
		l.m.deps.opts.HealthInterval = 10 * time.Millisecond
		done := l.engage(t.Context())
		l.wantState(Syncing, "")
		l.prober.set(Unreachable, errors.New("no route to host"))
		if result(t, done) {
			t.Error("engaged")
		}
		l.wantState(Unreachable, "no route to host")
	})
}

// TestEngageStops: when its context ends, engage returns whether the
// member was engaged, once its controllers have returned, within the stop
// timeout or else as the subtests below say.
func TestEngageStops(t *testing.T) {
	for _, synced := range []bool{false, true} {
		t.Run(fmt.Sprintf("synced=%v", synced), func(t *testing.T) {
			l := newLifecycle(t)
			ctx, cancel := context.WithCancel(t.Context())
			done := l.engage(ctx)
			if synced {
				close(l.cluster.sync)
				l.wantState(Engaged, "")
			} else {
				l.wantState(Syncing, "")
			}
			cancel()
			if got := result(t, done); got != synced {
				t.Errorf("engage returned %v", got)
			}
		})
	}
	// A controller that does not return within the stop timeout: at the
	// process's stop it is left to end with the process; when the member
	// is disengaged while the process goes on (its API server gone, or
	// the Set stopping it), the process is told to exit, and engage
	// returns only once the controller has (or the process stops).
	hung := func(t *testing.T) (l *lifecycle, release chan struct{}, hungErrs chan error) {
		l = newLifecycle(t)
		l.m.deps.stopTimeout = 10 * time.Millisecond
		hungErrs = make(chan error, 1)
		l.m.deps.opts.ControllersHung = func(err error) { hungErrs <- err }
		release = make(chan struct{})
		l.runnable = func(context.Context) error { <-release; return nil }
		close(l.cluster.sync)
		return l, release, hungErrs
	}
	// engageUntilHung engages l, disengages it with disengage, waits for
	// ControllersHung, releases the controller, and says how many
	// controllers ran when engage returned.
	engageUntilHung := func(t *testing.T, l *lifecycle, ctx context.Context, release chan struct{}, hungErrs chan error, disengage func()) int {
		runningAtReturn := make(chan int, 1)
		go func() { l.m.engage(ctx); runningAtReturn <- l.runningNow() }()
		l.wantState(Engaged, "")
		disengage()
		select {
		case err := <-hungErrs:
			if !errors.Is(err, ErrControllersHung) || !strings.Contains(err.Error(), "east") {
				t.Errorf("ControllersHung(%v), want ErrControllersHung naming east", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("ControllersHung not called")
		}
		close(release)
		select {
		case n := <-runningAtReturn:
			return n
		case <-time.After(30 * time.Second):
			t.Fatal("engage did not return once the controller had")
			return -1
		}
	}
	t.Run("hung controller at the process's stop", func(t *testing.T) {
		l, release, hungErrs := hung(t)
		defer close(release)
		ctx, cancel := context.WithCancel(t.Context())
		done := l.engage(ctx)
		l.wantState(Engaged, "")
		cancel()
		if !result(t, done) {
			t.Error("engage says never engaged")
		}
		if n := l.runningNow(); n != 1 {
			t.Errorf("%d controllers running, want the hung one", n)
		}
		select {
		case err := <-hungErrs:
			t.Errorf("ControllersHung(%v) at the process's stop", err)
		default:
		}
	})
	t.Run("hung controller of a member gone", func(t *testing.T) {
		l, release, hungErrs := hung(t)
		n := engageUntilHung(t, l, t.Context(), release, hungErrs, func() {
			l.prober.set(Unreachable, errors.New("i/o timeout"))
			l.cluster.onWatchError(t.Context(), errors.New("dial tcp: i/o timeout"))
		})
		if n != 0 {
			t.Errorf("engage returned while %d controllers still ran", n)
		}
	})
	t.Run("hung controller of a member stopped by the Set", func(t *testing.T) {
		l, release, hungErrs := hung(t)
		l.m.deps.processDone = func() <-chan struct{} { return t.Context().Done() }
		ctx, cancel := context.WithCancelCause(t.Context())
		n := engageUntilHung(t, l, ctx, release, hungErrs, func() { cancel(errMemberStopped) })
		if n != 0 {
			t.Errorf("engage returned while %d controllers still ran", n)
		}
	})
}

// TestRunReturns: run tries a member that cannot be reached again and
// again; when it answers, it is engaged again (it returned), and a probe
// while engaged (the health interval) sees it go.
func TestRunReturns(t *testing.T) {
	l := newLifecycle(t)
	l.m.deps.opts.HealthInterval = 10 * time.Millisecond
	l.prober.set(Unreachable, errors.New("connection refused"))
	close(l.cluster.sync)
	ctx, cancel := context.WithCancel(t.Context())
	go l.m.run(ctx)
	l.wantState(Unreachable, "connection refused")
	poll(t, "retried", func() error {
		if n := l.prober.count(); n < 3 {
			return fmt.Errorf("%d probes", n)
		}
		return nil
	})
	l.prober.set(Engaged, nil)
	l.wantState(Engaged, "")
	l.prober.set(Unreachable, errors.New("connection reset"))
	l.wantState(Unreachable, "connection reset")
	l.prober.set(Engaged, nil)
	l.wantState(Engaged, "")
	cancel()
	select {
	case <-l.m.done:
	case <-time.After(30 * time.Second):
		t.Fatal("run did not end")
	}
	if n := l.changed(); n != 5 {
		t.Errorf("%d changes, want 5 (answering, engaged, gone, answering, engaged)", n)
	}
}

// TestWatchFailedSorts: refusals go to refused (one at a time, never
// blocking); failures to reach the server, and its errors, to lost and
// the failure streak; an expired resourceVersion and a stopping cache to
// neither.
func TestWatchFailedSorts(t *testing.T) {
	refused, lost := make(chan error, 1), make(chan struct{}, 1)
	var failing failureStreak
	gr := schema.GroupResource{Resource: "services"}
	watchFailed(t.Context(), apierrors.NewForbidden(gr, "", errors.New("no")), refused, lost, &failing)
	watchFailed(t.Context(), apierrors.NewForbidden(gr, "", errors.New("again")), refused, lost, &failing) // dropped: one is pending
	watchFailed(t.Context(), apierrors.NewResourceExpired("expired"), refused, lost, &failing)
	watchFailed(t.Context(), context.Canceled, refused, lost, &failing)
	if !failing.last.IsZero() || len(lost) != 0 {
		t.Errorf("a refusal, an expired resourceVersion or a stop counted as a failure (%v)", failing.err)
	}
	watchFailed(t.Context(), errors.New("connection refused"), refused, lost, &failing)
	watchFailed(t.Context(), apierrors.NewInternalError(errors.New("conversion webhook unreachable")), refused, lost, &failing)
	if failing.count != 2 {
		t.Errorf("%d failures in the streak, want 2", failing.count)
	}
	// As reportingUnreadyStorage hands it on: the API server cannot build
	// its cache of the resource.
	watchFailed(t.Context(), apierrors.NewTooManyRequestsError("storage is (re)initializing: conversion webhook for x failed"), refused, lost, &failing)
	if failing.count != 3 {
		t.Errorf("a 429 of storage that cannot be built counted %d, want the streak's third failure", failing.count)
	}
	stopped, cancel := context.WithCancel(t.Context())
	cancel()
	watchFailed(stopped, apierrors.NewForbidden(gr, "", errors.New("late")), refused, lost, &failing)
	if len(refused) != 1 || len(lost) != 1 {
		t.Fatalf("refused %d, lost %d", len(refused), len(lost))
	}
	if err := <-refused; !strings.Contains(err.Error(), "no") {
		t.Errorf("refused %v", err)
	}
	if !strings.Contains(fmt.Sprint(failing.err), "conversion webhook") {
		t.Errorf("the streak's last failure: %v", failing.err)
	}
}

// TestCacheFailingIsDisengaged: an engaged member whose cache keeps
// failing (here: the server's errors, as from a CRD's broken conversion)
// while its probe succeeds is disengaged as failed once the streak
// reaches its limit: its controllers (the publisher and its heartbeat
// among them) stop rather than run on a view that is no longer read.
func TestCacheFailingIsDisengaged(t *testing.T) {
	l := newLifecycle(t)
	l.m.deps.failingLimit = 50 * time.Millisecond
	done := l.engage(t.Context())
	close(l.cluster.sync)
	l.wantState(Engaged, "")
	poll(t, "the controllers to run", func() error {
		if l.runningNow() != 1 {
			return errors.New("not running")
		}
		return nil
	})
	failure := apierrors.NewInternalError(errors.New("conversion webhook for multicluster.x-k8s.io/v1alpha1 failed"))
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				l.cluster.onWatchError(t.Context(), failure)
			}
		}
	}()
	if !result(t, done) {
		t.Error("engage says the member was never engaged")
	}
	l.wantState(Failed, "its API server has failed mcs-syncer's lists, watches or writes")
	if n := l.runningNow(); n != 0 {
		t.Errorf("%d controllers still running", n)
	}
}

// TestFailureStreak: a cache that keeps failing (at the reflector's
// backoff) for a minute is over its limit, with since when and its last
// error; failures more than streakPause apart are no streak, nor are two
// failures a minute apart; a pause starts a new streak.
func TestFailureStreak(t *testing.T) {
	var f failureStreak
	t0 := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	if err := f.over(t0, failingLimit); err != nil {
		t.Errorf("no failure yet: %v", err)
	}
	// Two sporadic failures a minute apart: no streak.
	f.add(t0, errors.New("very short watch"))
	f.add(t0.Add(61*time.Second), errors.New("very short watch"))
	if err := f.over(t0.Add(62*time.Second), failingLimit); err != nil {
		t.Errorf("two failures a minute apart: %v", err)
	}
	// A cache that keeps failing, at the reflector's backoff.
	t1 := t0.Add(5 * time.Minute)
	for _, after := range []time.Duration{0, 800 * time.Millisecond, 2400 * time.Millisecond, 5600 * time.Millisecond, 12 * time.Second, 25 * time.Second, 51 * time.Second} {
		f.add(t1.Add(after), errors.New("Internal error occurred: conversion webhook unreachable"))
	}
	if err := f.over(t1.Add(59*time.Second), failingLimit); err != nil {
		t.Errorf("59 s of failures: %v", err)
	}
	err := f.over(t1.Add(61*time.Second), failingLimit)
	if err == nil || !strings.Contains(err.Error(), "7 times since 2026-11-28T04:05:00Z") || !strings.Contains(err.Error(), "conversion webhook") {
		t.Errorf("61 s of failures: %v", err)
	}
	if err := f.over(t1.Add(51*time.Second+streakPause+time.Second), failingLimit); err != nil {
		t.Errorf("after a pause: %v", err)
	}
	f.add(t1.Add(10*time.Minute), errors.New("again"))
	if err := f.over(t1.Add(10*time.Minute+30*time.Second), failingLimit); err != nil {
		t.Errorf("a new streak of 30 s: %v", err)
	}
	var none *failureStreak
	none.add(t0, errors.New("x"))
	if err := none.over(t0.Add(time.Hour), failingLimit); err != nil {
		t.Errorf("a nil streak: %v", err)
	}
}

// testSet is a Set on a config file of the test's, whose members' API
// servers are fake probers (by address) and whose caches sync at once.
type testSet struct {
	t       *testing.T
	dir     string
	set     *Set
	probers map[string]*fakeProber // by API server address

	mu         sync.Mutex
	departures []Departure
	// onStop, if set, runs in a member's controller when it is stopped.
	onStop func(id clusterset.ClusterID)
}

// newTestSet starts a Set with members id=address (each a kubeconfig of
// its own, named after the ID).
func newTestSet(t *testing.T, probers map[string]*fakeProber, members ...string) *testSet {
	t.Helper()
	ts := &testSet{t: t, dir: t.TempDir(), probers: probers}
	ts.write(members...)
	cfg, err := LoadConfig(filepath.Join(ts.dir, "clusterset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ts.set, err = NewSet(filepath.Join(ts.dir, "clusterset.yaml"), cfg, Options{
		Scheme: runtime.NewScheme(), RetryInterval: time.Millisecond, MaxRetryInterval: 5 * time.Millisecond,
		HealthInterval: time.Hour, ConfigPollInterval: 5 * time.Millisecond,
		Engage: func(id clusterset.ClusterID, _ cluster.Cluster) ([]func(context.Context) error, error) {
			return []func(context.Context) error{func(ctx context.Context) error {
				<-ctx.Done()
				if ts.onStop != nil {
					ts.onStop(id)
				}
				return nil
			}}, nil
		},
		Departed: func(d Departure) {
			ts.mu.Lock()
			defer ts.mu.Unlock()
			ts.departures = append(ts.departures, d)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ts.set.deps.newCluster = func(clusterset.ClusterID, schema.GroupVersion, *rest.Config, func(context.Context, error)) (cluster.Cluster, error) {
		synced := make(chan struct{})
		close(synced)
		return &fakeCluster{sync: synced}, nil
	}
	ts.set.deps.newProber = func(rc *rest.Config, _ requiredAPI) (prober, error) {
		if p := probers[rc.Host]; p != nil {
			return p, nil
		}
		return &fakeProber{state: Unreachable, err: errors.New("connection refused")}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ts.set.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return ts
}

// write writes the config: members as "id=address" (a kubeconfig named
// after the address, so that a renamed member keeps its file); "=address"
// leaves the ID to the cluster.
func (ts *testSet) write(members ...string) {
	ts.t.Helper()
	raw := configHeader + "clusterset: prod\nmembers:\n"
	for _, m := range members {
		id, addr, _ := strings.Cut(m, "=")
		file := strings.NewReplacer(":", "_", "/", "_").Replace(addr) + ".kubeconfig"
		kubeconfig(ts.t, ts.dir, file, addr)
		if id != "" {
			raw += fmt.Sprintf("- id: %s\n", id)
		} else {
			raw += "-\n"
		}
		raw += fmt.Sprintf("  kubeconfig: %s\n", file)
	}
	path := filepath.Join(ts.dir, "clusterset.yaml")
	if err := writeFileAtomic(path, raw); err != nil {
		ts.t.Fatal(err)
	}
}

// departed waits for the departure of id and returns it.
func (ts *testSet) departed(id clusterset.ClusterID) Departure {
	ts.t.Helper()
	var d Departure
	poll(ts.t, "departure of "+string(id), func() error {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		for _, x := range ts.departures {
			if x.ID == id {
				d = x
				return nil
			}
		}
		return fmt.Errorf("departures %v", ts.departures)
	})
	return d
}

func ended(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	default:
		return errors.New("still going on")
	}
}

// TestDepartures: a renamed member (same API server, new ID) departs
// naming the member its cluster still is, and its clean-up context ends at
// once; a member removed, then added back, ends the clean-up of the first
// departure (by its address, and by its identity under another address);
// a member that was never engaged departs saying so.
func TestDepartures(t *testing.T) {
	const a, b, c = "https://10.0.0.1:6443", "https://10.0.0.2:6443", "https://10.0.0.3:6443"
	probers := map[string]*fakeProber{a: {state: Engaged, uid: "uid-a"}, b: {state: Engaged, uid: "uid-b"}, "https://b.example:443": {state: Engaged, uid: "uid-b"}}
	ts := newTestSet(t, probers, "east="+a, "north="+b, "south="+c)
	wantState := func(id clusterset.ClusterID, state State) {
		t.Helper()
		poll(t, string(id)+" "+string(state), wantState(ts.set, id, state, ""))
	}
	wantState("north", Engaged)
	wantState("south", Unreachable)

	// Rename north to polar.
	ts.write("east="+a, "polar="+b, "south="+c)
	d := ts.departed("north")
	if d.SameClusterAs != "polar" || !d.Engaged || d.Client == nil {
		t.Errorf("rename: %+v", d)
	}
	poll(t, "north's clean-up context ends", func() error { return ended(d.Context) })
	if cause := context.Cause(d.Context); !errors.Is(cause, ErrRejoined) {
		t.Errorf("cause %v", cause)
	}
	wantState("polar", Engaged)

	// Remove polar: a real departure, whose clean-up may go on...
	ts.write("east="+a, "south="+c)
	d = ts.departed("polar")
	if d.SameClusterAs != "" || !d.Engaged {
		t.Errorf("removal: %+v", d)
	}
	if err := ended(d.Context); err == nil {
		t.Fatal("the clean-up context of a member that really left ended")
	}
	// ...until the cluster is back, here under another address: known by
	// its identity once it is engaged.
	ts.write("east="+a, "south="+c, "north=https://b.example:443")
	poll(t, "polar's clean-up context ends when its cluster is back", func() error { return ended(d.Context) })
	if cause := context.Cause(d.Context); !errors.Is(cause, ErrRejoined) {
		t.Errorf("cause %v", cause)
	}

	// South never answered.
	ts.write("east="+a, "north=https://b.example:443")
	if d := ts.departed("south"); d.Engaged || d.SameClusterAs != "" {
		t.Errorf("south: %+v", d)
	}
}

// TestApplyStopsAllThenWaits: members whose settings changed together are
// all told to stop before any is waited for (each one's stop waits here
// for the other's).
func TestApplyStopsAllThenWaits(t *testing.T) {
	const a, b = "https://10.0.0.1:6443", "https://10.0.0.2:6443"
	probers := map[string]*fakeProber{a: {state: Engaged}, b: {state: Engaged}}
	ts := newTestSet(t, probers, "east="+a, "west="+b)
	for _, id := range []clusterset.ClusterID{"east", "west"} {
		poll(t, string(id)+" engaged", wantState(ts.set, id, Engaged, ""))
	}
	var stopping sync.WaitGroup
	stopping.Add(2)
	together := make(chan bool, 2)
	var stops atomic.Int32
	ts.onStop = func(clusterset.ClusterID) {
		// Only the stops of the change count: the restarted members stop
		// again when the test ends.
		if stops.Add(1) > 2 {
			return
		}
		stopping.Done()
		done := make(chan struct{})
		go func() { stopping.Wait(); close(done) }()
		select {
		case <-done:
			together <- true
		case <-time.After(5 * time.Second):
			together <- false
		}
	}
	// New kubeconfig contents for both (rotated credentials): the
	// addresses gain a path, the probers stay.
	ts.set.deps.newProber = func(*rest.Config, requiredAPI) (prober, error) { return &fakeProber{state: Engaged}, nil }
	ts.write("east="+a+"/", "west="+b+"/")
	for range 2 {
		select {
		case ok := <-together:
			if !ok {
				t.Fatal("a member was waited for before the other was told to stop")
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the members were not stopped")
		}
	}
}

// writeFileAtomic writes a file aside and renames it, as a Secret volume
// is updated.
func writeFileAtomic(path, raw string) error {
	if err := os.WriteFile(path+".tmp", []byte(raw), 0o644); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// TestAddressReadWhenConnecting: a member made while its kubeconfig could
// not be read (caught half written) has no address; once it connects
// with the kubeconfig whole, its address is known, so that a rename of
// it is still known for the same cluster (TestDepartures failed so, once
// in a loaded CI run, when the Set read a kubeconfig being rewritten).
func TestAddressReadWhenConnecting(t *testing.T) {
	l := newLifecycle(t)
	path := l.m.config.Kubeconfig
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l.m = newMember(l.m.deps, l.m.config, time.Now())
	if got := l.m.address(); got != "" {
		t.Fatalf("address %q read from an empty kubeconfig", got)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := l.m.connect(t.Context()); !ok {
		t.Fatal("no connection with the kubeconfig whole")
	}
	if got := l.m.address(); got != "https://127.0.0.1:6443" {
		t.Errorf("address %q after connecting, want the kubeconfig's server", got)
	}
	if !l.m.sameCluster("", "https://127.0.0.1:6443") {
		t.Error("not the same cluster as its own address")
	}
}

// TestFailingWritesDisengage: a member whose API server fails its
// controllers' writes (a 500, as from a conversion webhook that cannot be
// reached, while every read and probe succeeds) is failed once the streak
// reaches its limit, naming the error; a conflict reported the same way
// counts for nothing.
func TestFailingWritesDisengage(t *testing.T) {
	l := newLifecycle(t)
	l.m.deps.failingLimit = 50 * time.Millisecond
	failure := apierrors.NewInternalError(errors.New("conversion webhook for multicluster.x-k8s.io/v1alpha1, Kind=ServiceExport failed"))
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "serviceexports"}, "web", errors.New("changed"))
	l.runnable = func(ctx context.Context) error {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(10 * time.Millisecond):
				plumbing.ReportFailure(ctx, conflict)
				plumbing.ReportFailure(ctx, failure)
			}
		}
	}
	done := l.engage(t.Context())
	close(l.cluster.sync)
	if !result(t, done) {
		t.Error("engage says the member was never engaged")
	}
	l.wantState(Failed, "conversion webhook for multicluster.x-k8s.io/v1alpha1")
	if st := l.m.getStatus(); strings.Contains(st.Cause, "changed") {
		t.Errorf("a conflict counted: %s", st.Cause)
	}
}
