package membership

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/credentials"
	"github.com/mcs-syncer/mcs-syncer/internal/notify"
)

// Options configure a Set.
type Options struct {
	// Scheme of every member's client and cache. Required.
	Scheme *runtime.Scheme
	// MCSSchemes, if set, holds a scheme per version of the MCS API
	// (mcsapi.Versions) that a member may serve: each member is engaged
	// on the preferred version it serves, with that version's scheme. A
	// version not here is not spoken; without any, Scheme's own is the
	// only one.
	MCSSchemes map[schema.GroupVersion]*runtime.Scheme
	// ConfigureCache, if set, adjusts each member's cache options; it is
	// called with the empty ID for a hub's cache, which every member read
	// through the hub shares (so it must not select one member's objects).
	ConfigureCache func(clusterset.ClusterID, *cache.Options)
	// ReadsPublications, if set, says which members are read through their
	// publications only (internal/publish): their probe asks for the
	// PublishedExport API instead of the MCS API.
	ReadsPublications func(clusterset.ClusterID) bool
	// Engage is called each time a member's connection is up, before its
	// cache starts: it registers in cl what the member's controllers read
	// (informers, indexes) and returns what runs while the member is
	// engaged; those start once the cache has synced, and stop when the
	// member is disengaged. One that returns an error disengages the
	// member, which is then retried. Required.
	Engage func(id clusterset.ClusterID, cl cluster.Cluster) ([]func(context.Context) error, error)
	// Departed, if set, is called when a member left the config, once its
	// lifecycle has ended: to forget its exports, and to remove what
	// mcs-syncer wrote into it unless its cluster is still (or again) a
	// member. It must not block: slow work goes to a goroutine.
	Departed func(Departure)
	// ControllersHung, if set, is called when a disengaged member's
	// controllers have not returned within StopTimeout while the process
	// goes on, with an error that wraps ErrControllersHung. It must end the
	// process (the syncer stops its manager and exits 1): the member is not
	// engaged again until they return. Nil: the member waits for them.
	ControllersHung func(error)
	// Changed, if set, is called when a member's health (up, held or
	// down: clusterset.Health) changes, or a member joins or leaves.
	Changed func()
	// Heartbeat, if set, tells of a member read through its publications
	// when its own mcs-syncer was last heard from (its marker renewed, as
	// observed here; zero if never) and how long a silence means it is
	// gone (0: it does not renew, so silence means nothing). An engaged
	// member that stays silent longer than that is down since it was last
	// heard from (or since it was engaged, whichever is later).
	Heartbeat func(clusterset.ClusterID) (last time.Time, timeout time.Duration)
	// PublicationsLeftOut, if set, says how many of a member's publications
	// its reader leaves out for the limit per member
	// (--max-publications-per-member), for the View.
	PublicationsLeftOut func(clusterset.ClusterID) int
	// Required names a member that every reloaded config must keep (the
	// local cluster in per-cluster mode); a config without it is refused.
	Required clusterset.ClusterID
	// Registerer receives the membership metrics; nil means none.
	Registerer prometheus.Registerer
	// QPS and Burst limit each member's client (rest.Config's fields).
	QPS   float32
	Burst int
	// Credentials run the exec credential plugins of the members' configs
	// with a deadline (internal/credentials); nil: a Plugins of its own,
	// with credentials.DefaultTimeout.
	Credentials *credentials.Plugins
	// RetryInterval is the first wait before a member that could not be
	// engaged is tried again (default 1s); it doubles up to
	// MaxRetryInterval (default 3s), so that a member that returns is seen
	// within seconds.
	RetryInterval, MaxRetryInterval time.Duration
	// HealthInterval is how often an engaged member is probed (default
	// 10s); a failed watch probes it at once. (client-go retries a refused
	// connection inside its reflectors without reporting it, so watches
	// alone miss a dead API server.)
	HealthInterval time.Duration
	// ConfigPollInterval is how often the config file, and the kubeconfigs
	// it names, are read again (default 2s).
	ConfigPollInterval time.Duration
}

// Departure is a member that left the config.
type Departure struct {
	ID clusterset.ClusterID
	// Client is a client of it, nil if its settings cannot be read.
	Client client.Client
	// Engaged says whether this process ever engaged it; if not, this
	// process wrote nothing into it.
	Engaged bool
	// SameClusterAs names a current member that is the same cluster (a
	// renamed member): the same kube-system namespace UID or, for a member
	// not identified yet, the same API server address. What mcs-syncer
	// wrote into the cluster is that member's now, and must stay.
	SameClusterAs clusterset.ClusterID
	// Context is for removing what mcs-syncer wrote into it. It ends after
	// DepartureTimeout, or with ErrRejoined as its cause as soon as the
	// cluster is a member again (under any ID): a clean-up that went on
	// would delete the new member's imports.
	Context context.Context
}

