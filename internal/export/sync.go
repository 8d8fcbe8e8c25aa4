package export

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/plumbing"
)

// sync puts the export of key into the Store (or withdraws it) and, with
// writeStatus, writes its ServiceExport's conditions.
func (w *Watcher) sync(ctx context.Context, key types.NamespacedName, writeStatus bool) (recheck time.Duration, err error) {
	logger := log.FromContext(ctx).WithValues("cluster", w.cluster)
	se := &mcsv1beta1.ServiceExport{}
	if err := w.client.Get(ctx, key, se); err != nil {
		if apierrors.IsNotFound(err) {
			w.triggers.forget(key)
			w.fetched.forget(key)
			w.conditions.forget(w, key)
			w.own.Forget(&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
			if w.withdraw(key) {
				logger.V(2).Info("Export withdrawn: ServiceExport deleted")
			}
			return 0, nil
		}
		return 0, fmt.Errorf("get ServiceExport %s: %w", key, err)
	}
	// A status written a moment ago, that the cache has not heard of yet,
	// is not written again (the API server would refuse it: a 409).
	se = plumbing.Latest(w.own, se)
	if why := w.namespaces.Refuses(key.Namespace); why != "" {
		// An export from before the policy (an upgrade) leaves with a
		// condition and an event that say why.
		if w.withdraw(key) {
			logger.Info("Export withdrawn: its namespace is not exported", "serviceExport", klogRef(se), "why", why)
		}
		if !writeStatus {
			return 0, nil
		}
		return 0, w.setInvalid(ctx, se, clusterset.ReasonRestrictedNamespace, why+" (docs/configuration.md, \"Namespaces\")")
	}

	svc, err := w.service(ctx, key)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			return 0, err
		}
		w.withdraw(key)
		if !writeStatus {
			return 0, nil
		}
		return 0, w.setInvalid(ctx, se, mcsv1beta1.ServiceExportReasonNoService,
			fmt.Sprintf("Service %s does not exist in cluster %s; create it to export it", key, w.cluster))
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		w.withdraw(key)
		if !writeStatus {
			return 0, nil
		}
		return 0, w.setInvalid(ctx, se, mcsv1beta1.ServiceExportReasonInvalidServiceType,
			fmt.Sprintf("Service %s is of type ExternalName, which cannot be exported", key))
	}

	es, cav, err := w.exportedService(ctx, se, svc)
	if err != nil {
		return 0, err
	}
	if w.store.Put(es) {
		logger.V(2).Info("Export updated", "serviceExport", klogRef(se))
	}
	if !writeStatus {
		return 0, nil
	}
	return w.setExported(ctx, se, cav)
}

// withdraw takes key's export out of the Store, and what its slices gave
// out of the groupers; it reports whether the Store held the export.
func (w *Watcher) withdraw(key types.NamespacedName) bool {
	w.groupers.forget(key)
	return w.store.Delete(w.cluster, key)
}

// service returns the Service of key, whole: from the cache, or from the
// API server if the cache holds it thinned (thin.go).
func (w *Watcher) service(ctx context.Context, key types.NamespacedName) (*corev1.Service, error) {
	cached := &corev1.Service{}
	if err := w.client.Get(ctx, key, cached); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, err
		}
		return nil, fmt.Errorf("get Service %s: %w", key, err)
	}
	return w.fetched.service(ctx, w.apiReader, cached)
}

func klogRef(o client.Object) string { return o.GetNamespace() + "/" + o.GetName() }

