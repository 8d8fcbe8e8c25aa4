package membership

import (
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"sync"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// idResolver reads the IDs that the config leaves to the members' clusters
// (KEP-2149: ClusterProperty cluster.clusterset.k8s.io). It reads them in
// the background (refresh) and fills them in when the config is applied
// (resolve), so that a member whose API server is slow or down never holds
// up the config's poll.
//
// An ID once read is kept until the cluster names another valid one (as
// the last good config is kept when the file turns bad): a member whose
// API server goes down stays a member under that ID (its exports are kept
// for the grace, as any member's), instead of leaving the clusterset and
// having what it exported cleaned up.
type idResolver struct {
	deps *deps

	mu sync.Mutex
	// entries are what is known of each ID-less entry, by connectionKey.
	entries map[string]*idEntry
}

// idEntry is what is known of one ID-less entry's cluster.
type idEntry struct {
	// id is the last ID its cluster gave, "" if none yet.
	id clusterset.ClusterID
	// problem says why no ID was read last time ("" if one was).
	problem string
	// check is the health check it is read through, built for the
	// connection settings whose print is print.
	check prober
	print [sha256.Size]byte
}

func newIDResolver(d *deps) *idResolver {
	return &idResolver{deps: d, entries: map[string]*idEntry{}}
}

// connectionKey is what identifies an ID-less entry from one config to the
// next: where it connects to, not the credentials (a rotated token keeps
// the ID read before).
func connectionKey(m *Member) string {
	return fmt.Sprintf("%s\x00%s\x00%v", m.Kubeconfig, m.Context, m.InCluster)
}

// refresh reads the ClusterProperty of every ID-less member of cfg, at the
// same time, and forgets the entries cfg no longer has.
func (r *idResolver) refresh(ctx context.Context, cfg *Config) {
	wanted := map[string]*Member{}
	for i := range cfg.Members {
		if m := &cfg.Members[i]; m.IDFromCluster {
			wanted[connectionKey(m)] = m
		}
	}
	r.mu.Lock()
	maps.DeleteFunc(r.entries, func(key string, _ *idEntry) bool { return wanted[key] == nil })
	for key := range wanted {
		if r.entries[key] == nil {
			r.entries[key] = &idEntry{}
		}
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for key, m := range wanted {
		wg.Go(func() {
			id, err := r.read(ctx, key, m)
			r.mu.Lock()
			defer r.mu.Unlock()
			e := r.entries[key]
			if e == nil {
				return
			}
			if err != nil {
				e.problem = err.Error() // the ID read before, if any, stays
				return
			}
			e.id, e.problem = id, ""
		})
	}
	wg.Wait()
}

// read reads the ID that the cluster of entry m gives itself.
func (r *idResolver) read(ctx context.Context, key string, m *Member) (clusterset.ClusterID, error) {
	check, err := r.checkOf(key, m)
	if err != nil {
		return "", err
	}
	c, err := check.claims(ctx)
	switch {
	case err != nil:
		return "", err
	case c.id == "":
		return "", fmt.Errorf("its cluster has no ClusterProperty %s (or does not serve about.k8s.io/v1alpha1, or does not let it be read)", clusterIDProperty)
	}
	id, err := clusterset.ParseClusterID(c.id)
	if err != nil {
		return "", fmt.Errorf("its ClusterProperty %s is not a cluster ID: %w", clusterIDProperty, err)
	}
	return id, nil
}

// checkOf returns the health check of entry m, built anew when its
// connection settings (its kubeconfig's content included) changed.
func (r *idResolver) checkOf(key string, m *Member) (prober, error) {
	conn := m.connectionPrint()
	r.mu.Lock()
	e := r.entries[key]
	if e != nil && e.check != nil && e.print == conn {
		defer r.mu.Unlock()
		return e.check, nil
	}
	r.mu.Unlock()
	rc, err := m.RESTConfig()
	if err != nil {
		return nil, err
	}
	check, err := r.deps.newProber(rc, r.deps.mcsAPI)
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", m.name(), err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[key]; e != nil {
		e.check, e.print = check, conn
	}
	return check, nil
}

// unresolved is an ID-less member left out of the membership, and why.
type unresolved struct {
	name, cause string
	// profile: a ClusterProfile of the inventory (inventory.go), not an
	// ID-less entry of the config.
	profile bool
}

// leftOut says why the member is left out, for /readyz and the log.
func (u unresolved) leftOut() string {
	if u.profile {
		return "left out: " + u.cause
	}
	return "left out until its cluster names it: " + u.cause
}

// namedIDs returns the IDs that cfg's entries name (not those left to
// their clusters), each said to be by's.
func namedIDs(cfg *Config, by string) map[clusterset.ClusterID]string {
	taken := map[clusterset.ClusterID]string{}
	for _, m := range cfg.Members {
		if !m.IDFromCluster {
			taken[m.ID] = by
		}
	}
	return taken
}

// resolve returns cfg with the IDs its clusters gave filled in, and the
// ID-less members left out, with why, in the config's order: those whose
// cluster has not named itself yet, and those that name an ID another
// member has.
func (r *idResolver) resolve(cfg *Config) (*Config, []unresolved) {
	out := *cfg
	out.Members = make([]Member, 0, len(cfg.Members))
	taken := namedIDs(cfg, "the config's")
	var left []unresolved
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range cfg.Members {
		if !m.IDFromCluster {
			out.Members = append(out.Members, m)
			continue
		}
		e := r.entries[connectionKey(&m)]
		switch {
		case e == nil || e.id == "" && e.problem == "":
			left = append(left, unresolved{name: m.name(), cause: "its ClusterProperty " + clusterIDProperty + " is not read yet"})
		case e.id == "":
			left = append(left, unresolved{name: m.name(), cause: e.problem})
		case taken[e.id] != "" && e.problem != "":
			left = append(left, unresolved{name: m.name(), cause: e.problem}) // what it says now, not the ID it gave before
		case taken[e.id] != "":
			left = append(left, unresolved{name: m.name(), cause: fmt.Sprintf("its ClusterProperty %s names it %q, which is %s member already", clusterIDProperty, e.id, taken[e.id])})
		default:
			taken[e.id] = "another ID-less entry's"
			m.ID = e.id
			out.Members = append(out.Members, m)
		}
	}
	return &out, left
}
