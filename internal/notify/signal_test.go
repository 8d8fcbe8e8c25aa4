package notify

import (
	"context"
	"testing"
	"time"
)

// wait fails the test unless ch is closed within a generous bound.
func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: not notified", what)
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestSignalWakesEveryWaiterOnce(t *testing.T) {
	var s Signal
	a, b := s.Changed(), s.Changed()
	if closed(a) || closed(b) {
		t.Fatal("closed before any Notify")
	}
	s.Notify()
	if !closed(a) || !closed(b) {
		t.Fatal("a waiter was not woken by Notify")
	}
	if next := s.Changed(); closed(next) {
		t.Fatal("the channel taken after a Notify is closed already: it would wake for a change its waiter has read")
	}
	s.Notify() // no waiter: nothing to close, no panic
	s.Notify()
	var none *Signal
	none.Notify()
}

// TestForwardMissesNoChange: a change of a source made after to's waiter
// woke (and while it reads) wakes it again, however the goroutines
// interleave: looped, to catch the order that would lose it.
func TestForwardMissesNoChange(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var a, b, to Signal
	Forward(ctx, &to, a.Changed, b.Changed)
	for i := range 1000 {
		src := &a
		if i%2 == 1 {
			src = &b
		}
		woken := to.Changed()
		src.Notify()
		wait(t, woken, "a change of a source")
	}
}

func TestForwardEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var a, to Signal
	Forward(ctx, &to, a.Changed)
	cancel()
	// The goroutine may still be in its select; once it has seen ctx end,
	// a's notifications reach no one. Nothing to wait on but the race
	// detector and the leak it would show in -count loops.
	a.Notify()
}
