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
// once they stop coming in: at most exportsQuiet after the last one, and
// exportsLimit after the start in any case (a member that is down must not
// hold up every import).
const (
	exportsQuiet = 5 * time.Second
	exportsLimit = 30 * time.Second
)

// waitForFirstPasses returns when synced says every member's exports are
// in the Store, when some are and no other came in for quiet, after limit,
// or when ctx ends.
func waitForFirstPasses(ctx context.Context, synced func() (done, total int), quiet, limit time.Duration) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	giveUp := time.After(limit)
	last, changed := 0, time.Now()
	for {
		done, total := synced()
		if done != last {
			last, changed = done, time.Now()
		}
		if done >= total || (done > 0 && time.Since(changed) >= quiet) {
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

// membersSynced counts the members whose first pass is in the Store.
func (c *Controller) membersSynced() (done, total int) {
	ids := c.opts.Membership.IDs()
	return len(ids) - len(c.opts.Store.NotSynced(ids)), len(ids)
}
