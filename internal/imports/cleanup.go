package imports

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Withdraw deletes every import mcs-syncer (as managedBy) wrote into a
// cluster that left the clusterset: its ServiceImports, derived Services
// and imported EndpointSlices. The garbage collector would remove the last
// two with their ServiceImport; they are deleted here too, so that a
// cluster whose collector lags or is absent is left clean all the same.
func Withdraw(ctx context.Context, c client.Client, managedBy string) error {
	var errs []error
	deleteAll := func(list client.ObjectList, selectors ...client.ListOption) {
		if err := c.List(ctx, list, selectors...); err != nil {
			errs = append(errs, err)
			return
		}
		_ = meta.EachListItem(list, func(item runtime.Object) error {
			o := item.(client.Object)
			if err := c.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("delete %T %s/%s: %w", o, o.GetNamespace(), o.GetName(), err))
			}
			return nil
		})
	}
	imported := client.HasLabels{mcsv1beta1.LabelServiceName}
	deleteAll(&mcsv1beta1.ServiceImportList{}, client.MatchingLabels{ManagedByLabel: managedBy})
	deleteAll(&corev1.ServiceList{}, client.MatchingLabels{ManagedByLabel: managedBy}, imported)
	deleteAll(&discoveryv1.EndpointSliceList{}, client.MatchingLabels{discoveryv1.LabelManagedBy: managedBy}, imported)
	return errors.Join(errs...)
}
