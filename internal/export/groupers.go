package export

import (
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// groupers keep, per exported Service, what its slices gave the export the
// last time (reconciler.SliceGrouper): a change of one slice of 500 reads
// that slice, and the endpoints of the others are not copied again from
// the cache, where they already are.
type groupers struct {
	mu        sync.Mutex
	byService map[types.NamespacedName]*lockedGrouper
}

// lockedGrouper is one Service's: the first pass (initialSync) and a
// worker may build the same export at once.
type lockedGrouper struct {
	mu sync.Mutex
	g  reconciler.SliceGrouper
}

// maxRun is the most endpoints of a run of an export's group
// (reconciler.SliceGrouper.MaxRun): one endpoint's change copies the run it
// falls in, whatever the Service's size, and every later stage skips the
// runs that are the very arrays of the last export. Runs are cut at half
// of it, a part's worth (publish.DefaultMaxEndpointsPerPart).
const maxRun = 200

func newGroupers() *groupers {
	return &groupers{byService: map[types.NamespacedName]*lockedGrouper{}}
}

// group returns the endpoint groups of svc's slices, items (the cache's,
// never written).
func (g *groupers) group(svc types.NamespacedName, items []discoveryv1.EndpointSlice) []reconciler.EndpointGroup {
	g.mu.Lock()
	lg := g.byService[svc]
	if lg == nil {
		lg = &lockedGrouper{g: reconciler.SliceGrouper{MaxRun: maxRun}}
		g.byService[svc] = lg
	}
	g.mu.Unlock()
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return lg.g.Group(items)
}

// forget drops what svc's slices gave, once it is no longer exported.
func (g *groupers) forget(svc types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.byService, svc)
}
