package imports

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// applyStatus writes the ServiceImport's status where it differs from
// what planStatus says it must be.
func (c *Controller) applyStatus(ctx context.Context, si *mcsv1beta1.ServiceImport, merged clusterset.Merged, slicesPresent bool, problem *metav1.Condition) error {
	status, write := planStatus(si, merged, slicesPresent, problem)
	if !write {
		return nil
	}
	want := si.DeepCopy()
	want.Status = status
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
