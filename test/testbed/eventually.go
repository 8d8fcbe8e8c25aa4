package testbed

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Eventually polls check every 250ms until it returns nil, failing t with
// the last error if ctx ends first. Tests against the testbed wait with it
// instead of sleeping.
func Eventually(ctx context.Context, t testing.TB, what string, check func() error) {
	t.Helper()
	EventuallyEvery(ctx, t, what, 250*time.Millisecond, check)
}

// EventuallyEvery is Eventually polling every interval: a check that
// lists tens of thousands of endpoints, polled four times a second, would
// load the API servers more than what it waits for.
func EventuallyEvery(ctx context.Context, t testing.TB, what string, interval time.Duration, check func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextCancel(ctx, interval, true, func(context.Context) (bool, error) {
		got := check()
		if got == nil || ctx.Err() == nil || last == nil {
			last = got // the last check's own answer, not the deadline's
		}
		return got == nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %v)", what, err, last)
	}
}
