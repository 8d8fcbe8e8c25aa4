package imports

import (
	"context"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// zoneSource tells the zones of the consumer's nodes, sorted, and whether
// they are known yet.
type zoneSource interface {
	Zones(ctx context.Context) (zones []string, known bool)
}

// nodeZones is the zoneSource of a real consumer: the values of its nodes'
// topology.kubernetes.io/zone label ("" for a node without one). It reads
// only the Nodes' metadata, from an informer started the first time an
// import asks: a clusterset that never puts the local cluster first never
// watches Nodes. changed is called (from the informer) whenever the set of
// zones changes.
type nodeZones struct {
	cache   cache.Cache // started by the Controller; holds only this informer
	changed func()

	mu      sync.Mutex
	synced  func() bool
	started bool
	zoneOf  map[string]string // node name: its zone
	nodes   map[string]int    // zone: how many nodes it has
}

func newNodeZones(c cache.Cache, changed func()) *nodeZones {
	return &nodeZones{cache: c, changed: changed, zoneOf: map[string]string{}, nodes: map[string]int{}}
}

// Zones starts the informer on the first call; the zones are known once it
// has listed every Node. An informer that cannot start (the credentials
// may not list Nodes) is tried again on the next call.
func (z *nodeZones) Zones(ctx context.Context) ([]string, bool) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if !z.started {
		node := &metav1.PartialObjectMetadata{}
		node.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
		informer, err := z.cache.GetInformer(ctx, node, cache.BlockUntilSynced(false))
		if err != nil {
			return nil, false
		}
		reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { z.set(obj, false) },
			UpdateFunc: func(_, obj any) { z.set(obj, false) },
			DeleteFunc: func(obj any) { z.set(obj, true) },
		})
		if err != nil {
			return nil, false
		}
		z.started, z.synced = true, reg.HasSynced
	}
	if !z.synced() {
		return nil, false
	}
	zones := make([]string, 0, len(z.nodes))
	for zone := range z.nodes {
		zones = append(zones, zone)
	}
	slices.Sort(zones)
	return zones, true
}

// set records a node's zone (or its deletion) and calls changed when a
// zone gains its first node or loses its last.
func (z *nodeZones) set(obj any, deleted bool) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	node, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	z.mu.Lock()
	old, had := z.zoneOf[node.GetName()]
	zone := node.GetLabels()[corev1.LabelTopologyZone]
	if had && !deleted && old == zone {
		z.mu.Unlock()
		return
	}
	gone := false
	if had {
		delete(z.zoneOf, node.GetName())
		if z.nodes[old]--; z.nodes[old] == 0 {
			delete(z.nodes, old)
			gone = true
		}
	}
	added := false
	if !deleted {
		z.zoneOf[node.GetName()] = zone
		z.nodes[zone]++
		added = z.nodes[zone] == 1
	}
	z.mu.Unlock()
	if (gone || added) && z.changed != nil {
		z.changed()
	}
}
