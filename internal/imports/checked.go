package imports

import (
	"net/netip"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// checkedArrays remembers, per import, source and group of the export,
// the last array of endpoints found importable in full, so that the next
// one, which shares all but the changed endpoints with it (the export
// watcher's SliceGrouper shares them), is checked only where it moved
// (reconciler.Unmoved): checking every endpoint of a Service of 50,000 at
// each change was a third of the import's work (issue 56). An export in
// runs (reconciler.SliceGrouper.MaxRun) hands the very arrays of its
// unchanged runs again: each is taken at once. Only the arrays of exports
// of at least incrementalPlansFrom endpoints are remembered; the others
// are checked in full.
type checkedArrays struct {
	mu   sync.Mutex
	last map[checkedKey][]discoveryv1.Endpoint
}

type checkedKey struct {
	key         types.NamespacedName
	source      clusterset.ClusterID
	group       int
	addressType discoveryv1.AddressType
}

func newCheckedArrays() *checkedArrays {
	return &checkedArrays{last: map[checkedKey][]discoveryv1.Endpoint{}}
}

// importable is importableOnly, checking only what moved since the array
// that k last found importable in full, when large (the export's size)
// says it is remembered.
func (c *checkedArrays) importable(k checkedKey, endpoints []discoveryv1.Endpoint, large bool, ranges []netip.Prefix, left *leftOut) []discoveryv1.Endpoint {
	if c == nil || !large {
		c.drop(k)
		return importableOnly(endpoints, k.addressType, ranges, left)
	}
	c.mu.Lock()
	last := c.last[k]
	c.mu.Unlock()
	if len(last) > 0 && len(last) == len(endpoints) && &last[0] == &endpoints[0] {
		return endpoints // the very array found importable: a run that did not change
	}
	if last != nil {
		var none leftOut
		if span, few := reconciler.MovedIn(last, endpoints); few && len(importableOnly(span.New, k.addressType, ranges, &none)) == len(span.New) {
			c.remember(k, endpoints)
			return endpoints
		}
	}
	out := importableOnly(endpoints, k.addressType, ranges, left)
	if len(out) == len(endpoints) {
		c.remember(k, endpoints)
	} else {
		c.drop(k)
	}
	return out
}

func (c *checkedArrays) remember(k checkedKey, endpoints []discoveryv1.Endpoint) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last[k] = endpoints
}

func (c *checkedArrays) drop(k checkedKey) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.last, k)
}

// forget drops what is remembered of an import's source (every source
// when source is ""), so that no array the Store has let go of is kept.
func (c *checkedArrays) forget(key types.NamespacedName, source clusterset.ClusterID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.last {
		if k.key == key && (source == "" || k.source == source) {
			delete(c.last, k)
		}
	}
}
