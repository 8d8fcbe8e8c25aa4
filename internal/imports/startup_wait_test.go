package imports

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mcs-syncer/mcs-syncer/internal/notify"
)

// firstPassesNow is what waitForFirstPasses looks at in these tests: set
// by the test, which notifies each change as the Store and the Set do.
type firstPassesNow struct {
	mu      sync.Mutex
	p       firstPasses
	changes notify.Signal
}

func (f *firstPassesNow) passes() firstPasses {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.p
}

func (f *firstPassesNow) set(p firstPasses) {
	f.mu.Lock()
	f.p = p
	f.mu.Unlock()
	f.changes.Notify()
}

// waiting starts waitForFirstPasses; the channel is closed when it returns.
func (f *firstPassesNow) waiting(ctx context.Context, quiet, limit time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		waitForFirstPasses(ctx, f.passes, f.changes.Changed, quiet, limit)
	}()
	return done
}

// returned fails the test unless done is closed within a generous bound.
func returned(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: still waiting", what)
	}
}

func stillWaiting(done <-chan struct{}) bool {
	select {
	case <-done:
		return false
	default:
		return true
	}
}

func TestWaitForFirstPasses(t *testing.T) {
	const forever = time.Hour // a limit no test reaches
	const quiet = 100 * time.Millisecond

	t.Run("every member synced", func(t *testing.T) {
		f := &firstPassesNow{p: firstPasses{done: 3, total: 3}}
		returned(t, f.waiting(t.Context(), forever, forever), "every first pass in")
	})
	t.Run("the last first pass comes in", func(t *testing.T) {
		// Told at once, not at the next look of a timer: neither the quiet
		// period (one is under way) nor the limit ends this wait.
		f := &firstPassesNow{p: firstPasses{done: 1, underWay: 2, total: 3}}
		done := f.waiting(t.Context(), forever, forever)
		f.set(firstPasses{done: 2, underWay: 1, total: 3})
		if !stillWaiting(done) {
			t.Fatal("returned with a first pass under way")
		}
		f.set(firstPasses{done: 3, total: 3})
		returned(t, done, "the last first pass came in")
	})
	t.Run("the rest does not answer", func(t *testing.T) {
		// Two of three came in, the third does not answer: the wait ends
		// a quiet period after the second.
		f := &firstPassesNow{p: firstPasses{done: 1, total: 3}}
		start := time.Now()
		done := f.waiting(t.Context(), quiet, forever)
		f.set(firstPasses{done: 2, total: 3})
		second := time.Now()
		returned(t, done, "a quiet period after the second")
		if d := time.Since(second); d < quiet {
			t.Errorf("returned %s after the second came in, before the quiet period (%s) ended (%s after the start)", d, quiet, time.Since(start))
		}
	})
	t.Run("under way, no quiet period ends it", func(t *testing.T) {
		f := &firstPassesNow{p: firstPasses{done: 1, underWay: 2, total: 3}}
		start := time.Now()
		done := f.waiting(t.Context(), quiet, 5*quiet)
		returned(t, done, "the limit")
		if d := time.Since(start); d < 5*quiet {
			t.Errorf("first passes under way: returned after %s, before the limit %s", d, 5*quiet)
		}
	})
	t.Run("none comes in", func(t *testing.T) {
		f := &firstPassesNow{p: firstPasses{total: 3}}
		start := time.Now()
		returned(t, f.waiting(t.Context(), quiet, 5*quiet), "the limit")
		if d := time.Since(start); d < 5*quiet {
			t.Errorf("none synced: returned after %s, before the limit %s", d, 5*quiet)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		f := &firstPassesNow{p: firstPasses{total: 3}}
		done := f.waiting(ctx, forever, forever)
		cancel()
		returned(t, done, "a cancelled context")
	})
}