// DepartureTimeout bounds the clean-up of a member that left.
const DepartureTimeout = time.Minute

// DepartureSettle is how long the clean-up of a member that left waits
// before it removes anything: a member removed and added back meanwhile
// (a config written in two steps, an entry moved) keeps its imports and
// their clusterset IPs.
const DepartureSettle = 10 * time.Second

// ErrRejoined is the cause of a Departure's Context when the cluster
// became a member again.
var ErrRejoined = errors.New("the cluster is a member again")

// Set is the clusterset's membership while mcs-syncer runs. Add it to a
// manager (it needs leader election: only the leader engages members).
type Set struct {
	opts    Options
	path    string
	metrics *metrics
	deps    *deps

	mu      sync.Mutex
	members map[clusterset.ClusterID]*member
	ids     []clusterset.ClusterID
	// raw is the config file as last read; cfg the config in force.
	raw    []byte
	cfg    *Config
	reload reloadOutcome
	// resolver reads the IDs the config leaves to the clusters;
	// unresolved are the ID-less members it left out when last applied.
	resolver   *idResolver
	unresolved []unresolved
	// inventory reads the members of the config's inventory.
	inventory *inventoryReader
	// run is the context of Start, nil before.
	run context.Context
	// departures are the members that left and whose clean-up may still
	// be under way.
	departures map[*departure]bool
	// announced is each member's health as last announced (Changed);
	// hubHeld whether the hub was last seen out of reach.
	announced map[clusterset.ClusterID]healthClass
	hubHeld   bool
	// states is notified when a member joins or leaves, or its state
	// changes (Changes).
	states notify.Signal
}

// healthClass is what the import side acts on in a clusterset.Health.
type healthClass int

const (
	classDown healthClass = iota
	classUp
	classHeld
)

func classOf(h clusterset.Health) healthClass {
	switch {
	case h.Up:
		return classUp
	case h.Held:
		return classHeld
	}
	return classDown
}

// departure is a member that left, until its clean-up's context ends.
type departure struct {
	uid    types.UID
	host   string
	cancel context.CancelCauseFunc
}

var _ clusterset.Membership = (*Set)(nil)

// reloadOutcome is what became of the config file when it last changed.
type reloadOutcome struct {
	at time.Time
	// refusal says why it was refused; empty when it was applied.
	refusal string
}

// NewSet returns the membership of cfg, read from the file at path (which
// Start polls). It engages nothing before Start.
func NewSet(path string, cfg *Config, opts Options) (*Set, error) {
	if opts.Scheme == nil || opts.Engage == nil {
		return nil, errors.New("membership: scheme and engage are required")
	}
	opts.RetryInterval = cmp.Or(opts.RetryInterval, time.Second)
	opts.MaxRetryInterval = max(opts.RetryInterval, cmp.Or(opts.MaxRetryInterval, 3*time.Second))
	opts.HealthInterval = cmp.Or(opts.HealthInterval, 10*time.Second)
	opts.ConfigPollInterval = cmp.Or(opts.ConfigPollInterval, 2*time.Second)
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("clusterset config: %w", err)
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Set{opts: opts, path: path, metrics: m, members: map[clusterset.ClusterID]*member{}, raw: raw, cfg: cfg,
		reload: reloadOutcome{at: time.Now()}, departures: map[*departure]bool{}, announced: map[clusterset.ClusterID]healthClass{}}
	if opts.Credentials == nil {
		opts.Credentials = &credentials.Plugins{}
	}
	s.deps = &deps{opts: opts, metrics: m, changed: s.announceHealth, states: &s.states, identified: s.rejoined,
		newCluster: newCluster(opts), mcsAPI: mcsAPIOf(opts), newProber: newHealthCheck, stopTimeout: StopTimeout, processDone: s.done, failingLimit: failingLimit, clusterset: cfg.Clusterset}
	s.deps.hubs = newHubs(s.deps)
	s.resolver = newIDResolver(s.deps)
	s.inventory = newInventoryReader()
	if err := s.checkRequired(cfg); err != nil {
		return nil, err
	}
	now := time.Now()
	// The ID-less members join once Start has read their IDs.
	resolved, left := s.resolver.resolve(cfg)
	s.unresolved = left
	for _, mc := range resolved.Members { // the inventory's join once Start has read it
		s.members[mc.ID] = newMember(s.deps, mc, now)
		m.setState(mc.ID, Connecting)
	}
	s.ids = sortedIDs(s.members)
	m.reloaded(true)
	return s, nil
}

