package membership

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/version"
)

// View is what one mcs-syncer sees of the clusterset, served as JSON at
// /members of its probe address: what `kubectl mcs status` reports as each
// member's health. Times are this mcs-syncer's clock; Now says what it
// read when it answered, so that a reader computes ages on that clock, not
// its own.
type View struct {
	// Cluster is the member this mcs-syncer runs for (per-cluster and hub
	// mode); "" in central mode, where it runs for every member.
	Cluster  string `json:"cluster,omitempty"`
	Version  string `json:"version"`
	Revision string `json:"revision"`
	// Leading is false for a standby replica: it engages no member, and
	// its Members is empty.
	Leading bool         `json:"leading"`
	Now     time.Time    `json:"now"`
	Members []MemberView `json:"members"`
}

// Member health as a View says it.
const (
	HealthUp   = "up"
	HealthHeld = "held"
	// HealthSilent: engaged, but its own mcs-syncer has stopped renewing
	// its heartbeat.
	HealthSilent = "silent"
	HealthDown   = "down"
)

// MemberView is one member as a View sees it.
type MemberView struct {
	ID    string    `json:"id"`
	State State     `json:"state"`
	Since time.Time `json:"since"`
	Cause string    `json:"cause,omitempty"`
	// Health is up, held, silent or down; HealthSince is since when it is
	// up, or when it was last up (down, silent), or the hub was (held).
	Health      string    `json:"health"`
	HealthSince time.Time `json:"healthSince"`
	// LastHeartbeat is when its marker was last seen renewed, for a
	// member read through its publications (per-cluster and hub mode);
	// absent for the others, or if it was never seen renewed.
	LastHeartbeat *time.Time `json:"lastHeartbeat,omitempty"`
	// MCSAPI is the version of the MCS API (ServiceExport, ServiceImport)
	// the member was last engaged on, for a member whose own objects are
	// read: multicluster.x-k8s.io/v1beta1 or v1alpha1 (internal/mcsapi).
	MCSAPI string `json:"mcsAPI,omitempty"`
	// ClusterProfile is the namespace/name of the inventory's profile the
	// member comes from; ProfileNote what that profile says against its
	// cluster (ControlPlaneHealthy not True).
	ClusterProfile string `json:"clusterProfile,omitempty"`
	ProfileNote    string `json:"profileNote,omitempty"`
	// PublicationsLeftOut is how many of the member's publications this
	// mcs-syncer leaves out because the member publishes more than it
	// holds of one member (--max-publications-per-member).
	PublicationsLeftOut int `json:"publicationsLeftOut,omitempty"`
}

// View returns the Set's view, as this process's member cluster (""
// in central mode) sees it.
func (s *Set) View(cluster string) View {
	v, r := version.Get()
	view := View{Cluster: cluster, Version: v, Revision: r, Leading: true, Now: time.Now(), Members: []MemberView{}}
	for _, m := range s.snapshot() {
		st := m.getStatus()
		h := s.Health(m.id())
		mv := MemberView{ID: string(m.id()), State: st.State, Since: st.Since, Cause: st.Cause, Health: healthName(h, st.State), HealthSince: h.Since,
			MCSAPI: m.mcsAPI(), ProfileNote: s.inventory.note(m.id())}
		if m.config.Access != nil {
			mv.ClusterProfile = m.config.Access.Profile
		}
		if s.opts.PublicationsLeftOut != nil {
			mv.PublicationsLeftOut = s.opts.PublicationsLeftOut(m.id())
		}
		if s.opts.Heartbeat != nil && s.opts.ReadsPublications != nil && s.opts.ReadsPublications(m.id()) {
			if last, _ := s.opts.Heartbeat(m.id()); !last.IsZero() {
				mv.LastHeartbeat = &last
			}
		}
		view.Members = append(view.Members, mv)
	}
	return view
}

// healthName names a member's health h, of its state: an engaged member
// that is not up has fallen silent.
func healthName(h clusterset.Health, state State) string {
	switch {
	case h.Held:
		return HealthHeld
	case h.Up:
		return HealthUp
	case state == Engaged:
		return HealthSilent
	}
	return HealthDown
}

// members serves the View as JSON; a standby serves one that says so.
func (p *ProbeServer) members(w http.ResponseWriter, _ *http.Request) {
	var view View
	if p.Leading != nil && !p.Leading() {
		v, r := version.Get()
		view = View{Cluster: p.Cluster, Version: v, Revision: r, Now: time.Now(), Members: []MemberView{}}
	} else {
		view = p.Set.View(p.Cluster)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(view)
}
