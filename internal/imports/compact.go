package imports

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/plumbing"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// shareWithStore returns the transform of the imported slices' cache: an
// imported slice holds its source's endpoints, which the Store holds
// already (in hub mode, decoded from the hub's publications without a
// copy). Decoded from the watch, every endpoint would be held twice, once
// in the Store and once in the cache, in an array grown by the decoder to
// up to twice its length. So the endpoints of a slice that equal the
// Store's are the Store's:
//
//   - a slice that holds its source's whole group (a Service of at most
//     100 endpoints: one slice) shares the Store's array;
//   - otherwise each endpoint equal to the Store's, but for its hints
//     (the import's own, see hints.go), shares the Store's addresses,
//     conditions and references, in an array of the slice's length.
//
// Nothing is shared that differs from what the watch delivered, so the
// cache holds what the API server holds, but for the trigger-time
// annotation (dropTriggerTime); the labels' keys are one copy each
// (plumbing.Keys). The cache's objects, like the Store's exports, are
// never modified (reads from it use UnsafeDisableDeepCopy for that
// reason), so sharing them is safe. An endpoint is held by the slice
// until it is written again: at most what the slice holds of an older
// export.
func shareWithStore(store Exports) toolscache.TransformFunc {
	var last lastExport
	return func(obj any) (any, error) {
		obj, err := plumbing.StripUnread(obj)
		s, ok := obj.(*discoveryv1.EndpointSlice)
		if err != nil || !ok {
			return obj, err
		}
		dropTriggerTime(s)
		s.Labels = sliceLabelKeys.Share(s.Labels)
		if len(s.Endpoints) == 0 {
			return s, nil
		}
		es := store.GetFrom(types.NamespacedName{Namespace: s.Namespace, Name: s.Labels[mcsv1beta1.LabelServiceName]}, sourceOf(s))
		if es != nil {
			s.Endpoints = sharedEndpoints(s.AddressType, s.Endpoints, es, &last)
		}
		return s, nil
	}
}

// sliceLabelKeys are the keys of an imported slice's labels.
var sliceLabelKeys = plumbing.NewKeys(mcsv1beta1.LabelServiceName, mcsv1beta1.LabelSourceCluster,
	discoveryv1.LabelServiceName, discoveryv1.LabelManagedBy)

// dropTriggerTime drops an imported slice's trigger-time annotation,
// which the importer writes (pkg/reconciler sets it, or deletes it, on
// every slice it writes) and never reads: a slice is not rewritten for
// its trigger time alone. It was an importer's largest map after the
// labels: one of 1,150 bytes of each cached slice's metadata at 255
// members (issue 56). Other annotations, which a write from the cache
// keeps, stay.
func dropTriggerTime(s *discoveryv1.EndpointSlice) {
	if _, ok := s.Annotations[corev1.EndpointsLastChangeTriggerTime]; !ok {
		return
	}
	if len(s.Annotations) == 1 {
		s.Annotations = nil
		return
	}
	delete(s.Annotations, corev1.EndpointsLastChangeTriggerTime)
}

// lastExport is the export whose endpoints the transform looked up last,
// by address type and first address: an import of 50,000 endpoints writes
// 500 slices of the same export, and each indexed all 50,000 anew (the
// import of 50,000 took 4.6 times its write floor: issue 56). The Store's
// exports are never modified, so an index of one holds while it is the
// Store's; the next export of the same Service and source, which shares
// all but what moved with it (reconciler.Unmoved), is indexed only where
// it moved, and after it when endpoints were added or removed.
type lastExport struct {
	mu          sync.Mutex
	es          *clusterset.ExportedService
	addressType discoveryv1.AddressType
	byAddress   map[string]endpointAt
}

// endpointAt is where an endpoint is in an export: its group and index.
type endpointAt struct{ group, index int32 }

// lookup returns es's endpoint of addressType whose first address is
// address, or nil.
func (l *lastExport) lookup(es *clusterset.ExportedService, addressType discoveryv1.AddressType, address string) *discoveryv1.Endpoint {
	at, ok := l.byAddress[address]
	// Checked, though the index follows es: a transform that panics
	// stops the informer.
	if !ok || int(at.group) >= len(es.Endpoints) || int(at.index) >= len(es.Endpoints[at.group].Endpoints) {
		return nil
	}
	return &es.Endpoints[at.group].Endpoints[at.index]
}