// config returns the config in force.
func (s *Set) config() *Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg
}

// Clusterset returns the clusterset's name.
func (s *Set) Clusterset() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.Clusterset
}

// IDs returns the current members' IDs, sorted.
func (s *Set) IDs() []clusterset.ClusterID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids
}

// snapshot returns the current members, in their order.
func (s *Set) snapshot() []*member {
	s.mu.Lock()
	defer s.mu.Unlock()
	members := make([]*member, 0, len(s.ids))
	for _, id := range s.ids {
		members = append(members, s.members[id])
	}
	return members
}

// Health reports a member's health: its own state's, and for an engaged
// member read through its publications, its heartbeat's.
func (s *Set) Health(id clusterset.ClusterID) clusterset.Health {
	s.mu.Lock()
	m := s.members[id]
	s.mu.Unlock()
	if m == nil {
		return clusterset.Health{}
	}
	h := m.health()
	if !h.Up || s.opts.Heartbeat == nil || s.opts.ReadsPublications == nil || !s.opts.ReadsPublications(id) {
		return h
	}
	last, timeout := s.opts.Heartbeat(id)
	if timeout <= 0 {
		return h
	}
	if last.Before(h.Since) {
		last = h.Since // silence counts while it can be heard, not before
	}
	if time.Since(last) <= timeout {
		return h
	}
	return clusterset.Health{Since: last, Answering: true}
}

// announceHealth calls Changed when a member's health class differs from
// the one last announced (a state that flipped, a heartbeat that went
// silent or resumed), and keeps the health metrics and the hub's log
// line up to date.
func (s *Set) announceHealth() {
	members := s.snapshot()
	next := make(map[clusterset.ClusterID]healthClass, len(members))
	throughHub, hubHeld, starting := false, true, false
	for _, m := range members {
		h := s.Health(m.id())
		next[m.id()] = classOf(h)
		s.metrics.setUp(m.id(), h.Up)
		if m.config.ThroughHub {
			throughHub = true
			hubHeld = hubHeld && h.Held
			starting = starting || m.firstSync()
		}
	}
	hubHeld = throughHub && hubHeld
	s.mu.Lock()
	changed := !maps.Equal(next, s.announced)
	// Members still in their first connection are held, but the hub has
	// not failed them: it is not said to be out of reach before one of
	// them was refused or could not reach it.
	hubFlipped := hubHeld != s.hubHeld && !(hubHeld && starting)
	s.announced = next
	if hubFlipped {
		s.hubHeld = hubHeld
	}
	s.mu.Unlock()
	s.metrics.setHubConnected(throughHub, !hubHeld)
	if hubFlipped {
		logger := log.Log.WithName("membership")
		if hubHeld {
			logger.Info("The hub cannot be read: the members read through it keep their exports as they are until it is back")
		} else {
			logger.Info("The hub can be read again")
		}
	}
	if changed {
		s.changed()
	}
}

// Status returns a member's status, and whether it is a member.
func (s *Set) Status(id clusterset.ClusterID) (Status, bool) {
	s.mu.Lock()
	m := s.members[id]
	s.mu.Unlock()
	if m == nil {
		return Status{}, false
	}
	return m.getStatus(), true
}

// Start engages every member and follows the config file until ctx ends;
// then it waits for every member's lifecycle to end.
func (s *Set) Start(ctx context.Context) error {
	s.mu.Lock()
	s.run = ctx
	for _, m := range s.members {
		s.startMember(ctx, m)
	}
	s.mu.Unlock()
	resolving := make(chan struct{})
	go func() {
		defer close(resolving)
		s.inBackground(ctx, s.resolver.refresh)
	}()
	reading := make(chan struct{})
	go func() {
		defer close(reading)
		s.inBackground(ctx, s.inventory.follow)
	}()
	ticker := time.NewTicker(s.opts.ConfigPollInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			<-resolving
			<-reading
			s.mu.Lock()
			members := slices.Collect(maps.Values(s.members))
			s.mu.Unlock()
			for _, m := range members {
				<-m.done
			}
			return nil
		case <-ticker.C:
			s.poll(ctx)
			s.announceHealth() // heartbeats fall silent without an event
		case <-s.inventory.changed:
			// A ClusterProfile created, changed or deleted: applied now,
			// not at the next poll.
			s.poll(ctx)
		}
	}
}

