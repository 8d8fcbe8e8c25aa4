package reconciler

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	discoveryclient "k8s.io/client-go/kubernetes/typed/discovery/v1"
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
	r.tracker.forgetDeletions(owner.GetUID(), plan.completedDeletions)
	defer r.tracker.applied(owner.GetUID())
	w := &writer{r: r, ctx: ctx, owner: owner, slices: r.client.EndpointSlices(owner.GetNamespace())}
	if owner.GetDeletionTimestamp() == nil {
		w.create(plan.Create)
	}
	if !w.terminating {
		w.update(plan.Update)
	}
	w.delete(plan.Delete)

	r.metrics.added.Observe(float64(plan.added))
	r.metrics.removed.Observe(float64(plan.removed))
	r.metrics.changedPerSync.Observe(float64(w.changed))
	if w.terminating {
		klog.FromContext(ctx).V(4).Info("Namespace is terminating, EndpointSlices not written", "owner", klog.KObj(owner))
		r.metrics.syncs.WithLabelValues(syncResultSuccess).Inc()
		return nil
	}
	if err := errors.Join(w.errs...); err != nil {
		r.metrics.syncs.WithLabelValues(syncResultError).Inc()
		// Conflicts (a cache behind another writer) and a shutdown are
		// routine: retried, not worth a Warning.
		if r.recorder != nil && !apierrors.IsConflict(err) && ctx.Err() == nil {
			r.recorder.Eventf(owner, nil, corev1.EventTypeWarning, "FailedToUpdateEndpointSlices", "UpdateEndpointSlices",
				"Error updating EndpointSlices: %v", err)
		}
		return err
	}
	r.metrics.setOwner(owner.GetUID(), plan.figures)
	r.metrics.syncs.WithLabelValues(syncResultSuccess).Inc()
	return nil
}

// writer sends one plan's writes and keeps their tally.
type writer struct {
	r      *Reconciler
	ctx    context.Context
	owner  Owner
	slices discoveryclient.EndpointSliceInterface

	errs        []error
	changed     int
	terminating bool // the namespace is being deleted: creates stop
}

// each calls write for 0..n-1, up to WithConcurrentWrites at once, and
// returns when all have returned; their errors, in index order, go to
// w.errs, and w.changed counts those that changed a slice. A write that
// returns stop ends the calls not yet started.
func (w *writer) each(n int, write func(i int) (changed bool, stop bool, err error)) {
	errs := make([]error, n)
	changed := make([]bool, n)
	var (
		wg      sync.WaitGroup
		stopped atomic.Bool
		// One slot (the default) writes one at a time, in order: the
		// next write takes the slot only once the last has returned.
		slots = make(chan struct{}, w.r.concurrentWrites)
	)
	for i := range n {
		slots <- struct{}{}
		if stopped.Load() {
			<-slots
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			var stop bool
			if changed[i], stop, errs[i] = write(i); stop {
				stopped.Store(true)
			}
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			w.errs = append(w.errs, errs[i])
		}
		if changed[i] {
			w.changed++
		}
	}
}

func (w *writer) create(slices []*discoveryv1.EndpointSlice) {
	var terminating atomic.Bool
	w.each(len(slices), func(i int) (bool, bool, error) {
		s := slices[i]
		created, err := w.slices.Create(w.ctx, s, metav1.CreateOptions{})
		if namespaceTerminating(err) {
			terminating.Store(true)
			return false, true, nil
		}
		if err != nil {
			return false, false, &createError{owner: w.owner.GetNamespace() + "/" + w.owner.GetName(), generateName: s.GenerateName, err: err}
		}
		w.r.tracker.written(w.owner.GetUID(), created)
		w.r.metrics.changes.WithLabelValues(opCreate).Inc()
		return true, false, nil
	})
	w.terminating = terminating.Load()
}

// createError is a create that failed. Its message leaves out the name
// that the API server generated for the slice ("web-xsctx" becomes
// "web-*"): a refusal that repeats (a quota, a validation) then reads the
// same on every try, so that a condition that quotes it is not rewritten.
// A new name each try rewrote the owner's status each try, and each new
// version of the owner started a new event (client-go aggregates the
// events of one version of the object they regard into a series).
type createError struct {
	owner, generateName string
	err                 error
}

func (e *createError) Error() string {
	return fmt.Sprintf("create EndpointSlice for %s: %s", e.owner, withoutGeneratedName(e.err, e.generateName))
}

func (e *createError) Unwrap() error { return e.err }

// withoutGeneratedName returns err's message with the quoted name the API
// server generated from generateName replaced by generateName + "*".
func withoutGeneratedName(err error, generateName string) string {
	msg := err.Error()
	if generateName == "" {
		return msg
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if name := status.Status().Details; name != nil && name.Name != "" && name.Name != generateName {
			msg = strings.ReplaceAll(msg, strconv.Quote(name.Name), strconv.Quote(generateName+"*"))
		}
	}
	// The name as the API server generates it (five characters after the
	// prefix), should the status not carry it.
	return regexp.MustCompile(`"`+regexp.QuoteMeta(generateName)+`[a-z0-9]{5}"`).ReplaceAllLiteralString(msg, strconv.Quote(generateName+"*"))
}

func (w *writer) update(slices []*discoveryv1.EndpointSlice) {
	w.each(len(slices), func(i int) (bool, bool, error) {
		s := slices[i]
		updated, err := w.slices.Update(w.ctx, s, metav1.UpdateOptions{})
		if err != nil {
			return false, false, fmt.Errorf("update EndpointSlice %s/%s: %w", s.Namespace, s.Name, err)
		}
		w.r.tracker.written(w.owner.GetUID(), updated)
		w.r.metrics.changes.WithLabelValues(opUpdate).Inc()
		return true, false, nil
	})
}

func (w *writer) delete(slices []*discoveryv1.EndpointSlice) {
	w.each(len(slices), func(i int) (bool, bool, error) {
		s := slices[i]
		err := w.slices.Delete(w.ctx, s.Name, deleteOptions(s))
		if err != nil && !apierrors.IsNotFound(err) {
			return false, false, fmt.Errorf("delete EndpointSlice %s/%s: %w", s.Namespace, s.Name, err)
		}
		if ownerOf(s) == w.owner.GetUID() {
			w.r.tracker.deleted(w.owner.GetUID(), s)
		} else {
			w.foreignDeleted(s)
		}
		w.r.metrics.changes.WithLabelValues(opDelete).Inc()
		return true, false, nil
	})
}

// foreignDeleted says where the user looks that a slice with this
// reconciler's managed-by label but another owner (ownership enforced) was
// deleted.
func (w *writer) foreignDeleted(s *discoveryv1.EndpointSlice) {
	klog.FromContext(w.ctx).Info("Deleted an EndpointSlice with this reconciler's managed-by label but another owner",
		"owner", klog.KObj(w.owner), "endpointSlice", klog.KObj(s), "itsOwner", ownerOf(s))
	if w.r.recorder != nil {
		w.r.recorder.Eventf(w.owner, nil, corev1.EventTypeNormal, "DeletedForeignEndpointSlice", "DeleteEndpointSlice",
			"Deleted EndpointSlice %s: it carries managed-by %s but is not owned by this object", s.Name, w.r.managedBy)
	}
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
