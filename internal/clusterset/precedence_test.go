package clusterset

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestForgedClaimDoesNotWin: an export whose claimed creation is older
// than when the clusterset first saw it published is ordered by the
// latter (Age), so a member that claims 1970 does not become the oldest
// export; honest claims, published within their second, order as before.
func TestForgedClaimDoesNotWin(t *testing.T) {
	east, west := export("east", 0), export("west", 5)
	east.FirstSeen = east.ExportCreated // published within its second
	west.FirstSeen = metav1.NewTime(t0.Add(5 * time.Minute))
	west.Spec.Ports[0].Port = 8080
	if m := Merge([]*ExportedService{west, east}); m.Oldest != "east" {
		t.Fatalf("honest exports: oldest %s, want east", m.Oldest)
	}

	forged := *west
	forged.ExportCreated = metav1.NewTime(time.Unix(0, 0))
	m := Merge([]*ExportedService{&forged, east})
	if m.Oldest != "east" || m.Spec.Ports[0].Port != 80 {
		t.Errorf("a claim of 1970 first seen at t0+5m: oldest %s, port %d; want east, 80", m.Oldest, m.Spec.Ports[0].Port)
	}
	if got := forged.Age(); !got.Equal(west.FirstSeen.Time) {
		t.Errorf("forged export's age %v, want when it was first seen (%v)", got, west.FirstSeen)
	}

	// Central mode reads no publication: the claim (the member's API
	// server's creationTimestamp) orders alone.
	forged.FirstSeen = metav1.Time{}
	if m := Merge([]*ExportedService{&forged, east}); m.Oldest != "west" {
		t.Errorf("without FirstSeen the claim orders: oldest %s, want west", m.Oldest)
	}
}

// TestStoreKeepsFirstSeen: the Store keeps the earliest FirstSeen of an
// export while it holds it (a head created again after a wiped hub, or an
// export put by its watcher, which knows nothing of it, moves it no
// later), SawFirst only moves it earlier, and a withdrawal forgets it.
func TestStoreKeepsFirstSeen(t *testing.T) {
	s := NewStore()
	first := metav1.NewTime(t0.Add(time.Minute))
	es := export("west", 0)
	es.FirstSeen = first
	s.Put(es)

	republished := export("west", 0)
	republished.FirstSeen = metav1.NewTime(t0.Add(time.Hour))
	if s.Put(republished) {
		t.Error("a later FirstSeen alone counted as a change")
	}
	if got := s.GetFrom(es.Key, "west").FirstSeen; !got.Equal(&first) {
		t.Errorf("FirstSeen %v after a republication, want %v", got, first)
	}
	fromWatcher := export("west", 0)
	fromWatcher.Spec.Ports[0].Port = 81
	if !s.Put(fromWatcher) {
		t.Fatal("a changed port was no change")
	}
	if got := s.GetFrom(es.Key, "west"); !got.FirstSeen.Equal(&first) || got.Spec.Ports[0].Port != 81 {
		t.Errorf("after the watcher's put: FirstSeen %v port %d, want %v and 81", got.FirstSeen, got.Spec.Ports[0].Port, first)
	}
	if !fromWatcher.FirstSeen.IsZero() {
		t.Error("Put modified the caller's export")
	}

	if s.SawFirst("west", es.Key, metav1.NewTime(t0.Add(time.Hour))) {
		t.Error("SawFirst moved FirstSeen later")
	}
	earlierStill := metav1.NewTime(t0.Add(30 * time.Second))
	if !s.SawFirst("west", es.Key, earlierStill) {
		t.Error("SawFirst did not move FirstSeen earlier")
	}
	if s.SawFirst("east", es.Key, earlierStill) {
		t.Error("SawFirst changed an export the Store does not hold")
	}

	s.Delete("west", es.Key)
	again := export("west", 10)
	again.FirstSeen = metav1.NewTime(t0.Add(2 * time.Hour))
	s.Put(again)
	if got := s.GetFrom(es.Key, "west").FirstSeen; !got.Equal(&again.FirstSeen) {
		t.Errorf("a withdrawn export's FirstSeen was kept: %v, want %v", got, again.FirstSeen)
	}
}