// inBackground calls read with the config in force, again and again
// until ctx ends, a config poll apart: what the config leaves to be read
// elsewhere (the IDs of the clusters that name themselves, which may name
// themselves later; an inventory's profiles), which poll then applies.
func (s *Set) inBackground(ctx context.Context, read func(context.Context, *Config)) {
	for {
		read(ctx, s.config())
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.opts.ConfigPollInterval):
		}
	}
}

// done is closed when Start's context ends (never before Start).
func (s *Set) done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run == nil {
		return nil
	}
	return s.run.Done()
}

func (s *Set) startMember(ctx context.Context, m *member) {
	ctx, cancel := context.WithCancelCause(ctx)
	m.cancel = func() { cancel(errMemberStopped) }
	go m.run(ctx)
}

// poll reads the config file (and the kubeconfigs it names) again and
// applies what changed.
func (s *Set) poll(ctx context.Context) {
	logger := log.FromContext(ctx)
	raw, err := os.ReadFile(s.path)
	s.mu.Lock()
	cfg, same := s.cfg, err == nil && bytes.Equal(raw, s.raw)
	s.mu.Unlock()
	if !same {
		next, err := s.parse(raw, err)
		if err != nil {
			s.mu.Lock()
			first := s.reload.refusal != err.Error()
			s.reload = reloadOutcome{at: time.Now(), refusal: err.Error()}
			s.raw = raw
			s.mu.Unlock()
			s.metrics.reloaded(false)
			if first {
				logger.Error(err, "Clusterset config not reloaded; keeping the last good membership", "path", s.path)
			}
			return
		}
		s.mu.Lock()
		s.raw, s.cfg, cfg = raw, next, next
		s.reload = reloadOutcome{at: time.Now()}
		s.mu.Unlock()
		s.metrics.reloaded(true)
		logger.Info("Clusterset config reloaded", "path", s.path)
	}
	expanded, fromInventory := s.inventory.expand(cfg)
	resolved, left := s.resolver.resolve(expanded)
	left = append(left, fromInventory...)
	s.mu.Lock()
	before := s.unresolved
	s.unresolved = left
	s.mu.Unlock()
	for _, u := range left {
		if !slices.Contains(before, u) {
			logger.Info("Member left out", "member", u.name, "why", u.leftOut())
		}
	}
	s.apply(ctx, resolved)
}

