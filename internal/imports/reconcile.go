package imports

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/plumbing"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// Reconcile brings one import in the consumer cluster in line with the
// Store. A write that lost a race with another (a resourceVersion
// conflict) is retried after plumbing.ConflictRetry, and the end of a
// shutdown is not an error: both are logged at debug level only.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := c.reconcile(ctx, req.NamespacedName)
	if retryAfter, routine := plumbing.Routine(ctx, err); routine {
		log.FromContext(ctx).V(1).Info("Import will be retried", "reason", err.Error())
		return reconcile.Result{RequeueAfter: retryAfter}, nil
	}
	plumbing.ReportFailure(ctx, err)
	return res, err
}

// observed is what a reconcile reads of the consumer besides the
// ServiceImport, all of it before anything is planned or written: the
// Service of the derived Service's name (whoever's; nil: none), the
// imported slices, and the zones of the consumer's nodes (local-first
// imports only).
type observed struct {
	service *corev1.Service
	slices  []*discoveryv1.EndpointSlice
	zones   []string
}

// observe reads what the plan of key's import compares against.
func (c *Controller) observe(ctx context.Context, key types.NamespacedName, merged clusterset.Merged) (observed, error) {
	svc, err := c.readDerivedService(ctx, key)
	if err != nil {
		return observed{}, err
	}
	held, err := c.slices.of(ctx, key)
	if err != nil {
		return observed{}, fmt.Errorf("list imported EndpointSlices of %s: %w", key, err)
	}
	return observed{service: svc, slices: held, zones: c.zonesFor(ctx, merged)}, nil
}

// applySlices plans the slices of si's sources (planSlices) and applies
// the plan (applySlicesPlan).
func (c *Controller) applySlices(ctx context.Context, si *mcsv1beta1.ServiceImport, merged clusterset.Merged, v view, seen observed) (present bool, err error) {
	known := c.settled.of(client.ObjectKeyFromObject(si))
	plan := planSlices(sliceInputs{
		si: si, siGVK: c.siGVK, merged: merged, exports: v.exports, unsettled: v.unsettled,
		members: c.opts.Membership.IDs(), held: seen.slices, consumer: c.opts.Consumer,
		zones: seen.zones, settled: known, ranges: c.opts.AddressRanges, checked: c.checked,
	})
	return c.applySlicesPlan(ctx, si, v.exports, plan, known)
}

// reconcile reads what is (the view of the exports, the namespace, the
// ServiceImport, then observe) and leaves the rest to apply, which writes
// the ServiceImport, its derived Service, its spec.ips, its slices and its
// status, each only where its plan (plan.go) says it differs.
func (c *Controller) reconcile(ctx context.Context, key types.NamespacedName) (reconcile.Result, error) {
	v := c.viewOf(key)
	if ok, err := c.namespaceReady(ctx, key, len(v.exports) > 0); !ok || err != nil {
		return reconcile.Result{}, err
	}
	si := &mcsv1beta1.ServiceImport{}
	if err := c.client.Get(ctx, key, si); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("get ServiceImport %s: %w", key, err)
		}
		si = nil
	}
	if si != nil {
		si = plumbing.Latest(c.own, si) // a cache behind our last write is read as the write
	}
	if si != nil && si.Labels[ManagedByLabel] != c.opts.ManagedBy {
		c.blockedBy(ctx, si, len(v.exports) > 0)
		return reconcile.Result{}, nil
	}
	c.cleared(reportNotManaged, key)
	// blocked says why the import could not be written here, for the
	// exports' Ready message ("" clears it); set once, at the end.
	blocked := ""
	defer func() { c.opts.Feedback.SetImportBlocked(key, c.opts.Consumer, blocked) }()
	if len(v.exports) == 0 {
		return c.withdraw(ctx, key, si, v)
	}

	merged := clusterset.Merge(v.exports)
	seen, err := c.observe(ctx, key, merged)
	if err != nil {
		return reconcile.Result{}, err
	}
	var res reconcile.Result
	res, blocked, err = c.apply(ctx, key, si, merged, v, seen)
	return res, err
}

// apply plans and writes the import of key from what reconcile read (si:
// the ServiceImport, nil for none), each stage in the order its inputs
// need: the ServiceImport first (the derived Service and the slices are
// owned by it: they need its UID), spec.ips once the derived Service has
// them, the status last (whether slices are present, what failed).
// blocked says why the import could not be written here ("": it was).
func (c *Controller) apply(ctx context.Context, key types.NamespacedName, si *mcsv1beta1.ServiceImport, merged clusterset.Merged, v view, seen observed) (res reconcile.Result, blocked string, err error) {
	if si != nil && len(v.unsettled) > 0 {
		return c.applyPartial(ctx, si, merged, v, seen)
	}
	if si, err = c.applyServiceImport(ctx, key, si, merged); err != nil {
		return reconcile.Result{}, "", err
	}
	derived, err := c.applyDerivedService(ctx, si, merged, seen.service)
	if err != nil {
		return reconcile.Result{}, "", err
	}
	if si, err = c.applyIPs(ctx, si, derived.ips); err != nil {
		return reconcile.Result{}, "", err
	}
	present, sliceErr := c.applySlices(ctx, si, merged, v, seen)
	problem := derived.problem
	if slicesFailed(ctx, sliceErr) {
		// Never Ready over slices that were not written (a consumer whose
		// credentials may read but not write EndpointSlices).
		blocked = c.slicesNotWritten(key, sliceErr)
		problem = cmp.Or(problem, slicesNotWrittenCondition(sliceErr))
	}
	if err := c.applyStatus(ctx, si, merged, present, problem, v.exports); err != nil {
		return reconcile.Result{}, blocked, errors.Join(sliceErr, err)
	}
	res, err = sliceResult(sliceErr, minPositive(v.recheck, derived.recheck))
	return res, blocked, err
}

