package status

import (
	"context"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/mcs-syncer/mcs-syncer/internal/membership"
)

// Syncer is an mcs-syncer whose view of the members the report reads
// (its /members).
type Syncer struct {
	// Name says where it runs: "<member>: <namespace>/<pod>", or its URL.
	Name string
	Read func(context.Context) (membership.View, error)
}

// SyncerReport is one mcs-syncer read.
type SyncerReport struct {
	Name string `json:"name"`
	// Cluster is the member it runs for; "" in central mode.
	Cluster string `json:"cluster,omitempty"`
	Version string `json:"version,omitempty"`
	// Leading: its view counts; a standby's lists no member.
	Leading bool   `json:"leading"`
	Error   string `json:"error,omitempty"`
}

// Seen is a member as one mcs-syncer sees it.
type Seen struct {
	Syncer string `json:"syncer"`
	membership.MemberView
	// HeartbeatAgeSeconds is how old its last heartbeat was, on that
	// mcs-syncer's clock, when it answered.
	HeartbeatAgeSeconds *int64 `json:"heartbeatAgeSeconds,omitempty"`
}

// healthRank orders health from best to worst: a member's health in the
// report is the worst that any mcs-syncer sees.
var healthRank = []string{membership.HealthUp, membership.HealthHeld, membership.HealthSilent, membership.HealthDown}

// HealthUnknown is the health of a member that no mcs-syncer read lists.
const HealthUnknown = "unknown"

// viewed is a Syncer's answer.
type viewed struct {
	view membership.View
	err  error
}

// readSyncers reads every syncer, parallelReads at a time.
func readSyncers(ctx context.Context, syncers []Syncer) []viewed {
	out := make([]viewed, len(syncers))
	var g errgroup.Group
	g.SetLimit(parallelReads)
	for i, s := range syncers {
		g.Go(func() error {
			out[i].view, out[i].err = s.Read(ctx)
			return nil
		})
	}
	_ = g.Wait() // each error stays in its viewed
	return out
}

// addHealth reports what the syncers see of each member in r.Members,
// adding a member that is not up to r.Problems.
func (r *Report) addHealth(syncers []Syncer, views []viewed) {
	byID := map[string]*MemberReport{}
	for i := range r.Members {
		byID[r.Members[i].ID] = &r.Members[i]
		r.Members[i].Health = HealthUnknown
	}
	for i, s := range syncers {
		v := views[i]
		sr := SyncerReport{Name: s.Name, Cluster: v.view.Cluster, Version: v.view.Version, Leading: v.view.Leading}
		if v.err != nil {
			sr = SyncerReport{Name: s.Name, Error: v.err.Error()}
		}
		r.Syncers = append(r.Syncers, sr)
		if v.err != nil || !v.view.Leading {
			continue
		}
		for _, mv := range v.view.Members {
			if m := byID[mv.ID]; m != nil {
				m.see(s.Name, v.view, mv)
			}
		}
	}
	for i := range r.Members {
		m := &r.Members[i]
		if m.Health == HealthUnknown || m.Health == membership.HealthUp {
			continue
		}
		for _, seen := range m.SeenBy {
			if seen.Health == membership.HealthUp {
				continue
			}
			why := string(seen.State)
			if seen.Cause != "" {
				why += ": " + seen.Cause
			}
			r.Problems = append(r.Problems, fmt.Sprintf("member %s is %s since %s, as %s sees it (%s)",
				m.ID, seen.Health, seen.HealthSince.UTC().Format(time.RFC3339), seen.Syncer, why))
		}
	}
	r.addLeftOut()
}

// addLeftOut adds to r.Problems each member that a syncer reads only in
// part, because it publishes more than the syncer holds of one member.
func (r *Report) addLeftOut() {
	for _, m := range r.Members {
		for _, seen := range m.SeenBy {
			if seen.PublicationsLeftOut > 0 {
				r.Problems = append(r.Problems, fmt.Sprintf("member %s publishes more than %s holds of one member: %d of its publications are left out (--max-publications-per-member, --max-publication-bytes-per-member)",
					m.ID, seen.Syncer, seen.PublicationsLeftOut))
			}
		}
	}
}

// see adds what view (read from syncer) says of m.
func (m *MemberReport) see(syncer string, view membership.View, mv membership.MemberView) {
	seen := Seen{Syncer: syncer, MemberView: mv}
	if mv.LastHeartbeat != nil {
		age := int64(view.Now.Sub(*mv.LastHeartbeat).Round(time.Second) / time.Second)
		seen.HeartbeatAgeSeconds = &age
		if m.HeartbeatAgeSeconds == nil || age < *m.HeartbeatAgeSeconds {
			m.HeartbeatAgeSeconds = &age
		}
	}
	m.SeenBy = append(m.SeenBy, seen)
	if m.Health == HealthUnknown || slices.Index(healthRank, mv.Health) > slices.Index(healthRank, m.Health) {
		m.Health, m.HealthSince, m.State = mv.Health, mv.HealthSince.UTC().Format(time.RFC3339), string(mv.State)
	}
	// Its version is that of the mcs-syncer that runs for it: its own
	// (per-cluster and hub mode), or the central one.
	if view.Cluster == m.ID || (view.Cluster == "" && m.Version == "") {
		m.Version = view.Version
	}
}
