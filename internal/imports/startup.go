package imports

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/notify"
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
// the quiet period alone ended the wait before any of them.) It looks at
// passes again when changed says they may have changed and when a quiet
// period ends: it does not poll.
func waitForFirstPasses(ctx context.Context, passes func() firstPasses, changed func() <-chan struct{}, quiet, limit time.Duration) {
	giveUp := time.NewTimer(limit)
	defer giveUp.Stop()
	quietEnds := time.NewTimer(quiet)
	defer quietEnds.Stop()
	var last firstPasses
	lastChange := time.Now()
	for {
		next := changed() // before the look: a change after it closes next
		p := passes()
		if p != last {
			last, lastChange = p, time.Now()
			quietEnds.Reset(quiet)
		}
		if p.done >= p.total || (p.done > 0 && p.underWay == 0 && time.Since(lastChange) >= quiet) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-giveUp.C:
			return
		case <-next:
		case <-quietEnds.C:
		}
	}
}

// firstPassesChanged returns what tells waitForFirstPasses to look again,
// until ctx ends: the Store's announcements (a member's first pass done)
// and the members' changes (one joined, left, or started or stopped
// answering).
func (c *Controller) firstPassesChanged(ctx context.Context) func() <-chan struct{} {
	var changes notify.Signal
	c.opts.Store.Subscribe(ctx, clusterset.Subscriber{
		Changed:    func(types.NamespacedName) {},
		Everything: changes.Notify,
		Wants:      func(types.NamespacedName, clusterset.ClusterID) bool { return false },
	})
	notify.Forward(ctx, &changes, c.opts.Membership.Changes)
	return changes.Changed
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