func (s *Set) parse(raw []byte, readErr error) (*Config, error) {
	if readErr != nil {
		return nil, fmt.Errorf("clusterset config: %w", readErr)
	}
	cfg, err := ParseConfig(raw, filepath.Dir(s.path))
	if err != nil {
		return nil, fmt.Errorf("clusterset config %s: %w", s.path, err)
	}
	if cfg.Clusterset != s.Clusterset() {
		return nil, fmt.Errorf("clusterset config %s: the clusterset's name changed from %s to %s; restart mcs-syncer to change it", s.path, s.Clusterset(), cfg.Clusterset)
	}
	if err := s.checkRequired(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

func (s *Set) checkRequired(cfg *Config) error {
	if s.opts.Required == "" || cfg.Member(s.opts.Required) != nil {
		return nil
	}
	if slices.ContainsFunc(cfg.Members, func(m Member) bool { return m.IDFromCluster }) {
		return fmt.Errorf("clusterset config %s: member %s (the local cluster) is missing: a member may leave its id to its ClusterProperty, but the local cluster's entry names it, as --local-cluster does", s.path, s.opts.Required)
	}
	return fmt.Errorf("clusterset config %s: member %s (the local cluster) is missing", s.path, s.opts.Required)
}

// stop stops the members whose settings changed (restarted) and those
// that left, all at once, and waits for them.
func (s *Set) stop(ctx context.Context, restarted, left []*member) {
	logger := log.FromContext(ctx)
	for _, m := range restarted {
		logger.Info("Member's settings changed; connecting anew", "cluster", m.id())
	}
	for _, m := range left {
		logger.Info("Member left the clusterset", "cluster", m.id())
	}
	stopping := append(slices.Clone(restarted), left...)
	for _, m := range stopping {
		m.cancel()
	}
	for _, m := range stopping {
		<-m.done
	}
}

// apply engages the members of cfg that are new or whose settings
// changed, and lets go of those that left. Every member that stops is
// stopped first, all at once, and waited for; then those that left are
// handed to Departed, and the new ones start, so that an old and a new
// lifecycle of one cluster (a renamed member) never write beside each
// other.
func (s *Set) apply(ctx context.Context, cfg *Config) {
	logger := log.FromContext(ctx)
	var left, restarted, started []*member
	joined := false
	s.mu.Lock()
	wanted := map[clusterset.ClusterID]bool{}
	now := time.Now()
	for _, mc := range cfg.Members {
		wanted[mc.ID] = true
		old := s.members[mc.ID]
		if old != nil && old.print == mc.fingerprint() {
			continue
		}
		if old != nil {
			restarted = append(restarted, old)
		} else {
			joined = true
			logger.Info("Member joined", "cluster", mc.ID)
		}
		m := newMember(s.deps, mc, now)
		s.members[mc.ID] = m
		started = append(started, m)
	}
	for id, m := range s.members {
		if !wanted[id] {
			left = append(left, m)
			delete(s.members, id)
		}
	}
	s.ids = sortedIDs(s.members)
	s.mu.Unlock()

	s.stop(ctx, restarted, left)
	for _, m := range left {
		s.metrics.forget(m.id())
		if s.opts.Departed != nil {
			s.opts.Departed(s.departure(ctx, m))
		}
	}
	for _, m := range started {
		s.metrics.setState(m.id(), Connecting)
		s.rejoined(m.id(), "")
		s.startMember(s.run, m)
	}
	if len(left) > 0 || len(restarted) > 0 || joined {
		s.states.Notify()
		s.changed()
	}
}

// departure describes member m that left to Options.Departed, with a
// client of it, and registers it until its context ends, so that its
// cluster's return ends that context.
func (s *Set) departure(ctx context.Context, m *member) Departure {
	uid, engaged := m.identity()
	d := Departure{ID: m.id(), Engaged: engaged}
	if rc, err := m.config.RESTConfig(); err == nil {
		if rc, err = s.opts.Credentials.Configure(rc); err != nil {
			return d
		}
		rc.QPS, rc.Burst = s.opts.QPS, s.opts.Burst
		if c, err := client.New(rc, client.Options{Scheme: s.opts.schemeFor(m.apiVersion())}); err == nil {
			d.Client = c
		}
	}
	host := m.address()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range s.ids {
		if s.members[id].sameCluster(uid, host) {
			d.SameClusterAs = id
			break
		}
	}
	timed, cancelTimeout := context.WithTimeout(ctx, DepartureTimeout)
	dctx, cancel := context.WithCancelCause(timed)
	entry := &departure{uid: uid, host: host, cancel: cancel}
	s.departures[entry] = true
	context.AfterFunc(dctx, func() {
		cancelTimeout()
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.departures, entry)
	})
	d.Context = dctx
	return d
}

// rejoined ends the departures of member id's cluster, now that it is a
// member again: by its address when it starts, by its identity (uid) once
// that is read.
func (s *Set) rejoined(id clusterset.ClusterID, uid types.UID) {
	s.mu.Lock()
	m := s.members[id]
	var ended []*departure
	for d := range s.departures {
		if m != nil && m.sameCluster(d.uid, d.host) || uid != "" && d.uid == uid {
			ended = append(ended, d)
		}
	}
	s.mu.Unlock()
	for _, d := range ended {
		d.cancel(ErrRejoined)
	}
}

// Changes returns a channel closed at the next change of what IDs and
// Status answer: a member joins or leaves, or its state changes
// (notify.Signal's Changed). Health changes with the state, and for a
// member read through its publications with its heartbeat too, which
// Options.Heartbeat's source tells of.
func (s *Set) Changes() <-chan struct{} {
	return s.states.Changed()
}

func (s *Set) changed() {
	if s.opts.Changed != nil {
		s.opts.Changed()
	}
}

func sortedIDs(members map[clusterset.ClusterID]*member) []clusterset.ClusterID {
	ids := make([]clusterset.ClusterID, 0, len(members))
	for id := range members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// schemeFor returns the scheme of a member's client and cache engaged on
// version gv of its API: MCSSchemes' for a version of the MCS API, else
// Scheme (the one of a member read through its publications, whose API is
// mcs-syncer's own).
func (o *Options) schemeFor(gv schema.GroupVersion) *runtime.Scheme {
	if s, ok := o.MCSSchemes[gv]; ok {
		return s
	}
	return o.Scheme
}