// applyPartial reconciles an import on a partial view (right after a
// start, or a member within its grace): the ServiceImport stays as it is,
// so that a restart writes nothing; the slices of the settled sources
// follow their exports. blocked says why they could not be written ("":
// they were).
func (c *Controller) applyPartial(ctx context.Context, si *mcsv1beta1.ServiceImport, merged clusterset.Merged, v view, seen observed) (res reconcile.Result, blocked string, err error) {
	merged.Spec.Type, merged.Spec.IPFamilies = si.Spec.Type, si.Spec.IPFamilies
	_, err = c.applySlices(ctx, si, merged, v, seen)
	if slicesFailed(ctx, err) {
		blocked = c.slicesNotWritten(client.ObjectKeyFromObject(si), err)
	}
	res, err = sliceResult(err, v.recheck)
	return res, blocked, err
}

// slicesNotWrittenCondition is the Ready=False condition of an import
// whose slices could not be written.
func slicesNotWrittenCondition(err error) *metav1.Condition {
	cond := mcsv1beta1.NewServiceImportCondition(mcsv1beta1.ServiceImportConditionReady, metav1.ConditionFalse,
		ReasonEndpointSlicesNotWritten, fmt.Sprintf("the imported EndpointSlices could not be written: %v", err))
	return &cond
}

// slicesFailed reports whether writing the slices failed for more than a
// race (a resourceVersion conflict, a cache that has not seen our last
// writes yet), which the next reconcile settles by itself.
func slicesFailed(ctx context.Context, err error) bool {
	if err == nil || errors.Is(err, reconciler.ErrStaleCache) {
		return false
	}
	_, routine := plumbing.Routine(ctx, err)
	return !routine
}

// slicesNotWritten is the exports' Ready message part for an import whose
// slices could not be written here.
func (c *Controller) slicesNotWritten(key types.NamespacedName, err error) string {
	return fmt.Sprintf("the EndpointSlices of ServiceImport %s in cluster %s could not be written: %v", key, c.opts.Consumer, err)
}

// sliceResult is the outcome of a reconcile whose other writes succeeded.
func sliceResult(sliceErr error, recheck time.Duration) (reconcile.Result, error) {
	if errors.Is(sliceErr, reconciler.ErrStaleCache) {
		// The slice cache has not seen our last writes yet; their echoes
		// requeue us (the tracker lets them through after a refusal),
		// this is the fallback.
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	if sliceErr != nil {
		return reconcile.Result{}, sliceErr // controller-runtime ignores a delay given with an error
	}
	return reconcile.Result{RequeueAfter: recheck}, nil
}

// namespaceReady reports whether key's namespace exists and is not being
// deleted. Imports are never the reason a namespace is created: a missing
// one is logged (once per import) and counted when something would be
// imported.
func (c *Controller) namespaceReady(ctx context.Context, key types.NamespacedName, wanted bool) (bool, error) {
	ns := &corev1.Namespace{}
	if err := c.client.Get(ctx, types.NamespacedName{Name: key.Namespace}, ns); err != nil {
		if !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("get namespace %s: %w", key.Namespace, err)
		}
		if wanted && c.reportOnce(reportNamespaceMissing, key) {
			log.FromContext(ctx).Info("Namespace does not exist here; the import is skipped until it does", "serviceImport", key)
			c.opts.Metrics.namespaceMissing(c.opts.Consumer)
		}
		return false, nil
	}
	return ns.DeletionTimestamp == nil, nil
}

// Problems that are logged (and recorded) once per import, not on every
// reconcile.
const (
	reportNamespaceMissing = "namespace-missing"
	reportNotManaged       = "not-managed"
)

// reportOnce reports whether problem of key is new: the first time since
// the import was forgotten or the problem was cleared.
func (c *Controller) reportOnce(problem string, key types.NamespacedName) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := reportKey{problem, key}
	first := !c.reported[k]
	c.reported[k] = true
	return first
}

// cleared forgets that problem of key was reported.
func (c *Controller) cleared(problem string, key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.reported, reportKey{problem, key})
}

type reportKey struct {
	problem string
	key     types.NamespacedName
}

// withdraw deletes the ServiceImport of a key nobody exports (its derived
// Service and slices go with it, by owner references) once every member's
// exports are known.
func (c *Controller) withdraw(ctx context.Context, key types.NamespacedName, si *mcsv1beta1.ServiceImport, v view) (reconcile.Result, error) {
	if len(v.unsettled) > 0 {
		return reconcile.Result{RequeueAfter: v.recheck}, nil // absence proves nothing yet
	}
	if si != nil {
		if err := c.client.Delete(ctx, si, client.Preconditions{UID: &si.UID}); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, fmt.Errorf("delete ServiceImport %s: %w", key, err)
		}
		log.FromContext(ctx).V(2).Info("ServiceImport deleted: nobody exports it any more", "serviceImport", key)
	}
	c.forget(key, si)
	return reconcile.Result{RequeueAfter: v.recheck}, nil
}

// forget drops what the controller remembers of an import that is gone.
func (c *Controller) forget(key types.NamespacedName, si *mcsv1beta1.ServiceImport) {
	c.own.Forget(&mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
	c.own.Forget(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: DerivedServiceName(key)}})
	c.opts.Metrics.forget(c.opts.Consumer, c.opts.Membership.IDs(), key)
	c.settled.forget(key)
	c.addresses.forget(key)
	c.checked.forget(key, "")
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.reported, reportKey{reportNamespaceMissing, key})
	if si != nil {
		for _, r := range c.reconcilers {
			r.Forget(si.UID)
		}
	}
}
