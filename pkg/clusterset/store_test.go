package clusterset

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// receive returns the next key from ch, failing after a generous timeout.
func receive(t *testing.T, ch <-chan event.GenericEvent) types.NamespacedName {
	t.Helper()
	select {
	case e := <-ch:
		return types.NamespacedName{Namespace: e.Object.GetNamespace(), Name: e.Object.GetName()}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification")
		return types.NamespacedName{}
	}
}

// none checks that ch holds no notification once every earlier put has been
// delivered: it puts a marker key and expects exactly that one next.
func none(t *testing.T, s *Store, ch <-chan event.GenericEvent) {
	t.Helper()
	marker := export("marker", 0)
	marker.Key = types.NamespacedName{Namespace: "zz", Name: "marker"}
	marker.ExportCreated.Time = marker.ExportCreated.Add(time.Duration(time.Now().UnixNano()))
	s.Put(marker)
	if got := receive(t, ch); got != marker.Key {
		t.Errorf("got a notification for %s, want none before the marker", got)
	}
}

func TestStoreNotifications(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := NewStore()
	ch := s.Subscribe(ctx)
	key := types.NamespacedName{Namespace: "ns", Name: "web"}

	if !s.Put(export("east", 0)) {
		t.Error("first put reported no change")
	}
	if got := receive(t, ch); got != key {
		t.Errorf("notified %s, want %s", got, key)
	}

	// A put that changes nothing notifies nobody.
	if s.Put(export("east", 0)) {
		t.Error("an identical put reported a change")
	}
	none(t, s, ch)

	// A changed put notifies.
	changed := export("east", 0)
	changed.Spec.Ports[0].Port = 81
	if !s.Put(changed) || receive(t, ch) != key {
		t.Error("a changed put was not announced")
	}

	// Changes that arrive before the subscriber reads coalesce into one.
	s.Put(export("west", 1))
	s.Put(export("north", 2))
	if got := receive(t, ch); got != key {
		t.Errorf("notified %s", got)
	}
	none(t, s, ch)
	if got := s.Get(key); len(got) != 3 || got[0].Cluster != "east" || got[1].Cluster != "north" {
		t.Errorf("Get = %v, want east, north, west", got)
	}

	// Withdrawing a cluster is one call and notifies its keys.
	other := export("west", 1)
	other.Key = types.NamespacedName{Namespace: "ns", Name: "api"}
	s.Put(other)
	receive(t, ch)
	keys := s.WithdrawCluster("west")
	if len(keys) != 2 || s.Count("west") != 0 || len(s.Get(key)) != 2 {
		t.Errorf("withdraw returned %v; west still exports %d keys", keys, s.Count("west"))
	}
	seen := map[types.NamespacedName]bool{receive(t, ch): true, receive(t, ch): true}
	if !seen[key] || !seen[other.Key] {
		t.Errorf("withdraw notified %v", seen)
	}

	if !s.Delete("east", key) || s.Delete("east", key) {
		t.Error("Delete reported wrongly")
	}
	receive(t, ch)

	cancel()
	for range ch { // drains and ends: the channel is closed
	}
}
