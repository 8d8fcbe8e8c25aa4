package plumbing

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// ConflictRetry is how soon a reconcile whose write lost a resourceVersion
// race is tried again.
const ConflictRetry = 200 * time.Millisecond

// Routine reports whether a reconcile's error is expected rather than a
// fault to report, and when to try again: a resourceVersion conflict
// (another writer, or a cache that has not seen our own last write, got
// there first) after ConflictRetry; the end of ctx (a shutdown, a member
// disengaged) never (0). Such errors are logged at debug level, never with
// controller-runtime's error log and stack trace.
func Routine(ctx context.Context, err error) (retryAfter time.Duration, routine bool) {
	switch {
	case err == nil:
		return 0, false
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ctx.Err())):
		return 0, true
	case apierrors.IsConflict(err):
		return ConflictRetry, true
	}
	return 0, false
}
