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

// viewOf returns the view of key's exports. A member counts while it is
// up or held (read through a hub that cannot be read: nothing is known of
// the member itself), and for the grace after it was last up; past that
// it counts as a member without exports, whatever state it is stuck in
// (forbidden, syncing again and again, never marked), so that it never
// freezes the decisions of the others. Only a member never synced, or
// one whose first pass is under way, makes the view partial: one that
// was synced and then cannot be read keeps its last complete view.
func (c *Controller) viewOf(key types.NamespacedName) view {
	v := view{unsettled: map[clusterset.ClusterID]bool{}}
	now := time.Now()
	// counts reports whether a member still counts, and for how long a
	// member that is down does (0: for as long as it stays as it is).
	counts := func(h clusterset.Health) (bool, time.Duration) {
		if h.Up || h.Held || c.opts.UnreachableGrace == 0 {
			return true, 0
		}
		left := c.opts.UnreachableGrace - now.Sub(h.Since)
		return left > 0, left
	}
	exports, notSynced, neverSynced := c.opts.Store.ExportsOf(key, c.opts.Membership.IDs())
	for _, es := range exports {
		if ok, left := counts(c.opts.Membership.Health(es.Cluster)); ok {
			v.exports = append(v.exports, es)
			v.recheck = minPositive(v.recheck, left)
		}
	}
	for _, id := range notSynced {
		h := c.opts.Membership.Health(id)
		// neverSynced is a subsequence of notSynced, in its order: one
		// walk over both, not a search per member (1,000 members at a
		// restart, every one not synced, on every reconcile).
		never := len(neverSynced) > 0 && neverSynced[0] == id
		if never {
			neverSynced = neverSynced[1:]
		}
		if !h.Up && !never {
			// Synced before, and cannot be read now (forbidden,
			// unreachable, a config error, held): the Store holds its last
			// complete view, whose exports count above for the grace.
			// Nothing of the others waits for it: a flapping member held
			// back every withdrawal in the clusterset for its grace.
			continue
		}
		switch ok, left := counts(h); {
		case h.Up:
			// Its first pass is under way (the Store announces every key
			// when it is done; this is the fallback), for the grace at
			// most: one that never ends (a member read through the hub
			// whose own mcs-syncer never published) must not freeze every
			// import.
			if c.opts.UnreachableGrace == 0 {
				v.unsettled[id] = true
				v.recheck = minPositive(v.recheck, time.Second)
			} else if left := c.opts.UnreachableGrace - now.Sub(h.Since); left > 0 {
				v.unsettled[id] = true
				v.recheck = minPositive(v.recheck, min(time.Second, left))
			}
		case ok:
			// Held, or down within its grace: settled, with nothing
			// exported, once the grace has run out (the hub's return,
			// a member's, announces).
			v.unsettled[id] = true
			v.recheck = minPositive(v.recheck, left)
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