// exportedService builds the export from the ServiceExport, its Service
// and all the Service's slices in the cache. cav says what of the
// ServiceExport was left out of it.
func (w *Watcher) exportedService(ctx context.Context, se *mcsv1beta1.ServiceExport, svc *corev1.Service) (es *clusterset.ExportedService, cav caveat, err error) {
	var list discoveryv1.EndpointSliceList
	// The cache's own slices, not copies: the export shares their
	// endpoints, and nothing writes to them (a change of one endpoint of
	// 50,000 deep-copied all 500 slices twice, then once, now never).
	if err := w.client.List(ctx, &list, client.InNamespace(svc.Namespace), client.MatchingFields{sliceServiceIndex: svc.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, caveat{}, fmt.Errorf("list EndpointSlices of %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	items, err := w.fetched.whole(ctx, w.apiReader, client.ObjectKeyFromObject(svc), list.Items)
	if err != nil {
		return nil, caveat{}, err
	}
	spec, cav := exportedSpec(se, svc)
	es = &clusterset.ExportedService{
		Cluster:       w.cluster,
		Key:           client.ObjectKeyFromObject(se),
		ExportCreated: se.CreationTimestamp,
		Spec:          spec,
	}
	es.Endpoints, es.LastChangeTriggerTime = w.groupers.group(es.Key, items), newestTriggerTime(items)
	if !es.LastChangeTriggerTime.IsZero() {
		w.triggers.record(es.Key, es.LastChangeTriggerTime)
		es.RecentTriggerTimes = w.triggers.upTo(es.Key, es.LastChangeTriggerTime)
	}
	return es, cav, nil
}

// exportedSpec is what the ServiceExport and its Service give the import.
// Reserved keys (clusterset.ReservedLabel, clusterset.Reserved) of
// exportedLabels and exportedAnnotations are left out, and so is a
// LocalClusterFirstAnnotation that is neither "true" nor "false"; cav says
// so (zero if nothing was).
func exportedSpec(se *mcsv1beta1.ServiceExport, svc *corev1.Service) (spec clusterset.ExportedSpec, cav caveat) {
	labels, refusedLabels := clusterset.WithoutReservedLabels(se.Spec.ExportedLabels)
	annotations, refusedAnnotations := clusterset.WithoutReserved(se.Spec.ExportedAnnotations)
	var parts []string
	if len(refusedLabels) > 0 {
		parts = append(parts, fmt.Sprintf("exportedLabels %s", strings.Join(refusedLabels, ", ")))
	}
	if len(refusedAnnotations) > 0 {
		parts = append(parts, fmt.Sprintf("exportedAnnotations %s", strings.Join(refusedAnnotations, ", ")))
	}
	if len(parts) > 0 {
		cav = caveat{ReasonReservedKeysRefused, "the Service is exported without these reserved keys, which are not put onto the ServiceImport (" +
			clusterset.ReservedPatterns() + "): " + strings.Join(parts, "; ")}
	}
	labels, invalidLabels := clusterset.InvalidLabels(labels)
	annotations, oversized := clusterset.OversizedAnnotations(annotations)
	if len(invalidLabels) > 0 || len(oversized) > 0 {
		var problems []string
		for _, r := range invalidLabels {
			problems = append(problems, "exportedLabels "+r.String())
		}
		for _, r := range oversized {
			problems = append(problems, "exportedAnnotations "+r.String())
		}
		cav = cav.and(ReasonKeysRefused, "these keys cannot be put onto a ServiceImport and are left out: "+strings.Join(problems, "; "))
	}
	localFirst, err := localClusterFirst(se)
	if err != nil {
		cav = cav.and(ReasonAnnotationIgnored, err.Error())
	}
	spec = clusterset.ExportedSpec{
		Type:                  mcsv1beta1.ClusterSetIP,
		SessionAffinity:       svc.Spec.SessionAffinity,
		SessionAffinityConfig: svc.Spec.SessionAffinityConfig.DeepCopy(),
		InternalTrafficPolicy: svc.Spec.InternalTrafficPolicy,
		TrafficDistribution:   svc.Spec.TrafficDistribution,
		IPFamilies:            slices.Clone(svc.Spec.IPFamilies),
		Labels:                labels,
		Annotations:           annotations,
		LocalClusterFirst:     localFirst,
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		spec.Type = mcsv1beta1.Headless
	}
	for _, p := range svc.Spec.Ports {
		spec.Ports = append(spec.Ports, mcsv1beta1.ServicePort{Name: p.Name, Protocol: p.Protocol, AppProtocol: p.AppProtocol, Port: p.Port})
	}
	return spec, cav
}

// localClusterFirst reads the ServiceExport's LocalClusterFirstAnnotation:
// "true" or "false" (or none: false), as Kubernetes' boolean annotations
// are written; any other value is an error and counts as false.
func localClusterFirst(se *mcsv1beta1.ServiceExport) (bool, error) {
	switch v, ok := se.Annotations[clusterset.LocalClusterFirstAnnotation]; {
	case !ok || v == "false":
		return false, nil
	case v == "true":
		return true, nil
	default:
		return false, fmt.Errorf("annotation %s is %q, not \"true\" or \"false\": the local cluster is not put first", clusterset.LocalClusterFirstAnnotation, v)
	}
}

// caveat is what the Valid condition says of an export that is valid but
// not exported exactly as written; the zero caveat says nothing.
type caveat struct {
	reason  mcsv1beta1.ServiceExportConditionReason
	message string
}

// and adds a problem to c: the first one gives the reason, the message
// names them all.
func (c caveat) and(reason mcsv1beta1.ServiceExportConditionReason, problem string) caveat {
	if c.reason == "" {
		return caveat{reason, "the Service is exported, but " + problem}
	}
	c.message += "; " + problem
	return c
}

// ReasonReservedKeysRefused is the reason of Valid=True on an export some
// of whose exportedLabels or exportedAnnotations keys are reserved: they
// are left out of the ServiceImport, the rest is exported.
const ReasonReservedKeysRefused mcsv1beta1.ServiceExportConditionReason = "ReservedKeysRefused"

// ReasonKeysRefused is the reason of Valid=True on an export some of whose
// exportedLabels or exportedAnnotations cannot be put onto a ServiceImport
// (invalid label keys or values, annotations over
// clusterset.ExportedAnnotationsBudget): they are left out, the rest is
// exported.
const ReasonKeysRefused mcsv1beta1.ServiceExportConditionReason = "KeysRefused"

// ReasonAnnotationIgnored is the reason of Valid=True on an export whose
// mcs-syncer annotation has a value that means nothing: it is exported as
// if the annotation were not there.
const ReasonAnnotationIgnored mcsv1beta1.ServiceExportConditionReason = "AnnotationIgnored"

// newestTriggerTime returns the newest last-change-trigger-time among
// slices (zero if none carries one).
func newestTriggerTime(items []discoveryv1.EndpointSlice) time.Time {
	var newest time.Time
	for i := range items {
		if t, ok := triggerTime(&items[i]); ok && t.After(newest) {
			newest = t
		}
	}
	return newest
}
