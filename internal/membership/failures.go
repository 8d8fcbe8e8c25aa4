package membership

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// watchFailed sorts a failed list or watch of the member's cache: a
// refusal disengages the member; an expired resourceVersion is the
// cache's to handle (it lists again); any other failure (the server
// unreachable, an error of the server's, an answer that cannot be
// decoded) is added to failing and calls for a probe.
func watchFailed(ctx context.Context, err error, refused chan<- error, lost chan<- struct{}, failing *failureStreak) {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return // stopping
	}
	if isRefusal(err) {
		select {
		case refused <- err:
		default:
		}
		return
	}
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return
	}
	failing.add(time.Now(), err)
	select {
	case lost <- struct{}{}:
	default:
	}
}

// failureStreak follows a member's cache failing to list or watch for
// another reason than a refusal. A cache that keeps failing for
// failingLimit (no pause of streakPause) is no view of the member, whatever its
// probe says (seen elsewhere: a CRD upgraded in place stopped a peer's
// export sync while its heartbeat went on, and the other clusters kept a
// view that was no longer true); the member is then disengaged, so that
// nothing runs as if it were read, its publisher's heartbeat least of
// all. A nil streak records nothing.
type failureStreak struct {
	mu          sync.Mutex
	first, last time.Time
	count       int
	err         error
}

const (
	// failingLimit is how long a cache may fail before its member is
	// disengaged: four heartbeat intervals, past the reflector's longest
	// backoff (30 s).
	failingLimit = time.Minute
	// streakPause ends a streak: client-go's reflector retries a failed
	// list or watch after 0.8 s, doubling up to 30 s, with as much jitter,
	// so the failures of a cache that keeps failing are never more than
	// 60 s apart; failures further apart are sporadic (a relist that
	// worked in between), not a streak.
	streakPause = 65 * time.Second
	// streakFailures is the fewest failures a streak has: a cache that
	// keeps failing retries five times in its first 30 s, while two
	// sporadic failures up to streakPause apart are no streak.
	streakFailures = 5
)

func (f *failureStreak) add(now time.Time, err error) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last.IsZero() || now.Sub(f.last) > streakPause {
		f.first, f.count = now, 0
	}
	f.last, f.err = now, err
	f.count++
}

// over returns why the member must be disengaged when by now its cache
// has failed for limit (and streakFailures times), nil otherwise.
func (f *failureStreak) over(now time.Time, limit time.Duration) error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last.IsZero() || now.Sub(f.last) > streakPause || now.Sub(f.first) < limit || f.count < streakFailures {
		return nil
	}
	return fmt.Errorf("its API server has failed mcs-syncer's lists, watches or writes %d times since %s (last: %w): no longer read as if it were", f.count, stamp(f.first), f.err)
}

// isRefusal tells whether a failed list or watch was the API server's
// refusal (403, 401, or 404 for a resource it stopped serving).
func isRefusal(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err)
}

// refusal is the state of a member that refused a list or watch.
func refusal(err error) State {
	if apierrors.IsNotFound(err) {
		return MissingCRDs
	}
	return Forbidden
}
