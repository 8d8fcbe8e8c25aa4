package publish

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
)

// TestPartEventsNoteTheMembersParts: the publisher's handler keeps the
// member's parts as the events give them (the cache's objects, no copy),
// each one noted before its export is enqueued; heads and other members'
// parts are enqueued, never noted.
func TestPartEventsNoteTheMembersParts(t *testing.T) {
	es := withEndpoints(250)
	head, parts := EncodeParts(es, "mcs-system", DefaultMaxEndpointsPerPart)
	west := *es
	west.Cluster = "west"
	_, others := EncodeParts(&west, "mcs-system", DefaultMaxEndpointsPerPart)
	if len(parts) < 3 || len(others) == 0 {
		t.Fatalf("%d parts of east's, %d of west's: want 3 or more, some", len(parts), len(others))
	}
	own := newOwnParts("east")
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	var heldWhenEnqueued [][]*v1alpha1.PublishedExport
	h := partEvents{parts: own, enqueue: func(o *v1alpha1.PublishedExport) []reconcile.Request {
		key := types.NamespacedName{Namespace: o.Spec.Namespace, Name: o.Spec.Name}
		heldWhenEnqueued = append(heldWhenEnqueued, own.of(key))
		return []reconcile.Request{{NamespacedName: key}}
	}}
	ctx := context.Background()
	for _, o := range append([]*v1alpha1.PublishedExport{head, others[0]}, parts...) {
		h.Create(ctx, event.TypedCreateEvent[*v1alpha1.PublishedExport]{Object: o}, q)
	}
	if got := own.of(webKey); !sameParts(got, parts) {
		t.Fatalf("held %d parts, want east's %d (not its head, not west's)", len(got), len(parts))
	}
	if last := heldWhenEnqueued[len(heldWhenEnqueued)-1]; !sameParts(last, parts) {
		t.Errorf("the export was enqueued before its part was noted (%d held)", len(last))
	}
	if q.Len() != 1 {
		t.Errorf("%d items queued, want the export once", q.Len())
	}

	changed := parts[1].DeepCopy()
	changed.ResourceVersion = "2"
	h.Update(ctx, event.TypedUpdateEvent[*v1alpha1.PublishedExport]{ObjectOld: parts[1], ObjectNew: changed}, q)
	want := slices.Clone(parts)
	want[1] = changed
	if got := own.of(webKey); !sameParts(got, want) {
		t.Errorf("after an update: %v", names(got))
	}
	h.Delete(ctx, event.TypedDeleteEvent[*v1alpha1.PublishedExport]{Object: changed}, q)
	if got := own.of(webKey); !sameParts(got, slices.Delete(slices.Clone(parts), 1, 2)) {
		t.Errorf("after a deletion: %v", names(got))
	}
	// A part edited by hand into another export leaves this one's.
	moved := parts[0].DeepCopy()
	moved.Spec.Name = "other"
	h.Update(ctx, event.TypedUpdateEvent[*v1alpha1.PublishedExport]{ObjectOld: parts[0], ObjectNew: moved}, q)
	if got := own.of(webKey); !sameParts(got, parts[2:]) {
		t.Errorf("after a part moved away: %v", names(got))
	}
	for _, part := range parts[2:] {
		h.Delete(ctx, event.TypedDeleteEvent[*v1alpha1.PublishedExport]{Object: part}, q)
	}
	if len(own.byExport) != 1 {
		t.Errorf("exports without parts are kept: %v", own.byExport)
	}
}

// sameParts reports whether got holds the very objects of want, in any
// order.
func sameParts(got, want []*v1alpha1.PublishedExport) bool {
	return len(got) == len(want) && !slices.ContainsFunc(want, func(w *v1alpha1.PublishedExport) bool {
		return !slices.Contains(got, w)
	})
}

func names(parts []*v1alpha1.PublishedExport) []string {
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = p.Name
	}
	return out
}
