package imports

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// applyStatus writes the ServiceImport's status where it changed:
// status.clusters the exporting clusters; endpointSliceObjects Present when
// the import has slices, Absent when it has none (no endpoints anywhere);
// Ready True/Ready, or problem (Ready=False) when the derived Service could
// not be had.
func (c *Controller) applyStatus(ctx context.Context, si *mcsv1beta1.ServiceImport, merged clusterset.Merged, slicesPresent bool, problem *metav1.Condition) error {
	want := si.DeepCopy()
	want.Status.Clusters = nil
	for _, id := range merged.Clusters {
		want.Status.Clusters = append(want.Status.Clusters, mcsv1beta1.ClusterStatus{Cluster: string(id)})
	}
	want.Status.EndpointSliceObjects = mcsv1beta1.EndpointSliceObjectsAbsent
	if slicesPresent {
		want.Status.EndpointSliceObjects = mcsv1beta1.EndpointSliceObjectsPresent
	}
	ready := mcsv1beta1.NewServiceImportCondition(mcsv1beta1.ServiceImportConditionReady, metav1.ConditionTrue,
		mcsv1beta1.ServiceImportReasonReady, fmt.Sprintf("imported from %v", merged.Clusters))
	if problem != nil {
		ready = *problem
	}
	ready.ObservedGeneration = si.Generation
	ready.Message = clusterset.CutMessage(ready.Message)
	meta.SetStatusCondition(&want.Status.Conditions, ready)
	if equality.Semantic.DeepEqual(want.Status, si.Status) {
		return nil
	}
	if err := c.client.Status().Update(ctx, want); err != nil {
		return fmt.Errorf("update status of ServiceImport %s/%s: %w", si.Namespace, si.Name, err)
	}
	c.own.wrote(want)
	return nil
}
