package imports

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitForFirstPasses(t *testing.T) {
	const quiet, limit = 200 * time.Millisecond, 5 * time.Second
	took := func(passes func() firstPasses, limit time.Duration) time.Duration {
		start := time.Now()
		waitForFirstPasses(context.Background(), passes, quiet, limit)
		return time.Since(start)
	}
	if d := took(func() firstPasses { return firstPasses{done: 3, total: 3} }, limit); d > quiet {
		t.Errorf("every member synced: waited %s", d)
	}
	// Two of three come in, the third does not answer: the wait ends a
	// quiet period after the second, long before the limit.
	var looks atomic.Int32
	twoOfThree := func() firstPasses { return firstPasses{done: min(int(looks.Add(1))/3, 2), total: 3} }
	if d := took(twoOfThree, limit); d < quiet || d > limit/2 {
		t.Errorf("two of three synced, then nothing: waited %s, want about %s after the second", d, quiet)
	}
	// One in, the other two answering and under way (a hub's list): no
	// quiet period ends the wait; they do, when they come in.
	looks.Store(0)
	underWay := func() firstPasses {
		if looks.Add(1) < 10 {
			return firstPasses{done: 1, underWay: 2, total: 3}
		}
		return firstPasses{done: 3, total: 3}
	}
	if d := took(underWay, limit); d < 800*time.Millisecond || d > limit/2 {
		t.Errorf("two first passes under way: waited %s, want until they came in (~900 ms)", d)
	}
	// Under way for ever: the limit.
	if d := took(func() firstPasses { return firstPasses{done: 1, underWay: 2, total: 3} }, 400*time.Millisecond); d < 400*time.Millisecond {
		t.Errorf("first passes under way for ever: waited %s, want the limit", d)
	}
	// None comes in: the limit.
	if d := took(func() firstPasses { return firstPasses{total: 3} }, 400*time.Millisecond); d < 400*time.Millisecond {
		t.Errorf("none synced: waited %s, want the limit", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	waitForFirstPasses(ctx, func() firstPasses { return firstPasses{total: 3} }, quiet, limit)
	if d := time.Since(start); d > limit/2 {
		t.Errorf("a cancelled context: waited %s", d)
	}
}
