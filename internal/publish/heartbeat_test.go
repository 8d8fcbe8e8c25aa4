package publish

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// TestPublisherRenewsAndRewritesTheMarker: once every export is published
// the marker is written with the heartbeat's interval and renewed when a
// renewal is due (not before); a marker that disappears (a wiped hub) is
// written again once the exports are published again.
func TestPublisherRenewsAndRewritesTheMarker(t *testing.T) {
	ctx := context.Background()
	store := syncedStore(export())
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

	// Due (by the publisher's clock): renewed.
	fake := clocktesting.NewFakePassiveClock(time.Now().Add(time.Hour).Truncate(time.Microsecond))
	p.clock = fake
	reconcileOK(t, p, markerRequest.NamespacedName)
	if renewed := publications(t, cl)["east"]; !renewed.Spec.RenewTime.Equal(&metav1.MicroTime{Time: fake.Now()}) {
		t.Errorf("due renewal not written: %v", renewed.Spec.RenewTime)
	}

	// Wiped: every publication gone. The marker comes back only after the
	// export is published again.
	if err := cl.DeleteAllOf(ctx, &v1alpha1.PublishedExport{}, client.InNamespace("mcs-system")); err != nil {
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

// TestMarkerWaitsForTheServer: a publisher whose cache still shows its
// publications after a wipe (it has seen the marker's deletion, not yet
// theirs) does not write the marker until the publication server itself
// holds every export again; readers would otherwise take the marker for
// a member that published everything, and withdraw the export whose head
// they saw deleted.
func TestMarkerWaitsForTheServer(t *testing.T) {
	ctx := context.Background()
	store := syncedStore(export())
	p, cached := publisherOf(t, store)
	reconcileOK(t, p, webKey)
	live := fake.NewClientBuilder().WithScheme(scheme(t)).Build() // wiped, marker and all
	p.apiReader = live
	if res := reconcileOK(t, p, markerRequest.NamespacedName); res.RequeueAfter != partialViewRecheck {
		t.Errorf("the server lacks the export: look again after %v, want %v", res.RequeueAfter, partialViewRecheck)
	}
	if got := publications(t, cached)["east"]; got != nil {
		t.Fatalf("marker written while the server lacks the export: %+v", got)
	}
	for _, pub := range publications(t, cached) {
		pub = pub.DeepCopy()
		pub.ResourceVersion = ""
		if err := live.Create(ctx, pub); err != nil {
			t.Fatal(err)
		}
	}
	reconcileOK(t, p, markerRequest.NamespacedName)
	if got := publications(t, cached)["east"]; got == nil {
		t.Error("the server holds the export again: no marker written")
	}
}

// TestMarkerRenewedByThePublishersClock: renewals are due a heartbeat
// after the publisher's own last one, whatever time the marker holds. A
// marker set an hour ahead (a hand, a replica whose clock ran ahead, a
// clock step) or an hour behind is renewed when the publisher's heartbeat
// is due, with the publisher's time; a publisher that starts anew
// renews a marker whose time is ahead or more than a heartbeat behind at
// once, and waits out the rest of a heartbeat for one renewed just before.
func TestMarkerRenewedByThePublishersClock(t *testing.T) {
	const heartbeat = 15 * time.Second
	t0 := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	setRenewTime := func(t *testing.T, cl client.Client, at time.Time) {
		t.Helper()
		marker := publications(t, cl)["east"]
		renew := metav1.NewMicroTime(at)
		marker.Spec.RenewTime = &renew
		if err := cl.Update(context.Background(), marker); err != nil {
			t.Fatal(err)
		}
	}
	renewTime := func(t *testing.T, cl client.Client) time.Time {
		t.Helper()
		return publications(t, cl)["east"].Spec.RenewTime.Time
	}
	newPublisher := func(t *testing.T, objs ...client.Object) (*Publisher, client.Client, *clocktesting.FakePassiveClock) {
		store := clusterset.NewStore()
		store.BeginResync("east")
		store.MarkSynced("east", nil)
		p, cl := publisherOf(t, store, objs...)
		fake := clocktesting.NewFakePassiveClock(t0)
		p.opts.Heartbeat, p.clock = heartbeat, fake
		return p, cl, fake
	}

	for _, skew := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(fmt.Sprintf("marker set %v off", skew), func(t *testing.T) {
			p, cl, fake := newPublisher(t)
			reconcileOK(t, p, markerRequest.NamespacedName) // written at t0
			setRenewTime(t, cl, t0.Add(skew))
			fake.SetTime(t0.Add(5 * time.Second))
			if res := reconcileOK(t, p, markerRequest.NamespacedName); res.RequeueAfter != 10*time.Second {
				t.Errorf("look again after %v, want the 10 s left of the publisher's own heartbeat", res.RequeueAfter)
			}
			if got := renewTime(t, cl); !got.Equal(t0.Add(skew)) {
				t.Errorf("renewed at %v before the heartbeat was due", got)
			}
			fake.SetTime(t0.Add(heartbeat))
			if res := reconcileOK(t, p, markerRequest.NamespacedName); res.RequeueAfter != heartbeat {
				t.Errorf("renewed: look again after %v, want the heartbeat", res.RequeueAfter)
			}
			if got := renewTime(t, cl); !got.Equal(t0.Add(heartbeat)) {
				t.Errorf("marker's time %v after the due renewal, want the publisher's %v", got, t0.Add(heartbeat))
			}
		})
	}

	for _, c := range []struct {
		name      string
		markerAge time.Duration // how long before t0 the marker says it was renewed
		wait      time.Duration // 0: renewed at once
	}{
		{"ahead", -time.Hour, 0},
		{"far behind", time.Hour, 0},
		{"just renewed", 5 * time.Second, 10 * time.Second},
	} {
		t.Run("restarted, marker "+c.name, func(t *testing.T) {
			p, cl, _ := newPublisher(t, markerAt("east", "mcs-system", heartbeat, t0.Add(-c.markerAge)))
			res := reconcileOK(t, p, markerRequest.NamespacedName)
			renewed := renewTime(t, cl).Equal(t0)
			if c.wait == 0 && (!renewed || res.RequeueAfter != heartbeat) {
				t.Errorf("renewed %v, look again after %v: want renewed at once", renewed, res.RequeueAfter)
			}
			if c.wait > 0 && (renewed || res.RequeueAfter != c.wait) {
				t.Errorf("renewed %v, look again after %v: want no write, a look after %v", renewed, res.RequeueAfter, c.wait)
			}
		})
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

// TestHeartbeatsTellTheReadersChanges: ReadersChanged is closed when a
// member is first marked, when its marker's readsParts changes, when it
// is first listed and when it is forgotten; a renewal alone, the common
// case every 15 s a member, is no change.
func TestHeartbeatsTellTheReadersChanges(t *testing.T) {
	h := NewHeartbeats()
	m := Marker("east", "mcs-system", 10*time.Second)
	older := m.DeepCopy()
	older.Spec.ReadsParts = false
	renewed := m.DeepCopy()
	next := metav1.NewMicroTime(m.Spec.RenewTime.Add(10 * time.Second))
	renewed.Spec.RenewTime = &next
	for _, step := range []struct {
		what   string
		do     func()
		change bool
	}{
		{"first marked", func() { h.observe("east", m, time.Now()) }, true},
		{"renewed", func() { h.observe("east", renewed, time.Now()) }, false},
		{"marked by an older mcs-syncer", func() { h.observe("east", older, time.Now()) }, true},
		{"listed", func() { h.markListed("east") }, true},
		{"listed again", func() { h.markListed("east") }, false},
		{"forgotten", func() { h.Forget("east") }, true},
	} {
		changed := h.ReadersChanged()
		step.do()
		select {
		case <-changed:
			if !step.change {
				t.Errorf("%s: told as a change of the readers", step.what)
			}
		default:
			if step.change {
				t.Errorf("%s: not told", step.what)
			}
		}
	}
}
