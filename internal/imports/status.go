package imports

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// applyStatus writes the ServiceImport's status where it differs from
// what planStatus says it must be.
func (c *Controller) applyStatus(ctx context.Context, si *mcsv1beta1.ServiceImport, merged clusterset.Merged, slicesPresent bool, problem *metav1.Condition, exports []*clusterset.ExportedService) error {
	incomplete := incompleteSources(exports)
	status, write := planStatus(si, merged, slicesPresent, problem, incomplete)
	if !write {
		return nil
	}
	if note := incompleteNote(incomplete); note != "" && c.recorder != nil && !strings.HasPrefix(readyMessage(si.Status), note) {
		c.recorder.Eventf(si, nil, corev1.EventTypeWarning, ReasonPublicationIncomplete, "Import", "%s", note)
	}
	want := si.DeepCopy()
	want.Status = status
	if err := c.client.Status().Update(ctx, want); err != nil {
		return fmt.Errorf("update status of ServiceImport %s/%s: %w", si.Namespace, si.Name, err)
	}
	c.own.Wrote(si.ResourceVersion, want)
	return nil
}

// ReasonPublicationIncomplete is the reason of the Warning event a
// ServiceImport gets when a source's publication becomes incomplete
// (incompleteNote).
const ReasonPublicationIncomplete = "PublicationIncomplete"

// incompleteSources are the sources of exports some of whose publication's
// parts their reader left out for the member's limit
// (clusterset.ExportedService.PartsLeftOut), in the exports' order.
func incompleteSources(exports []*clusterset.ExportedService) []clusterset.ClusterID {
	var out []clusterset.ClusterID
	for _, e := range exports {
		if e.PartsLeftOut > 0 {
			out = append(out, e.Cluster)
		}
	}
	return out
}

// readyMessage is the message of status's Ready condition ("" for none).
func readyMessage(status mcsv1beta1.ServiceImportStatus) string {
	if ready := meta.FindStatusCondition(status.Conditions, string(mcsv1beta1.ServiceImportConditionReady)); ready != nil {
		return ready.Message
	}
	return ""
}
