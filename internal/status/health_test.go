package status

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcs-syncer/mcs-syncer/internal/membership"
)

// view is a leading mcs-syncer's view at now, running for cluster.
func view(cluster, version string, now time.Time, members ...membership.MemberView) func(context.Context) (membership.View, error) {
	return func(context.Context) (membership.View, error) {
		return membership.View{Cluster: cluster, Version: version, Leading: true, Now: now, Members: members}, nil
	}
}

// TestGatherReportsHealth: each member's health is the worst that a
// leading mcs-syncer sees, a member not up is a problem naming who sees
// it so, a heartbeat's age is taken on the mcs-syncer's clock, a version
// is that of the mcs-syncer that runs for the member, and a standby's or
// an unreadable mcs-syncer's view counts for nothing.
func TestGatherReportsHealth(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	beat := now.Add(-4 * time.Second)
	up := func(id string) membership.MemberView {
		return membership.MemberView{ID: id, State: membership.Engaged, Health: membership.HealthUp, HealthSince: now.Add(-time.Hour), LastHeartbeat: &beat}
	}
	westDown := membership.MemberView{ID: "west", State: membership.Unreachable, Cause: "connection refused", Health: membership.HealthDown, HealthSince: now.Add(-time.Minute)}
	r := Gather(t.Context(), Input{
		Members: []Member{
			member(t, "east", converged(t)...),
			{ID: "west", Syncers: func(context.Context) ([]Syncer, error) {
				return []Syncer{{Name: "west: mcs-system/mcs-syncer-0", Read: view("west", "v2", now, up("east"), up("west"))}}, nil
			}},
			{ID: "south"},
		},
		Syncers: []Syncer{
			{Name: "east's", Read: view("east", "v1", now, up("east"), westDown)},
			{Name: "standby", Read: func(context.Context) (membership.View, error) {
				return membership.View{Cluster: "east", Leading: false, Members: []membership.MemberView{westDown}}, nil
			}},
			{Name: "gone", Read: func(context.Context) (membership.View, error) {
				return membership.View{}, errors.New("connection refused")
			}},
		},
	})
	byID := map[string]MemberReport{}
	for _, m := range r.Members {
		byID[m.ID] = m
	}
	if e := byID["east"]; e.Health != membership.HealthUp || e.Version != "v1" || e.HeartbeatAgeSeconds == nil || *e.HeartbeatAgeSeconds != 4 || len(e.SeenBy) != 1 {
		t.Errorf("east: %+v", e)
	}
	// west's own Pod is listed through west (its Syncers), but west's
	// client is nil here: it is not read, so neither is its Pod.
	if w := byID["west"]; w.Health != membership.HealthDown || w.State != string(membership.Unreachable) || w.HealthSince != "2026-11-27T11:59:00Z" || len(w.SeenBy) != 1 {
		t.Errorf("west: %+v", w)
	}
	if s := byID["south"]; s.Health != HealthUnknown || s.Version != "" {
		t.Errorf("south, listed by none: %+v", s)
	}
	want := "member west is down since 2026-11-27T11:59:00Z, as east's sees it (unreachable: connection refused)"
	if len(r.Problems) != 1 || r.Problems[0] != want {
		t.Errorf("problems %q, want [%q]", r.Problems, want)
	}
	if len(r.Syncers) != 3 || r.Syncers[1].Leading || r.Syncers[2].Error == "" {
		t.Errorf("syncers %+v", r.Syncers)
	}
	text := r.Text(true)
	for _, want := range []string{"east's: down", "4s ago", "gone", "connection refused", "STATE"} {
		if !strings.Contains(text, want) {
			t.Errorf("the wide text lacks %q:\n%s", want, text)
		}
	}
}

// TestGatherReadsTheSyncersOfMembers: the mcs-syncers found in a member
// that is read count; the version of a member is its own mcs-syncer's.
func TestGatherReadsTheSyncersOfMembers(t *testing.T) {
	now := time.Now()
	east := member(t, "east", converged(t)...)
	east.Syncers = func(context.Context) ([]Syncer, error) {
		return []Syncer{{Name: "east: mcs-system/mcs-syncer-0", Read: view("", "v3", now,
			membership.MemberView{ID: "east", Health: membership.HealthUp}, membership.MemberView{ID: "north", Health: membership.HealthHeld})}}, nil
	}
	north := member(t, "north")
	north.Syncers = func(context.Context) ([]Syncer, error) { return nil, errors.New("pods is forbidden") }
	r := Gather(t.Context(), Input{Members: []Member{east, north}})
	if r.Members[0].Health != membership.HealthUp || r.Members[0].Version != "v3" || r.Members[1].Health != membership.HealthHeld || r.Members[1].Version != "v3" {
		t.Errorf("members %+v", r.Members)
	}
	if len(r.Syncers) != 2 || r.Syncers[0].Name != "north" || !strings.Contains(r.Syncers[0].Error, "pods is forbidden") || r.Syncers[1].Cluster != "" {
		t.Errorf("syncers %+v", r.Syncers)
	}
	if r.Converged() {
		t.Error("north held: converged")
	}
}

// TestGatherReportsAMemberOverItsLimit: a member that a syncer reads only
// in part, for its publication limit, is a problem naming the syncer and
// the count; a member read whole is none.
func TestGatherReportsAMemberOverItsLimit(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	up := membership.MemberView{ID: "east", State: membership.Engaged, Health: membership.HealthUp, HealthSince: now}
	flooding := membership.MemberView{ID: "west", State: membership.Engaged, Health: membership.HealthUp, HealthSince: now, PublicationsLeftOut: 50}
	r := Gather(t.Context(), Input{
		Members: []Member{member(t, "east", converged(t)...), {ID: "west"}},
		Syncers: []Syncer{{Name: "north's", Read: view("north", "v1", now, up, flooding)}},
	})
	want := "member west publishes more than north's holds of one member: 50 of its publications are left out (--max-publications-per-member, --max-publication-bytes-per-member)"
	if len(r.Problems) != 1 || r.Problems[0] != want {
		t.Errorf("problems %q, want [%q]", r.Problems, want)
	}
}
