package imports

import (
	"context"
	"fmt"
	"slices"
	"strings"

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
//
// The status is compared field by field before anything is copied: an
// import of 1,000 sources deep-copied and deep-compared its 1,000
// clusters on every reconcile, for a status that had not changed.
func (c *Controller) applyStatus(ctx context.Context, si *mcsv1beta1.ServiceImport, merged clusterset.Merged, slicesPresent bool, problem *metav1.Condition) error {
	var clusters []mcsv1beta1.ClusterStatus
	for _, id := range merged.Clusters {
		clusters = append(clusters, mcsv1beta1.ClusterStatus{Cluster: string(id)})
	}
	objects := mcsv1beta1.EndpointSliceObjectsAbsent
	if slicesPresent {
		objects = mcsv1beta1.EndpointSliceObjectsPresent
	}
	ready := mcsv1beta1.NewServiceImportCondition(mcsv1beta1.ServiceImportConditionReady, metav1.ConditionTrue,
		mcsv1beta1.ServiceImportReasonReady, "imported from "+clusterList(merged.Clusters))
	if problem != nil {
		ready = *problem
	}
	ready.ObservedGeneration = si.Generation
	ready.Message = clusterset.CutMessage(ready.Message)
	conditions := slices.Clone(si.Status.Conditions)
	meta.SetStatusCondition(&conditions, ready)
	if slices.Equal(clusters, si.Status.Clusters) && objects == si.Status.EndpointSliceObjects &&
		equality.Semantic.DeepEqual(conditions, si.Status.Conditions) {
		return nil
	}
	want := si.DeepCopy()
	want.Status.Clusters, want.Status.EndpointSliceObjects, want.Status.Conditions = clusters, objects, conditions
	if err := c.client.Status().Update(ctx, want); err != nil {
		return fmt.Errorf("update status of ServiceImport %s/%s: %w", si.Namespace, si.Name, err)
	}
	c.own.wrote(want)
	return nil
}

// clusterList formats ids as fmt's %v does ("[east west]"), without a
// reflection per ID.
func clusterList(ids []clusterset.ClusterID) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(string(id))
	}
	b.WriteByte(']')
	return b.String()
}
