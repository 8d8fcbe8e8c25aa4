package imports

import (
	"context"
	"time"
)

// The imported slices' cache shares its endpoints with the Store only for
// the slices it receives once the Store holds their exports (compact.go);
// a slice listed before keeps its own copy until it is written again,
// which after a restart with nothing changing is never. So the controller
// starts that cache once the members' first passes are in the Store, or
// once they stop coming in: while a member answers and its first pass is
// under way, for up to exportsLimit; a member that does not answer, for
// exportsQuiet after the last first pass came in (a member that is down
// must not hold up every import).
const (
	exportsQuiet = 5 * time.Second
	exportsLimit = 30 * time.Second
)

// firstPasses is how far the members' first passes are: done are in the
// Store, under way are those of members that answer, of total members.
type firstPasses struct{ done, underWay, total int }

// waitForFirstPasses returns when every member's exports are in the Store,
// when some are, none is under way and no other came in for quiet, after
// limit, or when ctx ends. (Through a hub, 255 members' first passes are
// under way for the seconds the hub's list takes, with none coming in:
// the quiet period alone ended the wait before any of them.)
func waitForFirstPasses(ctx context.Context, passes func() firstPasses, quiet, limit time.Duration) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	giveUp := time.After(limit)
	var last firstPasses
	changed := time.Now()
	for {
		p := passes()
		if p != last {
			last, changed = p, time.Now()
		}
		if p.done >= p.total || (p.done > 0 && p.underWay == 0 && time.Since(changed) >= quiet) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-giveUp:
			return
		case <-tick.C:
		}
	}
}

// firstPasses counts the members whose first pass is in the Store, and
// those of the others that answer.
func (c *Controller) firstPasses() firstPasses {
	ids := c.opts.Membership.IDs()
	p := firstPasses{total: len(ids)}
	notSynced := c.opts.Store.NotSynced(ids)
	p.done = len(ids) - len(notSynced)
	for _, id := range notSynced {
		if c.opts.Membership.Health(id).Answering {
			p.underWay++
		}
	}
	return p
}
