package publish

import (
	"context"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/plumbing"
)

// withdraw removes a publication (head first: a reader withdraws the
// export with it, and holds parts that have no head) and its parts.
func (p *Publisher) withdraw(ctx context.Context, name types.NamespacedName, head *v1alpha1.PublishedExport, parts []*v1alpha1.PublishedExport) (reconcile.Result, error) {
	if head == nil && len(parts) == 0 {
		return reconcile.Result{}, nil
	}
	if head != nil {
		if err := p.remove(ctx, head); err != nil {
			return retry(ctx, fmt.Errorf("withdraw publication %s: %w", name, err))
		}
	}
	for _, part := range parts {
		if err := p.remove(ctx, part); err != nil {
			return retry(ctx, fmt.Errorf("withdraw part %s: %w", part.Name, err))
		}
	}
	log.FromContext(ctx).V(2).Info("Publication withdrawn", "publication", name, "parts", len(parts))
	return reconcile.Result{}, nil
}

// remove deletes one object of the member's publications, as it was read.
func (p *Publisher) remove(ctx context.Context, o *v1alpha1.PublishedExport) error {
	err := p.client.Delete(ctx, o, client.Preconditions{UID: &o.UID, ResourceVersion: &o.ResourceVersion})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// retry turns a write that lost a race (or a shutdown) into a short
// requeue, and returns other errors for the controller's backoff.
func retry(ctx context.Context, err error) (reconcile.Result, error) {
	if after, routine := plumbing.Routine(ctx, err); routine {
		return reconcile.Result{RequeueAfter: after}, nil
	}
	return reconcile.Result{}, err
}

// write writes a publication's plan: additions before the head, removals
// after it, so that a reader holds every endpoint that stays at every
// moment. A part that the head names but someone else deleted is written
// again last of all parts: a reader keeps what it held until then (and
// lets go of it when it reads the part again), so every endpoint moved out
// of it must be in another part first. inParts says the head carries no
// endpoints of its own.
func (p *Publisher) write(ctx context.Context, name types.NamespacedName, head, want *v1alpha1.PublishedExport, plan partPlan, inParts bool) (reconcile.Result, error) {
	update := func(part *v1alpha1.PublishedExport) error { return p.client.Update(ctx, part) }
	if part, err := writeEach(plan.update, update); err != nil {
		return retry(ctx, fmt.Errorf("update part %s: %w", part.Name, err))
	}
	var named []string
	if head != nil {
		named = head.Spec.Parts
	}
	create := func(part *v1alpha1.PublishedExport) error { return p.client.Create(ctx, part) }
	for _, again := range []bool{false, true} {
		round := slices.DeleteFunc(slices.Clone(plan.create), func(part *v1alpha1.PublishedExport) bool {
			return slices.Contains(named, part.Spec.Part) != again
		})
		if part, err := writeEach(round, create); err != nil {
			return p.createFailed(ctx, part, err)
		}
	}
	switch {
	case head == nil:
		if err := p.client.Create(ctx, want); err != nil {
			return p.createFailed(ctx, want, err)
		}
	case !headCurrent(head, want, plan, inParts):
		want.ResourceVersion, want.UID = head.ResourceVersion, head.UID
		if err := p.client.Update(ctx, want); err != nil {
			return retry(ctx, fmt.Errorf("update publication %s: %w", name, err))
		}
		if head.Spec.ExportCreated.Before(&want.Spec.ExportCreated) {
			p.warnBackdated(ctx, head, want)
		}
	}
	remove := func(part *v1alpha1.PublishedExport) error { return p.remove(ctx, part) }
	if part, err := writeEach(plan.remove, remove); err != nil {
		return retry(ctx, fmt.Errorf("remove part %s: %w", part.Name, err))
	}
	return reconcile.Result{}, nil
}

// concurrentWrites is how many parts of a publication the publisher
// writes at once: a publication of 50,000 endpoints is 500 parts, which
// one at a time took 500 round trips to the hub in a row (issue 56). The
// hub's Priority and Fairness queues what it cannot take at once.
const concurrentWrites = 8

// writeEach writes every part, up to concurrentWrites at once, and
// returns when all writes have returned: the first part, in parts' order,
// whose write failed, with its error (nil if none did), so that a
// refusal reads the same from one try to the next. The writes of one call
// are of parts that no reader needs in any order; what must come first
// (additions before the head, the head before removals) is written by
// separate calls.
func writeEach(parts []*v1alpha1.PublishedExport, write func(*v1alpha1.PublishedExport) error) (*v1alpha1.PublishedExport, error) {
	errs := make([]error, len(parts))
	var g errgroup.Group
	g.SetLimit(concurrentWrites)
	for i, part := range parts {
		g.Go(func() error {
			errs[i] = write(part)
			return nil
		})
	}
	_ = g.Wait() // the errors are in errs, in order
	for i, err := range errs {
		if err != nil {
			return parts[i], err
		}
	}
	return nil, nil
}

// createFailed handles a create of a head or part that failed.
func (p *Publisher) createFailed(ctx context.Context, o *v1alpha1.PublishedExport, err error) (reconcile.Result, error) {
	if apierrors.IsAlreadyExists(err) {
		return p.inTheWay(ctx, types.NamespacedName{Namespace: o.Namespace, Name: o.Name})
	}
	return retry(ctx, fmt.Errorf("publish %s: %w", o.Name, err))
}

// inTheWay handles a create that found an object of the publication's
// name: our own create that the cache has not seen yet is looked at again
// once it has; an object that is not this member's publication (the cache
// never shows it: it selects ours) is an error that names it, retried
// with backoff, rather than a quiet requeue for ever.
func (p *Publisher) inTheWay(ctx context.Context, name types.NamespacedName) (reconcile.Result, error) {
	var there v1alpha1.PublishedExport
	if err := p.apiReader.Get(ctx, name, &there); err == nil && there.Labels[mcsv1beta1.LabelSourceCluster] != string(p.opts.Cluster) {
		return reconcile.Result{}, fmt.Errorf("publish %s: an object of that name is in the way, and it is not %s's publication (source-cluster label %q): remove it",
			name, p.opts.Cluster, there.Labels[mcsv1beta1.LabelSourceCluster])
	}
	return reconcile.Result{RequeueAfter: plumbing.ConflictRetry}, nil
}

// headCurrent reports whether head already says what want says. In parts
// (inParts), a part written for a change carries its trigger time, so the
// head is not rewritten for its trigger time alone, unless no part
// carries it: plan only removes parts.
func headCurrent(head, want *v1alpha1.PublishedExport, plan partPlan, inParts bool) bool {
	if !equality.Semantic.DeepEqual(head.Labels, want.Labels) {
		return false
	}
	spec := want.Spec
	if inParts && (len(plan.remove) == 0 || len(plan.create)+len(plan.update) > 0) {
		spec.LastChangeTriggerTime = head.Spec.LastChangeTriggerTime
	}
	return equality.Semantic.DeepEqual(head.Spec, spec)
}

// warnBackdated says that the head it replaced claimed an export time
// before the ServiceExport existed. mcs-syncer never writes that: the
// head was left from an earlier ServiceExport of the same name, or
// written by another holder of the member's identity, which is worth an
// administrator's look (precedence never trusted it: readers order by the
// later of it and when the publication server first saw the head).
func (p *Publisher) warnBackdated(ctx context.Context, head, want *v1alpha1.PublishedExport) {
	key := types.NamespacedName{Namespace: want.Spec.Namespace, Name: want.Spec.Name}
	msg := fmt.Sprintf("the publication %s said the export was created at %s, before this ServiceExport was (%s); rewritten. "+
		"Left from an earlier ServiceExport of the same name, or written by another holder of this member's identity (docs/security.md: rotate it). "+
		"Exports are ordered by when the publication server first saw them, so the earlier time won no conflict",
		head.Name, head.Spec.ExportCreated.UTC().Format(time.RFC3339), want.Spec.ExportCreated.UTC().Format(time.RFC3339))
	log.FromContext(ctx).Info("Backdated publication rewritten", "publication", head.Name, "exportCreated", head.Spec.ExportCreated.UTC(), "serviceExportCreated", want.Spec.ExportCreated.UTC())
	if p.opts.Warn != nil {
		p.opts.Warn(ctx, key, ReasonPublicationRewritten, msg)
	}
}
