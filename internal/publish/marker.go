package publish

import (
	"context"
	"fmt"
	"maps"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
)

// syncMarker writes the marker once every export of the member is
// published as it is in the Store and no stale publication is left; then
// it renews it every Heartbeat. What the cache shows is confirmed by a
// read of the publication server itself before the marker is written: a
// wiped hub deletes the marker first, and a cache that has seen that
// deletion but not yet its publications' would bring the marker back
// before them, and readers would then withdraw an export whose head they
// saw deleted (CI: an import withdrawn and created again with a new
// clusterset IP, the hub rebuilt under load).
func (p *Publisher) syncMarker(ctx context.Context) (reconcile.Result, error) {
	if p.markerDone.Load() {
		return p.renewMarker(ctx)
	}
	if !p.opts.Store.Synced(p.opts.Cluster) {
		return reconcile.Result{RequeueAfter: partialViewRecheck}, nil
	}
	published, all, marked, err := p.publishedIn(ctx, p.client)
	switch {
	case err != nil:
		return reconcile.Result{}, err
	case marked:
		p.markerDone.Store(true)
		return p.renewMarker(ctx) // written by an earlier run, or just now
	case !all:
		return reconcile.Result{}, nil // not there yet: the publications' next event looks again
	}
	if _, all, _, err = p.publishedIn(ctx, p.apiReader); err != nil {
		return reconcile.Result{}, err
	} else if !all {
		return reconcile.Result{RequeueAfter: partialViewRecheck}, nil // the cache is behind
	}
	now := p.now()
	if err := p.client.Create(ctx, markerAt(p.opts.Cluster, p.opts.Namespace, p.opts.Heartbeat, now)); err != nil && !apierrors.IsAlreadyExists(err) {
		return retry(ctx, fmt.Errorf("write the marker of %s: %w", p.opts.Cluster, err))
	} else if err == nil {
		p.renewedAt = now
	}
	log.FromContext(ctx).Info("Every export published", "cluster", p.opts.Cluster, "exports", published)
	p.markerDone.Store(true)
	return reconcile.Result{RequeueAfter: p.opts.Heartbeat}, nil
}

// allPublished reports whether heads and parts (the member's publications,
// parts by export) are every export of the Store as published, and how
// many exports that is. An export not withdrawn yet, or not written yet,
// and parts of no export all say no.
func (p *Publisher) allPublished(heads []*v1alpha1.PublishedExport, parts map[types.NamespacedName][]*v1alpha1.PublishedExport) (published int, all bool) {
	headless := maps.Clone(parts)
	for _, head := range heads {
		key := types.NamespacedName{Namespace: head.Spec.Namespace, Name: head.Spec.Name}
		mine := p.mine(key)
		if mine == nil {
			return published, false
		}
		want, plan, inParts, _, ok := p.plan(mine, parts[key])
		if !ok || !plan.empty() || !headCurrent(head, want, plan, inParts) {
			return published, false
		}
		delete(headless, key)
		published++
	}
	return published, len(headless) == 0 && published == p.opts.Store.Count(p.opts.Cluster)
}

// publishedIn reads the member's publications through reader (the cache,
// or the publication server itself) and reports whether every export is
// published as the Store has it (allPublished), and whether the marker is
// there.
func (p *Publisher) publishedIn(ctx context.Context, reader client.Reader) (published int, all, marked bool, err error) {
	var list v1alpha1.PublishedExportList
	if err := reader.List(ctx, &list, client.InNamespace(p.opts.Namespace),
		client.MatchingLabels{mcsv1beta1.LabelSourceCluster: string(p.opts.Cluster)}); err != nil {
		return 0, false, false, fmt.Errorf("list publications: %w", err)
	}
	var heads []*v1alpha1.PublishedExport
	parts := map[types.NamespacedName][]*v1alpha1.PublishedExport{}
	for i := range list.Items {
		pub := &list.Items[i]
		if IsMarker(pub) {
			return 0, false, true, nil
		}
		key := types.NamespacedName{Namespace: pub.Spec.Namespace, Name: pub.Spec.Name}
		if IsPart(pub) {
			parts[key] = append(parts[key], pub)
		} else {
			heads = append(heads, pub)
		}
	}
	published, all = p.allPublished(heads, parts)
	return published, all, false, nil
}

// now is the time on the publisher's clock.
func (p *Publisher) now() time.Time {
	if p.clock == nil {
		return time.Now()
	}
	return p.clock.Now()
}

// renewMarker renews the marker once its renewal is due, and says when to
// look again. A marker that is gone (a wiped hub) is written anew, after
// every export is published again: the publications' own events (their
// deletion, seen by the cache) put them back.
//
// A renewal is due a heartbeat after this publisher's last one, on its own
// clock: the time the marker holds may have been written by another
// clock (a replica that led before, a clock step, a hand), and a time in
// the future once stopped the renewals for as long as it lay ahead, while
// every reader withdrew the member (docs/architecture.md, "Liveness").
// Only a publisher that has not renewed yet (just started) spares itself
// a write by the marker's time, and only for a time in the past less than
// a heartbeat ago.
func (p *Publisher) renewMarker(ctx context.Context) (reconcile.Result, error) {
	marker := &v1alpha1.PublishedExport{}
	err := p.client.Get(ctx, types.NamespacedName{Namespace: p.opts.Namespace, Name: MarkerName(p.opts.Cluster)}, marker)
	if apierrors.IsNotFound(err) {
		log.FromContext(ctx).Info("The marker is gone; it is written again once every export is published", "cluster", p.opts.Cluster)
		p.markerDone.Store(false)
		return reconcile.Result{RequeueAfter: partialViewRecheck}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("get the marker of %s: %w", p.opts.Cluster, err)
	}
	// A marker without readsParts was written by this member's mcs-syncer
	// before an upgrade: rewritten at once, or the others would publish
	// whole for it until its next renewal (or forever, without a
	// heartbeat).
	older := !marker.Spec.ReadsParts
	if p.opts.Heartbeat <= 0 && !older {
		return reconcile.Result{}, nil
	}
	now := p.now()
	last := p.renewedAt
	if last.IsZero() && marker.Spec.RenewTime != nil && !marker.Spec.RenewTime.After(now) {
		last = marker.Spec.RenewTime.Time
	}
	if due := p.opts.Heartbeat - now.Sub(last); !older && due > 0 && marker.Spec.RenewIntervalSeconds == intervalSeconds(p.opts.Heartbeat) {
		return reconcile.Result{RequeueAfter: due}, nil
	}
	renewed := markerAt(p.opts.Cluster, p.opts.Namespace, p.opts.Heartbeat, now)
	renewed.ResourceVersion, renewed.UID = marker.ResourceVersion, marker.UID
	if err := p.client.Update(ctx, renewed); err != nil {
		return retry(ctx, fmt.Errorf("renew the marker of %s: %w", p.opts.Cluster, err))
	}
	p.renewedAt = now
	if p.opts.Heartbeat <= 0 {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: p.opts.Heartbeat}, nil
}
