package membership

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// hubs share one connection to a hub among the members read through it
// (Member.ThroughHub): one client and cache, so one watch of the hub's
// publications per process, and one health check whose answer serves them
// all. A member read through the hub is as reachable as the hub; each
// keeps its own state, engagement and controllers. (With a client, a cache
// and a probe per member, an importer of a 255-member clusterset held 254
// watches and made 25 probes a second, and the hub fell behind: make
// bench-scale.)
type hubs struct {
	// deps has the seams that make clusters and probes.
	deps *deps

	mu sync.Mutex
	// links are by the hub's connection settings (connectionPrint): a
	// change of them gives the members a connection of their own.
	links map[[32]byte]*hubLink
}

// hubLink is one connection to a hub: its health check, and the shared
// cluster while members are engaged on it.
type hubLink struct {
	key   [32]byte
	check *sharedProbe
	conn  *hubConn
}

// hubConn is a shared cluster of a hub and the members engaged on it; the
// last one to stop ends it. One whose cache stopped by itself is replaced
// for the next member, while those still on it see it end.
type hubConn struct {
	cl    cluster.Cluster
	users int
	stop  context.CancelFunc
	// done closes when the cluster stopped; err says why.
	done    chan struct{}
	err     error
	watches map[*func(context.Context, error)]bool
}

func newHubs(d *deps) *hubs { return &hubs{deps: d, links: map[[32]byte]*hubLink{}} }

// prober returns the health check of the hub in member m's settings.
func (h *hubs) prober(m Member, rc *rest.Config, api requiredAPI) (prober, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.link(m)
	if l.check == nil {
		p, err := h.deps.newProber(rc, api)
		if err != nil {
			return nil, err
		}
		l.check = &sharedProbe{prober: p, reuse: probeReuse}
	}
	return l.check, nil
}

// link returns the link of m's hub settings; h.mu must be held.
func (h *hubs) link(m Member) *hubLink {
	key := m.connectionPrint()
	l := h.links[key]
	if l == nil {
		l = &hubLink{key: key}
		h.links[key] = l
	}
	return l
}

// attach returns member m's view of the hub's shared cluster, starting the
// cluster with the first member; onWatchError gets every failed list or
// watch of the shared cache. release ends m's use of it.
func (h *hubs) attach(ctx context.Context, m Member, rc *rest.Config, onWatchError func(context.Context, error)) (cl cluster.Cluster, release func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.link(m)
	if l.conn == nil || isClosed(l.conn.done) {
		c := &hubConn{done: make(chan struct{}), watches: map[*func(context.Context, error)]bool{}}
		if c.cl, err = h.deps.newCluster("", schema.GroupVersion{}, rc, func(ctx context.Context, err error) { h.watchFailed(l, c, ctx, err) }); err != nil {
			return nil, nil, err
		}
		// The cluster lives as long as a member uses it, not as long as
		// the member that happened to start it.
		var run context.Context
		run, c.stop = context.WithCancel(context.WithoutCancel(ctx))
		go func() {
			err := c.cl.Start(run)
			h.mu.Lock()
			c.err = err
			h.mu.Unlock()
			close(c.done)
		}()
		l.conn = c
	}
	c := l.conn
	c.users++
	watch := &onWatchError
	c.watches[watch] = true
	var once sync.Once
	release = func() { once.Do(func() { h.release(l, c, watch) }) }
	return &hubView{Cluster: c.cl, hubs: h, conn: c}, release, nil
}

// release ends one member's use of connection c of link l. A link without
// members is forgotten (its next member probes with a new client): a hub
// whose settings changed leaves nothing behind.
func (h *hubs) release(l *hubLink, c *hubConn, watch *func(context.Context, error)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(c.watches, watch)
	if c.users--; c.users > 0 {
		return
	}
	c.stop()
	if l.conn == c {
		l.conn = nil
		delete(h.links, l.key)
	}
}

// watchFailed hands a failed list or watch of c's cache to every member
// on it: each probes the hub (whose answer they share) or, on a refusal,
// goes to the refusal's state. A refusal also ends the reuse of the
// health check's last answer: a member that went to the refusal's state
// and came back within probeReuse was otherwise engaged again on the
// answer given before the refusal (seen in a loaded CI run).
func (h *hubs) watchFailed(l *hubLink, c *hubConn, ctx context.Context, err error) {
	h.mu.Lock()
	if isRefusal(err) && l.check != nil {
		l.check.forget()
	}
	watches := make([]func(context.Context, error), 0, len(c.watches))
	for w := range c.watches {
		watches = append(watches, *w)
	}
	h.mu.Unlock()
	for _, w := range watches {
		w(ctx, err)
	}
}

// hubView is one member's view of a shared cluster: its Start does not
// start the cluster (the link did) but lasts while the member is engaged,
// or ends with the shared cluster's error.
type hubView struct {
	cluster.Cluster
	hubs *hubs
	conn *hubConn
}

func (v *hubView) Start(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-v.conn.done:
		v.hubs.mu.Lock()
		defer v.hubs.mu.Unlock()
		if v.conn.err == nil {
			return errors.New("the hub's shared cache stopped")
		}
		return v.conn.err
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// probeReuse is how long one answer of a shared health check serves every
// member that asks: as fresh as a probe that a member makes itself, but
// one probe of 254 members that lost their watch together.
const probeReuse = time.Second

// sharedProbe is a health check whose answer every member read through one
// hub shares: a probe asked for while one is under way waits for its
// answer, and an answer younger than reuse is given again.
type sharedProbe struct {
	prober
	reuse time.Duration

	mu       sync.Mutex
	at       time.Time
	state    State
	err      error
	inFlight chan struct{}
}

// forget ends the reuse of the last answer: the next probe asks the hub.
func (p *sharedProbe) forget() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.at = time.Time{}
}

func (p *sharedProbe) probe(ctx context.Context) (State, error) {
	p.mu.Lock()
	if !p.at.IsZero() && time.Since(p.at) < p.reuse {
		defer p.mu.Unlock()
		return p.state, p.err
	}
	if wait := p.inFlight; wait != nil {
		p.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return Unreachable, ctx.Err()
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.state, p.err
	}
	wait := make(chan struct{})
	p.inFlight = wait
	p.mu.Unlock()
	// Not the asker's context: its member stopping must not become every
	// member's failed probe (the probe has a timeout of its own).
	state, err := p.prober.probe(context.WithoutCancel(ctx))
	p.mu.Lock()
	p.state, p.err, p.at, p.inFlight = state, err, time.Now(), nil
	p.mu.Unlock()
	close(wait)
	return state, err
}
