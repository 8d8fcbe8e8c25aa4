package membership

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mcs-syncer/mcs-syncer/internal/plumbing"
)

// StopTimeout bounds the wait for a disengaged member's controllers to
// return. Past it, while the process goes on, Options.ControllersHung ends
// it (a member's next engagement must not run beside the last one's
// workers, and goroutines left behind would pile up at each disengagement);
// at SIGTERM they are left to end with the process, which exits as it
// would have. It is shorter than the manager's graceful shutdown (30 s): a
// controller whose worker hangs must not turn a SIGTERM into a failed exit.
// (Seen in CI: a SIGTERM within a second of the controllers' start left one
// worker of a controller that had just started its workers running past
// 30 s.)
const StopTimeout = 15 * time.Second

// ErrControllersHung is what Options.ControllersHung is called with: a
// disengaged member's controllers did not return within StopTimeout.
var ErrControllersHung = errors.New("a member's controllers did not return")

// errMemberStopped is the cause with which the Set stops a member's
// lifecycle (it left, or its settings changed): the process goes on.
var errMemberStopped = errors.New("member stopped")

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

// stop disengages the member and returns once its controllers have
// returned. If they have not within StopTimeout: at the process's stop
// (ctx ended, not by the Set's stopping the member) it returns, and they
// end with the process; otherwise Options.ControllersHung is called to end
// the process, and stop waits on until they return or the process stops
// (the Set's Start ends). The log line's stacks say which worker did not
// return.
func (e *engagement) stop(ctx context.Context) {
	e.cancel()
	defer e.release()
	stopped := make(chan struct{})
	go func() { e.controllers.Wait(); close(stopped) }()
	select {
	case <-stopped:
		return
	case <-time.After(e.m.deps.stopTimeout):
	}
	logger := log.FromContext(ctx).WithValues("cluster", e.m.id(), "workerStacks", workerStacks(maxLoggedStacks))
	if ctx.Err() != nil && !errors.Is(context.Cause(ctx), errMemberStopped) {
		logger.Info("Member's controllers did not stop within the timeout; they end with the process", "timeout", e.m.deps.stopTimeout)
		return
	}
	err := fmt.Errorf("member %s: %w within %s of its disengagement", e.m.id(), ErrControllersHung, e.m.deps.stopTimeout)
	logger.Error(err, "Member's controllers hung; the process exits rather than leave them behind")
	if hung := e.m.deps.opts.ControllersHung; hung != nil {
		hung(err)
	}
	processEnds := ctx.Done()
	if e.m.deps.processDone != nil {
		processEnds = e.m.deps.processDone()
	}
	select {
	case <-stopped:
	case <-processEnds:
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

// maxLoggedStacks is how many workers' stacks a hung stop logs: enough to
// see where they hang, not the megabytes of a thousand members' workers.
const maxLoggedStacks = 10

// workerStacks returns the stacks of at most limit goroutines that run a
// controller's worker or mcs-syncer's own code, and how many more there
// are.
func workerStacks(limit int) string {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var stacks []string
	more := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if (strings.Contains(g, "processNextWorkItem") || strings.Contains(g, "mcs-syncer/mcs-syncer/pkg/")) &&
			!strings.Contains(g, "membership.workerStacks") {
			if len(stacks) == limit {
				more++
				continue
			}
			stacks = append(stacks, g)
		}
	}
	if more > 0 {
		stacks = append(stacks, fmt.Sprintf("(and %d more)", more))
	}
	return strings.Join(stacks, "\n\n")
}
