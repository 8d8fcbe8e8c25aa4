package clusterset

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestFeedbackImportBlocked: a blocked import is recorded per consumer and
// announced when it changes (not when it is said again); a consumer that
// leaves the clusterset clears its blocks.
func TestFeedbackImportBlocked(t *testing.T) {
	f := NewFeedback()
	ch := make(chan types.NamespacedName, 10)
	f.Subscribe(t.Context(), sendTo(t, ch))
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	f.SetImportBlocked(key, "north", "ServiceImport ns/web is a person's")
	f.SetImportBlocked(key, "north", "ServiceImport ns/web is a person's") // no change, no announcement
	if len(ch) != 1 || f.ImportBlocked(key)["north"] == "" {
		t.Fatalf("%d announcements, blocked %v", len(ch), f.ImportBlocked(key))
	}
	<-ch
	f.ForgetConsumer("south") // says nothing of key
	f.ForgetConsumer("north")
	if len(f.ImportBlocked(key)) != 0 || len(ch) != 1 || receive(t, ch) != key {
		t.Errorf("after north left: blocked %v, want nothing and key announced once", f.ImportBlocked(key))
	}
}

// TestFeedbackUnpublished: an export that could not be published says so
// until cleared; a heartbeat that cannot be written speaks for every key
// and asks every subscriber to look at everything.
func TestFeedbackUnpublished(t *testing.T) {
	f := NewFeedback()
	ch := make(chan types.NamespacedName, 10)
	everything := 0
	sub := sendTo(t, ch)
	sub.Everything = func() { everything++ }
	f.Subscribe(t.Context(), sub)
	web, db := types.NamespacedName{Namespace: "ns", Name: "web"}, types.NamespacedName{Namespace: "ns", Name: "db"}
	f.SetUnpublished(web, "too large")
	if got := f.Unpublished(web); got != "too large" || receive(t, ch) != web || f.Unpublished(db) != "" {
		t.Fatalf("Unpublished(web) = %q, Unpublished(db) = %q", got, f.Unpublished(db))
	}
	f.SetUnheard("forbidden")
	f.SetUnheard("forbidden")
	if everything != 1 || !strings.Contains(f.Unpublished(db), "heartbeat cannot be written") || f.Unpublished(web) != "too large" {
		t.Errorf("after SetUnheard: %d calls of Everything, db %q, web %q", everything, f.Unpublished(db), f.Unpublished(web))
	}
	f.SetUnheard("")
	f.SetUnpublished(web, "")
	if f.Unpublished(web) != "" || f.Unpublished(db) != "" || everything != 2 || receive(t, ch) != web {
		t.Errorf("after clearing: web %q, db %q, %d calls of Everything", f.Unpublished(web), f.Unpublished(db), everything)
	}
}

// TestFeedbackLateSubscriber: a subscriber that starts late hears of every
// key the Feedback says something of, once, and only those it wants; it
// hears nothing once its context ends.
func TestFeedbackLateSubscriber(t *testing.T) {
	f := NewFeedback()
	web, db, api := types.NamespacedName{Namespace: "ns", Name: "web"}, types.NamespacedName{Namespace: "ns", Name: "db"}, types.NamespacedName{Namespace: "ns", Name: "api"}
	f.SetImportBlocked(web, "north", "a person's")
	f.SetUnpublished(web, "too large")
	f.SetUnpublished(db, "too large")
	f.SetUnpublished(api, "too large")
	ch := make(chan types.NamespacedName, 10)
	sub := sendTo(t, ch)
	sub.Wants = func(key types.NamespacedName, cluster ClusterID) bool { return key != api && cluster == "" }
	ctx, cancel := context.WithCancel(t.Context())
	f.Subscribe(ctx, sub)
	got := map[types.NamespacedName]int{}
	for len(ch) > 0 {
		got[<-ch]++
	}
	if len(got) != 2 || got[web] != 1 || got[db] != 1 {
		t.Errorf("heard of %v, want web and db once each", got)
	}
	cancel()
	// The subscription ends on context.AfterFunc's goroutine.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		f.mu.RLock()
		n := len(f.subs)
		f.mu.RUnlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("still subscribed 10 s after the context ended")
		}
	}
	f.SetUnpublished(web, "")
	if len(ch) != 0 {
		t.Error("heard of a change after the subscription ended")
	}
}
