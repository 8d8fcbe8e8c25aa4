package publish

import (
	"sync"
	"time"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/notify"
)

// SilenceIntervals is how many of its renewal intervals a member's marker
// may go unrenewed before the member counts as silent: two renewals may
// be lost or late (a loaded publication server) without a withdrawal.
const SilenceIntervals = 3

// DefaultHeartbeat is the publishers' renewal interval unless set
// otherwise; readers that have not seen a member's marker yet give it
// SilenceIntervals of it.
const DefaultHeartbeat = 15 * time.Second

// Heartbeats records, for the members read through their publications,
// when each was last heard from: when this process last saw its marker
// renewed (its own clock, so the members' clocks do not matter). Readers
// write it; membership asks it (membership.Options.Heartbeat). It
// outlives the readers, which come and go with their member's connection.
// It also keeps how many of each member's publications its reader leaves
// out for its limit (LeftOut).
type Heartbeats struct {
	mu sync.Mutex
	m  map[clusterset.ClusterID]*heartbeat
	// leftOut counts, by member, the publications its reader leaves out
	// now (ReaderOptions.MaxObjects); members with none are absent.
	leftOut map[clusterset.ClusterID]int
	// listed are the members whose publications were listed once: what
	// their marker says of their readers (ReadsWholeOnly) is known.
	listed map[clusterset.ClusterID]bool
	// readers is notified when what ReadsWholeOnly or Listed answers
	// changes.
	readers notify.Signal
}

type heartbeat struct {
	// renew is the marker's renewTime as last seen, heard when it was.
	renew    time.Time
	heard    time.Time
	interval time.Duration
	// readsParts is the marker's ReadsParts, as last seen.
	readsParts bool
}

// NewHeartbeats returns an empty record.
func NewHeartbeats() *Heartbeats {
	return &Heartbeats{m: map[clusterset.ClusterID]*heartbeat{}, listed: map[clusterset.ClusterID]bool{}}
}

// observe records the marker of cluster as seen now: a renewTime not seen
// before is a sign of life.
func (h *Heartbeats) observe(cluster clusterset.ClusterID, marker *v1alpha1.PublishedExport, now time.Time) {
	if h == nil {
		return
	}
	h.mu.Lock()
	hb := h.m[cluster]
	readersChanged := hb == nil || hb.readsParts != marker.Spec.ReadsParts
	if hb == nil {
		hb = &heartbeat{}
		h.m[cluster] = hb
	}
	hb.interval = time.Duration(marker.Spec.RenewIntervalSeconds) * time.Second
	hb.readsParts = marker.Spec.ReadsParts
	var renew time.Time
	if marker.Spec.RenewTime != nil {
		renew = marker.Spec.RenewTime.Time
	}
	if hb.heard.IsZero() || !renew.Equal(hb.renew) {
		hb.renew, hb.heard = renew, now
	}
	h.mu.Unlock()
	if readersChanged {
		h.readers.Notify()
	}
}

// setLeftOut records that cluster's reader leaves n of its publications
// out for its limit.
func (h *Heartbeats) setLeftOut(cluster clusterset.ClusterID, n int) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if n == 0 {
		delete(h.leftOut, cluster)
		return
	}
	if h.leftOut == nil {
		h.leftOut = map[clusterset.ClusterID]int{}
	}
	h.leftOut[cluster] = n
}

// LeftOut returns how many of cluster's publications its reader leaves out
// for its limit now (--max-publications-per-member): what /members says of
// it (membership.Options.PublicationsLeftOut).
func (h *Heartbeats) LeftOut(cluster clusterset.ClusterID) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.leftOut[cluster]
}

// Of returns when cluster was last heard from (zero if its marker was
// never seen) and how long a silence may last before it counts as gone:
// SilenceIntervals of its marker's interval, of DefaultHeartbeat for a
// member never marked, and 0 (never silent) for a marker without a
// heartbeat (an older publisher).
func (h *Heartbeats) Of(cluster clusterset.ClusterID) (last time.Time, timeout time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	hb := h.m[cluster]
	if hb == nil {
		return time.Time{}, SilenceIntervals * DefaultHeartbeat
	}
	return hb.heard, SilenceIntervals * hb.interval
}

// ReadsWholeOnly returns the members whose marker, as last seen, says
// that their readers do not assemble parts (an mcs-syncer before them),
// in no set order.
func (h *Heartbeats) ReadsWholeOnly() []clusterset.ClusterID {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ids []clusterset.ClusterID
	for id, hb := range h.m {
		if !hb.readsParts {
			ids = append(ids, id)
		}
	}
	return ids
}

// markListed records that cluster's publications were listed once.
func (h *Heartbeats) markListed(cluster clusterset.ClusterID) {
	if h == nil {
		return
	}
	h.mu.Lock()
	already := h.listed[cluster]
	h.listed[cluster] = true
	h.mu.Unlock()
	if !already {
		h.readers.Notify()
	}
}

// Listed reports whether cluster's publications were listed once, so that
// its marker, if it has one, was seen.
func (h *Heartbeats) Listed(cluster clusterset.ClusterID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.listed[cluster]
}

// Forget drops what is known of a member that left.
func (h *Heartbeats) Forget(cluster clusterset.ClusterID) {
	h.mu.Lock()
	delete(h.m, cluster)
	delete(h.listed, cluster)
	h.mu.Unlock()
	h.readers.Notify()
}

// ReadersChanged returns a channel closed at the next change of what
// ReadsWholeOnly or Listed answers (notify.Signal's Changed).
func (h *Heartbeats) ReadersChanged() <-chan struct{} {
	return h.readers.Changed()
}