// index makes l the index of es's endpoints of addressType; the caller
// holds l.mu.
func (l *lastExport) index(es *clusterset.ExportedService, addressType discoveryv1.AddressType) {
	switch {
	case l.es == es && l.addressType == addressType:
		return
	case l.es != nil && l.addressType == addressType && l.follow(es):
		l.es = es
		return
	}
	n := 0
	for _, g := range es.Endpoints {
		n += len(g.Endpoints)
	}
	byAddress := make(map[string]endpointAt, n)
	for gi, g := range es.Endpoints {
		if g.AddressType != addressType {
			continue
		}
		for i := range g.Endpoints {
			if ep := &g.Endpoints[i]; len(ep.Addresses) > 0 {
				byAddress[ep.Addresses[0]] = endpointAt{int32(gi), int32(i)}
			}
		}
	}
	l.es, l.addressType, l.byAddress = es, addressType, byAddress
}

// follow moves the index from l.es to es, its successor, where only a few
// endpoints moved (reconciler.Moved); false (nothing changed) otherwise.
func (l *lastExport) follow(es *clusterset.ExportedService) bool {
	old := l.es
	if old.Key != es.Key || old.Cluster != es.Cluster || len(old.Endpoints) != len(es.Endpoints) {
		return false
	}
	for gi := range es.Endpoints {
		if old.Endpoints[gi].AddressType != es.Endpoints[gi].AddressType {
			return false
		}
	}
	spans, few := reconciler.Moved(old.Endpoints, es.Endpoints)
	if !few {
		return false
	}
	for gi, span := range spans {
		if len(span.Old)+len(span.New) > 0 && es.Endpoints[gi].AddressType == l.addressType {
			l.move(gi, span, es.Endpoints[gi].Endpoints)
		}
	}
	return true
}

// move indexes group gi anew where span says it moved, and after it when
// endpoints were added or removed (the tail shifted), now being the
// group's new array.
func (l *lastExport) move(gi int, span reconciler.MovedSpan, now []discoveryv1.Endpoint) {
	for i := range span.Old {
		if ep := &span.Old[i]; len(ep.Addresses) > 0 {
			delete(l.byAddress, ep.Addresses[0])
		}
	}
	to := len(now) - span.Tail
	if len(span.Old) != len(span.New) { // the old and new arrays' lengths differ as much
		to = len(now)
	}
	for i := span.Head; i < to; i++ {
		if ep := &now[i]; len(ep.Addresses) > 0 {
			l.byAddress[ep.Addresses[0]] = endpointAt{int32(gi), int32(i)}
		}
	}
}

// sharedEndpoints returns endpoints (decoded, of addressType) with what
// they share with the export es (see shareWithStore), found through last.
func sharedEndpoints(addressType discoveryv1.AddressType, endpoints []discoveryv1.Endpoint, es *clusterset.ExportedService, last *lastExport) []discoveryv1.Endpoint {
	for _, g := range es.Endpoints {
		if g.AddressType == addressType && len(g.Endpoints) == len(endpoints) && sameEndpoints(g.Endpoints, endpoints) {
			return g.Endpoints[:len(endpoints):len(endpoints)] // an append never writes into the Store's
		}
	}
	last.mu.Lock()
	defer last.mu.Unlock()
	last.index(es, addressType)
	out := make([]discoveryv1.Endpoint, len(endpoints))
	for i := range endpoints {
		out[i] = endpoints[i]
		if len(out[i].Addresses) == 0 {
			continue
		}
		if stored := last.lookup(es, addressType, out[i].Addresses[0]); stored != nil && equalButHints(stored, &endpoints[i]) {
			out[i] = *stored
			out[i].Hints = endpoints[i].Hints
		}
	}
	return out
}

// equalButHints reports whether two endpoints are equal in every field but
// their hints.
func equalButHints(a, b *discoveryv1.Endpoint) bool {
	ac, bc := *a, *b
	ac.Hints, bc.Hints = nil, nil
	return reconciler.EndpointIdentical(&ac, &bc)
}

// sameEndpoints reports whether a and b are identical, endpoint by
// endpoint.
func sameEndpoints(a, b []discoveryv1.Endpoint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !reconciler.EndpointIdentical(&a[i], &b[i]) {
			return false
		}
	}
	return true
}
