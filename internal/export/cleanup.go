package export

import (
	"context"
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// conditionTypes are the ServiceExport conditions the watcher writes.
var conditionTypes = []string{
	string(mcsv1beta1.ServiceExportConditionValid),
	string(mcsv1beta1.ServiceExportConditionReady),
	string(mcsv1beta1.ServiceExportConditionConflict),
}

// ClearStatus removes the conditions the watcher wrote from every
// ServiceExport of a cluster that left the clusterset: its exports go
// nowhere now, and conditions saying otherwise would mislead. Conditions of
// other types are kept.
func ClearStatus(ctx context.Context, c client.Client) error {
	var list mcsv1beta1.ServiceExportList
	if err := c.List(ctx, &list); err != nil {
		return fmt.Errorf("list ServiceExports: %w", err)
	}
	var errs []error
	for i := range list.Items {
		se := &list.Items[i]
		before := len(se.Status.Conditions)
		se.Status.Conditions = slices.DeleteFunc(se.Status.Conditions, func(c metav1.Condition) bool {
			return slices.Contains(conditionTypes, c.Type)
		})
		if len(se.Status.Conditions) == before {
			continue
		}
		if err := c.Status().Update(ctx, se); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("clear status of ServiceExport %s: %w", klogRef(se), err))
		}
	}
	return errors.Join(errs...)
}
