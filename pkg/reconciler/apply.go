package reconciler

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// Apply writes a plan: creates, then updates, then deletes. Every write is
// attempted even when another fails; the error returned joins the failures.
// Creates are skipped while the owner is being deleted (its slices are
// about to be garbage collected), and a namespace being terminated ends the
// run quietly. The tracker records each successful write. An empty plan
// writes nothing but is counted like any other: the gauges then hold the
// owner's figures even when nothing had to change (after a restart, say).
func (r *Reconciler) Apply(ctx context.Context, plan *Plan) error {
	owner := plan.owner
	ns := owner.GetNamespace()
	ownerUID := owner.GetUID()
	slices := r.client.EndpointSlices(ns)
	logger := klog.FromContext(ctx)
	r.tracker.forgetDeletions(ownerUID, plan.completedDeletions)

	var errs []error
	changed := 0
	terminating := false

	if owner.GetDeletionTimestamp() == nil {
		for _, s := range plan.Create {
			created, err := slices.Create(ctx, s, metav1.CreateOptions{})
			if err != nil {
				if namespaceTerminating(err) {
					terminating = true
					break
				}
				errs = append(errs, fmt.Errorf("create EndpointSlice for %s/%s: %w", ns, owner.GetName(), err))
				continue
			}
			r.tracker.written(ownerUID, created)
			r.metrics.changes.WithLabelValues(opCreate).Inc()
			changed++
		}
	}
	if !terminating {
		for _, s := range plan.Update {
			updated, err := slices.Update(ctx, s, metav1.UpdateOptions{})
			if err != nil {
				errs = append(errs, fmt.Errorf("update EndpointSlice %s/%s: %w", ns, s.Name, err))
				continue
			}
			r.tracker.written(ownerUID, updated)
			r.metrics.changes.WithLabelValues(opUpdate).Inc()
			changed++
		}
	}
	for _, s := range plan.Delete {
		err := slices.Delete(ctx, s.Name, deleteOptions(s))
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete EndpointSlice %s/%s: %w", ns, s.Name, err))
			continue
		}
		if ownerOf(s) == ownerUID {
			r.tracker.deleted(ownerUID, s)
		} else {
			// Ownership enforced: a slice with this reconciler's managed-by
			// label but another owner. Say so where the user looks.
			logger.Info("Deleted an EndpointSlice with this reconciler's managed-by label but another owner", "owner", klog.KObj(owner), "endpointSlice", klog.KObj(s), "itsOwner", ownerOf(s))
			if r.recorder != nil {
				r.recorder.Eventf(owner, nil, corev1.EventTypeNormal, "DeletedForeignEndpointSlice", "DeleteEndpointSlice",
					"Deleted EndpointSlice %s: it carries managed-by %s but is not owned by this object", s.Name, r.managedBy)
			}
		}
		r.metrics.changes.WithLabelValues(opDelete).Inc()
		changed++
	}

	r.metrics.added.Observe(float64(plan.added))
	r.metrics.removed.Observe(float64(plan.removed))
	r.metrics.changedPerSync.Observe(float64(changed))
	if terminating {
		logger.V(4).Info("Namespace is terminating, EndpointSlices not written", "owner", klog.KObj(owner))
		r.metrics.syncs.WithLabelValues(syncResultSuccess).Inc()
		return nil
	}
	err := errors.Join(errs...)
	if err != nil {
		r.metrics.syncs.WithLabelValues(syncResultError).Inc()
		// Conflicts (a cache behind another writer) and a shutdown are
		// routine: retried, not worth a Warning.
		if r.recorder != nil && !apierrors.IsConflict(err) && ctx.Err() == nil {
			r.recorder.Eventf(owner, nil, corev1.EventTypeWarning, "FailedToUpdateEndpointSlices", "UpdateEndpointSlices",
				"Error updating EndpointSlices: %v", err)
		}
		return err
	}
	r.metrics.setOwner(ownerUID, plan.figures)
	r.metrics.syncs.WithLabelValues(syncResultSuccess).Inc()
	return nil
}

// deleteOptions makes a delete apply only to the slice that was planned on,
// not to one recreated or changed since.
func deleteOptions(s *discoveryv1.EndpointSlice) metav1.DeleteOptions {
	var pre metav1.Preconditions
	if s.UID != "" {
		pre.UID = &s.UID
	}
	if s.ResourceVersion != "" {
		pre.ResourceVersion = &s.ResourceVersion
	}
	return metav1.DeleteOptions{Preconditions: &pre}
}

// namespaceTerminating reports whether err says the namespace is being
// deleted, so nothing can be created in it any more.
func namespaceTerminating(err error) bool {
	return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}
