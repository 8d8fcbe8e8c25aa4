package imports

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// view is what the controller knows of one key's exports right now.
type view struct {
	// exports are those of members that are connected, or disconnected
	// for less than the grace.
	exports []*clusterset.ExportedService
	// unsettled are the members whose exports the Store does not fully
	// know yet: absence of their export proves nothing.
	unsettled map[clusterset.ClusterID]bool
	// recheck is when to look again without being told (a grace that runs
	// out, a first pass under way); 0 means never.
	recheck time.Duration
}

// viewOf returns the view of key's exports.
func (c *Controller) viewOf(key types.NamespacedName) view {
	v := view{unsettled: map[clusterset.ClusterID]bool{}}
	now := time.Now()
	// graceLeft tells how long a disconnected member still counts.
	graceLeft := func(since time.Time) time.Duration { return c.opts.UnreachableGrace - now.Sub(since) }
	for _, es := range c.opts.Store.Get(key) {
		connected, since := c.opts.Membership.Connected(es.Cluster)
		if connected || c.opts.UnreachableGrace == 0 {
			v.exports = append(v.exports, es)
			continue
		}
		if left := graceLeft(since); left > 0 {
			v.exports = append(v.exports, es)
			v.recheck = minPositive(v.recheck, left)
		}
	}
	for _, id := range c.opts.Membership.IDs() {
		if c.opts.Store.Synced(id) {
			continue
		}
		connected, since := c.opts.Membership.Connected(id)
		switch {
		case connected:
			// Its first pass is under way; the Store announces every key
			// when it is done, this is the fallback.
			v.unsettled[id] = true
			v.recheck = minPositive(v.recheck, time.Second)
		case c.opts.UnreachableGrace == 0:
			v.unsettled[id] = true // kept until it is back; its reconnection announces
		case graceLeft(since) > 0:
			// Unreachable within its grace: settled, with nothing
			// exported, once the grace has run out.
			v.unsettled[id] = true
			v.recheck = minPositive(v.recheck, graceLeft(since))
		}
	}
	return v
}

// minPositive returns the smaller of two durations, ignoring zeros.
func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}
