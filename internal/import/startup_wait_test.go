package imports

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitForFirstPasses(t *testing.T) {
	const quiet, limit = 200 * time.Millisecond, 5 * time.Second
	took := func(synced func() (int, int), limit time.Duration) time.Duration {
		start := time.Now()
		waitForFirstPasses(context.Background(), synced, quiet, limit)
		return time.Since(start)
	}
	if d := took(func() (int, int) { return 3, 3 }, limit); d > quiet {
		t.Errorf("every member synced: waited %s", d)
	}
	// Two of three come in, the third never: the wait ends a quiet
	// period after the second, long before the limit.
	var looks atomic.Int32
	twoOfThree := func() (int, int) { return min(int(looks.Add(1))/3, 2), 3 }
	if d := took(twoOfThree, limit); d < quiet || d > limit/2 {
		t.Errorf("two of three synced, then nothing: waited %s, want about %s after the second", d, quiet)
	}
	// None comes in: the limit.
	if d := took(func() (int, int) { return 0, 3 }, 400*time.Millisecond); d < 400*time.Millisecond {
		t.Errorf("none synced: waited %s, want the limit", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	waitForFirstPasses(ctx, func() (int, int) { return 0, 3 }, quiet, limit)
	if d := time.Since(start); d > limit/2 {
		t.Errorf("a cancelled context: waited %s", d)
	}
}
