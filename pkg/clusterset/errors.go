package clusterset

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Routine reports whether a reconcile's error is expected and retried
// rather than a fault to report: a resourceVersion conflict (another
// writer, or a cache that has not seen our own last write, got there
// first) or the end of ctx (a shutdown, a member disengaged). Such errors
// are logged at debug level, never with controller-runtime's error log and
// stack trace.
func Routine(ctx context.Context, err error) bool {
	if err == nil {
		return false
	}
	return apierrors.IsConflict(err) || (ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ctx.Err())))
}
