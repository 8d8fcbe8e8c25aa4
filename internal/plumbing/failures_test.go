package plumbing

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestReportFailure: the API server's own failures reach the context's
// reporter; refusals, conflicts, bad input and errors of no API server do
// not; a context without a reporter takes any.
func TestReportFailure(t *testing.T) {
	var got []error
	ctx := WithFailureReporter(context.Background(), func(err error) { got = append(got, err) })
	gr := schema.GroupResource{Resource: "serviceexports"}
	internal := apierrors.NewInternalError(errors.New("conversion webhook failed"))
	for _, err := range []error{
		internal,
		apierrors.NewConflict(gr, "web", errors.New("changed")),
		apierrors.NewForbidden(gr, "web", errors.New("no")),
		apierrors.NewInvalid(schema.GroupKind{Kind: "ServiceExport"}, "web", nil),
		errors.New("connection refused"),
	} {
		ReportFailure(ctx, err)
	}
	if len(got) != 1 || got[0] != internal {
		t.Errorf("reported %v, want only the 500", got)
	}
	ReportFailure(context.Background(), internal) // no reporter: nothing happens
}
