package imports

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// ExportedKeysAnnotation lists, on a ServiceImport, the label and
// annotation keys it took from the ServiceExports' exportedLabels and
// exportedAnnotations (JSON: {"labels":[...],"annotations":[...]}), so that
// a key the exports drop is removed while the keys that other tools set on
// the ServiceImport stay. Absent when the exports carry none.
const ExportedKeysAnnotation = "mcs-syncer.io/exported-keys"

// exportedKeys is the value of ExportedKeysAnnotation.
type exportedKeys struct {
	Labels      []string `json:"labels,omitempty"`
	Annotations []string `json:"annotations,omitempty"`
}

// applyServiceImport creates the ServiceImport (si nil) or updates it
// where it differs from what planServiceImport says it must be (its spec
// and metadata from the exports, keeping spec.ips, set from the derived
// Service by applyIPs, and the labels and annotations of others).
func (c *Controller) applyServiceImport(ctx context.Context, key types.NamespacedName, si *mcsv1beta1.ServiceImport, merged clusterset.Merged) (*mcsv1beta1.ServiceImport, error) {
	want, write := planServiceImport(key, si, merged, c.opts.ManagedBy)
	if si == nil {
		if err := c.client.Create(ctx, want); err != nil {
			return nil, fmt.Errorf("create ServiceImport %s: %w", key, err)
		}
		c.own.Wrote("", want)
		return want, nil
	}
	if !write {
		return si, nil
	}
	if err := c.client.Update(ctx, want); err != nil {
		return nil, fmt.Errorf("update ServiceImport %s: %w", key, err)
	}
	c.own.Wrote(si.ResourceVersion, want)
	return want, nil
}

// applyIPs writes the clusterset IPs into spec.ips where they differ.
func (c *Controller) applyIPs(ctx context.Context, si *mcsv1beta1.ServiceImport, ips []string) (*mcsv1beta1.ServiceImport, error) {
	if slices.Equal(si.Spec.IPs, ips) {
		return si, nil
	}
	replaced := si.ResourceVersion
	si = si.DeepCopy()
	si.Spec.IPs = ips
	if err := c.client.Update(ctx, si); err != nil {
		return nil, fmt.Errorf("update ips of ServiceImport %s/%s: %w", si.Namespace, si.Name, err)
	}
	c.own.Wrote(replaced, si)
	return si, nil
}

// blockedBy reports a ServiceImport of the import's name that mcs-syncer
// does not manage (a person's, another controller's): it is left alone,
// and the user hears of it where they look: an event on it, a log line,
// and (through the Store) the exporting ServiceExports' Ready message.
func (c *Controller) blockedBy(ctx context.Context, si *mcsv1beta1.ServiceImport, wanted bool) {
	key := client.ObjectKeyFromObject(si)
	if !wanted {
		c.opts.Feedback.SetImportBlocked(key, c.opts.Consumer, "")
		c.cleared(reportNotManaged, key)
		return
	}
	why := fmt.Sprintf("ServiceImport %s in cluster %s is not managed by mcs-syncer (no label %s=%s); delete it so that mcs-syncer can import the Service there",
		key, c.opts.Consumer, ManagedByLabel, c.opts.ManagedBy)
	if c.reportOnce(reportNotManaged, key) {
		log.FromContext(ctx).Info("ServiceImport is not managed by mcs-syncer; leaving it alone", "serviceImport", key)
		if c.recorder != nil {
			c.recorder.Eventf(si, nil, corev1.EventTypeWarning, "NotManaged", "Import", "%s", why)
		}
	}
	c.opts.Feedback.SetImportBlocked(key, c.opts.Consumer, why)
}
