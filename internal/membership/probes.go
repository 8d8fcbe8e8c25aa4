package membership

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// Readiness tells whether mcs-syncer is ready, with one line per check in
// the format of Kubernetes' /readyz?verbose. It is ready once no member is
// in its first connecting or syncing: a member that cannot be engaged
// (unreachable, missing CRDs, refused) is reported with its cause but does
// not make the process unready, because nothing mcs-syncer does would
// change that; nor does one that syncs again after a failure (a member
// whose token answers the probe but may not list cycles forbidden,
// syncing, forbidden: the process's readiness would cycle with it).
func (s *Set) Readiness() (ready bool, lines []string) {
	s.mu.Lock()
	started, reload, path, left := s.run != nil, s.reload, s.path, s.unresolved
	s.mu.Unlock()
	members := s.snapshot()
	ready = started
	if !started {
		lines = append(lines, "[-]members failed: not started yet")
	}
	if reload.refusal != "" {
		lines = append(lines, fmt.Sprintf("[+]config ok: %s: last reload refused at %s, the last good membership stays: %s", path, stamp(reload.at), reload.refusal))
	} else {
		lines = append(lines, fmt.Sprintf("[+]config ok: %s: loaded at %s", path, stamp(reload.at)))
	}
	if line, inventoryReady := s.inventory.readiness(s.config()); line != "" {
		ready = ready && inventoryReady
		lines = append(lines, line)
	}
	for _, u := range left {
		lines = append(lines, fmt.Sprintf("[+]member %s ok: %s", u.name, u.leftOut()))
	}
	for _, m := range members {
		st := m.getStatus()
		detail := s.detail(m, st)
		if (st.State == Connecting || st.State == Syncing) && m.firstSync() {
			ready = false
			lines = append(lines, fmt.Sprintf("[-]member %s failed: %s", m.id(), detail))
			continue
		}
		lines = append(lines, fmt.Sprintf("[+]member %s ok: %s", m.id(), detail))
	}
	return ready, lines
}

// detail is member m's /readyz text, of its status st: its state, since
// when and why, the MCS API it is engaged on, what its ClusterProfile says,
// and its health.
func (s *Set) detail(m *member, st Status) string {
	detail := fmt.Sprintf("%s since %s", st.State, stamp(st.Since))
	if api := m.mcsAPI(); api != "" && st.State.connected() {
		detail += " on " + api
	}
	if st.Cause != "" {
		detail += ": " + st.Cause
	}
	if note := s.inventory.note(m.id()); note != "" {
		detail += "; " + note
	}
	switch h := s.Health(m.id()); healthName(h, st.State) {
	case HealthHeld:
		detail = "held: the hub it is read through cannot be read, so its exports are kept as they are; the hub is " + detail
	case HealthSilent:
		detail = fmt.Sprintf("silent since %s: engaged, but its mcs-syncer has not renewed its heartbeat; its exports are withdrawn once the grace after that has run out", stamp(h.Since))
	case HealthDown:
		detail += fmt.Sprintf("; down since %s, its exports are withdrawn once the grace after that has run out", stamp(h.Since))
	}
	return detail
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// ProbeServer serves /healthz, /readyz and /members (the View, as JSON)
// on Addr. Unlike
// controller-runtime's, its /readyz?verbose says why a check fails; a
// replica that does not lead (Leading false) is ready as a standby. Add it
// to the manager: it runs whether or not this replica leads.
type ProbeServer struct {
	Addr string
	Set  *Set
	// Cluster is the member this process runs for, "" in central mode:
	// what /members says it is.
	Cluster string
	Leading func() bool
	// Publishing, if set, says why the local member's publications do not
	// reach the others ("" when they do): a failed check of its own.
	Publishing func() string
}

// NeedLeaderElection is false: every replica answers its probes.
func (p *ProbeServer) NeedLeaderElection() bool { return false }

// Start serves until ctx ends.
func (p *ProbeServer) Start(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc("/readyz", p.readyz)
	mux.HandleFunc("/members", p.members)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		return fmt.Errorf("health probes: %w", err)
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (p *ProbeServer) readyz(w http.ResponseWriter, r *http.Request) {
	var ready bool
	var lines []string
	if p.Leading != nil && !p.Leading() {
		ready, lines = true, []string{"[+]leader-election ok: standby, another replica leads"}
	} else {
		ready, lines = p.Set.Readiness()
		if p.Publishing != nil {
			if why := p.Publishing(); why != "" {
				ready = false
				lines = append(lines, "[-]publisher failed: the other members do not hear from this one: "+why)
			} else {
				lines = append(lines, "[+]publisher ok")
			}
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if !ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, verbose := r.URL.Query()["verbose"]
	if verbose || !ready {
		fmt.Fprintln(w, strings.Join(lines, "\n"))
	}
	if ready {
		fmt.Fprintln(w, "readyz check passed")
	} else {
		fmt.Fprintln(w, "readyz check failed")
	}
}
