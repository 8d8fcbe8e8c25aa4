package plumbing

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// failureReporter is the context key of WithFailureReporter.
type failureReporter struct{}

// WithFailureReporter returns ctx carrying report, which ReportFailure
// calls: membership gives it to the controllers of an engaged member, so
// that a member whose API server fails every write of theirs (a
// conversion webhook that cannot be reached) is failed like one whose
// watches fail, instead of staying engaged while nothing it exports moves.
func WithFailureReporter(ctx context.Context, report func(error)) context.Context {
	return context.WithValue(ctx, failureReporter{}, report)
}

// ReportFailure hands err, a reconcile's error, to ctx's failure reporter,
// if it has one and err is the API server's own failure (500: a
// conversion webhook's error, a storage error) rather than a refusal, a
// conflict or bad input, which the caller handles.
func ReportFailure(ctx context.Context, err error) {
	report, ok := ctx.Value(failureReporter{}).(func(error))
	if ok && apierrors.IsInternalError(err) {
		report(err)
	}
}
