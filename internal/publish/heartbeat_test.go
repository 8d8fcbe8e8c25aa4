package publish

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// TestPublisherRenewsAndRewritesTheMarker: once every export is published
// the marker is written with the heartbeat's interval and renewed when a
// renewal is due (not before); a marker that disappears (a wiped hub) is
// written again once the exports are published again.
func TestPublisherRenewsAndRewritesTheMarker(t *testing.T) {
	ctx := context.Background()
	store := clusterset.NewStore()
	store.BeginResync("east")
	store.Put(export())
	store.MarkSynced("east", map[types.NamespacedName]bool{webKey: true})
	p, cl := publisherOf(t, store)
	p.opts.Heartbeat = time.Hour
	reconcileOK(t, p, webKey)
	if res := reconcileOK(t, p, markerRequest.NamespacedName); res.RequeueAfter != time.Hour {
		t.Errorf("marker written: look again after %v, want the heartbeat", res.RequeueAfter)
	}
	marker := publications(t, cl)["east"]
	if marker == nil || marker.Spec.RenewTime == nil || marker.Spec.RenewIntervalSeconds != 3600 {
		t.Fatalf("marker %+v", marker)
	}

	// Not due: nothing written, a look when it is.
	res := reconcileOK(t, p, markerRequest.NamespacedName)
	if res.RequeueAfter <= 0 || res.RequeueAfter > time.Hour {
		t.Errorf("renewal not due: look again after %v", res.RequeueAfter)
	}
	if again := publications(t, cl)["east"]; again.ResourceVersion != marker.ResourceVersion {
		t.Error("renewed before it was due")
	}

	// Due: renewed.
	old := metav1.NewMicroTime(time.Now().Add(-2 * time.Hour))
	marker.Spec.RenewTime = &old
	if err := cl.Update(ctx, marker); err != nil {
		t.Fatal(err)
	}
	reconcileOK(t, p, markerRequest.NamespacedName)
	if renewed := publications(t, cl)["east"]; !renewed.Spec.RenewTime.After(old.Time) {
		t.Errorf("due renewal not written: %v", renewed.Spec.RenewTime)
	}

	// Wiped: every publication gone. The marker comes back only after the
	// export is published again.
	if err := cl.DeleteAllOf(ctx, &PublishedExport{}, client.InNamespace("mcs-system")); err != nil {
		t.Fatal(err)
	}
	reconcileOK(t, p, markerRequest.NamespacedName) // sees it gone
	reconcileOK(t, p, markerRequest.NamespacedName)
	if got := publications(t, cl); len(got) != 0 {
		t.Fatalf("marker written before the exports: %v", got)
	}
	reconcileOK(t, p, webKey)
	reconcileOK(t, p, markerRequest.NamespacedName)
	if got := publications(t, cl); got["east"] == nil || got[ObjectName("east", webKey)] == nil {
		t.Errorf("after the wipe: %v", got)
	}
}

// TestHeartbeats: a member is heard from when its marker's renewTime
// changes (a replay of the same marker is no news); never marked, it has
// the default silence; a marker without a heartbeat is never silent.
func TestHeartbeats(t *testing.T) {
	h := NewHeartbeats()
	if last, timeout := h.Of("east"); !last.IsZero() || timeout != SilenceIntervals*DefaultHeartbeat {
		t.Errorf("never marked: %v %v", last, timeout)
	}
	t1 := time.Now()
	m := Marker("east", "mcs-system", 10*time.Second)
	h.observe("east", m, t1)
	h.observe("east", m, t1.Add(time.Minute)) // the same renewal again: a replay
	if last, timeout := h.Of("east"); !last.Equal(t1) || timeout != 30*time.Second {
		t.Errorf("after one renewal: %v %v", last, timeout)
	}
	renewed := m.DeepCopy()
	next := metav1.NewMicroTime(m.Spec.RenewTime.Add(10 * time.Second))
	renewed.Spec.RenewTime = &next
	h.observe("east", renewed, t1.Add(2*time.Minute))
	if last, _ := h.Of("east"); !last.Equal(t1.Add(2 * time.Minute)) {
		t.Errorf("after a second renewal: heard %v", last)
	}
	h.observe("west", Marker("west", "mcs-system", 0), t1)
	if _, timeout := h.Of("west"); timeout != 0 {
		t.Errorf("a marker without a heartbeat: silence %v", timeout)
	}
	h.Forget("west")
	if last, _ := h.Of("west"); !last.IsZero() {
		t.Error("west not forgotten")
	}
}
