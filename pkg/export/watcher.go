package export

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/pkg/clusterset"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// ConfigureCache makes a member's cache hold only EndpointSlices without
// multicluster.kubernetes.io/service-name: imported slices are never read
// by the export side (loop prevention).
func ConfigureCache(o *cache.Options) {
	notImported, err := labels.NewRequirement(mcsv1beta1.LabelServiceName, selection.DoesNotExist, nil)
	if err != nil {
		panic(err) // a constant requirement; cannot fail
	}
	if o.ByObject == nil {
		o.ByObject = map[client.Object]cache.ByObject{}
	}
	o.ByObject[&discoveryv1.EndpointSlice{}] = cache.ByObject{Label: labels.NewSelector().Add(*notImported)}
}

// sliceServiceIndex indexes the member's EndpointSlices by their
// kubernetes.io/service-name label.
const sliceServiceIndex = "mcs-syncer.endpointslice.service-name"

// Options configure a Watcher.
type Options struct {
	// Cluster is the member the watcher reads. Required.
	Cluster clusterset.ClusterID
	// Store receives the exports. Required.
	Store *clusterset.Store
	// WriteStatus makes the watcher write ServiceExport status. Off when
	// another mcs-syncer (the member's own, in per-cluster mode) owns it.
	WriteStatus bool
	// Recorder, if set, records a Warning event on a ServiceExport when it
	// becomes invalid or conflicting (only with WriteStatus).
	Recorder events.EventRecorder
	// Membership tells who the members are, and whether each answers.
	// Required. The Conflict condition is written only once the Store holds
	// every member's exports, so that a restart never flips it on a partial
	// view. While a member that answers has not put all its exports into the
	// Store (its first pass takes seconds), a valid export's status is not
	// written at all, for up to firstPassWait: the Store announces every key
	// when the pass is done, and the status is then written once, Conflict
	// included, instead of twice. For a member that does not answer, or one
	// whose pass takes longer, Valid and Ready are written at once and
	// Conflict waits.
	Membership clusterset.Membership
	// Workers is the number of ServiceExports reconciled at once (default 1).
	Workers int
}

// Watcher is the export watcher of one member cluster.
type Watcher struct {
	cluster     clusterset.ClusterID
	client      client.Client
	cache       cache.Cache
	store       *clusterset.Store
	writeStatus bool
	recorder    events.EventRecorder
	membership  clusterset.Membership
	triggers    *triggerLog
	controller  controller.TypedController[reconcile.Request]
}

var _ reconcile.Reconciler = (*Watcher)(nil)

// New returns the watcher of member cl, as an unmanaged controller named
// "export-<cluster>" that Start runs: it lives as long as the member's
// connection, and a member that returns gets a new one. It registers the
// informers it needs in cl's cache, and marks the cluster's exports in the
// Store as being read anew (Store.BeginResync) until its first pass is
// done.
func New(cl cluster.Cluster, opts Options) (*Watcher, error) {
	if opts.Cluster == "" || opts.Store == nil || opts.Membership == nil {
		return nil, fmt.Errorf("export: cluster, store and membership are required")
	}
	w := &Watcher{
		cluster: opts.Cluster, client: cl.GetClient(), cache: cl.GetCache(), store: opts.Store, writeStatus: opts.WriteStatus,
		recorder: opts.Recorder, membership: opts.Membership, triggers: newTriggerLog(),
	}
	// Slices are looked up by their Service: an index, so that a change
	// costs the same however many slices the namespace holds.
	if err := w.cache.IndexField(context.Background(), &discoveryv1.EndpointSlice{}, sliceServiceIndex, func(o client.Object) []string {
		return []string{o.GetLabels()[discoveryv1.LabelServiceName]}
	}); err != nil {
		return nil, fmt.Errorf("index EndpointSlices by Service: %w", err)
	}
	for _, obj := range []client.Object{&mcsv1beta1.ServiceExport{}, &corev1.Service{}} {
		// Registered now, so that the member counts as synced only once
		// they are.
		if _, err := w.cache.GetInformer(context.Background(), obj, cache.BlockUntilSynced(false)); err != nil {
			return nil, fmt.Errorf("informer of %T: %w", obj, err)
		}
	}
	c, err := clusterset.NewController("export-"+string(w.cluster), w, opts.Workers, log.Log.WithValues("cluster", w.cluster))
	if err != nil {
		return nil, err
	}
	for _, src := range []source.TypedSource[reconcile.Request]{
		// The ServiceExport is the root object.
		source.Kind(w.cache, &mcsv1beta1.ServiceExport{}, &handler.TypedEnqueueRequestForObject[*mcsv1beta1.ServiceExport]{}),
		// Its Service (same namespace/name) gives the spec and validity.
		source.Kind(w.cache, &corev1.Service{}, handler.TypedEnqueueRequestsFromMapFunc(ifExported(w, func(s *corev1.Service) types.NamespacedName {
			return client.ObjectKeyFromObject(s)
		}))),
		// The Service's slices give the endpoints; slices of Services that
		// are not exported are dropped here. Each change's trigger time is
		// logged as it goes by.
		source.Kind(w.cache, &discoveryv1.EndpointSlice{}, handler.TypedEnqueueRequestsFromMapFunc(w.sliceChanged())),
		// Another cluster's export of the same name changes the Conflict
		// condition, and so does a member's connection.
		clusterset.StoreSource(w.store, nil),
	} {
		if err := c.Watch(src); err != nil {
			return nil, err
		}
	}
	w.controller = c
	w.store.BeginResync(w.cluster)
	return w, nil
}

// Start runs the first pass and the controller until ctx ends.
func (w *Watcher) Start(ctx context.Context) error {
	go w.initialSync(ctx, w.cache)
	return w.controller.Start(ctx)
}

// initialSync puts every ServiceExport in the cache into the Store once
// the cache has synced, then marks the cluster synced in the Store. A
// member that is unreachable at start stays unsynced until its cache
// syncs. It writes no status: the controller's queue holds every
// ServiceExport anyway, and reconciles no key twice at once, whereas a
// status write from here would race with the workers' and conflict.
func (w *Watcher) initialSync(ctx context.Context, c cache.Cache) {
	if !c.WaitForCacheSync(ctx) {
		return // stopping
	}
	logger := log.FromContext(ctx).WithValues("cluster", w.cluster)
	for {
		var list mcsv1beta1.ServiceExportList
		err := c.List(ctx, &list)
		current := make(map[types.NamespacedName]bool, len(list.Items))
		for i := 0; err == nil && i < len(list.Items); i++ {
			key := client.ObjectKeyFromObject(&list.Items[i])
			current[key] = true
			_, err = w.sync(ctx, key, false)
		}
		if err == nil {
			w.store.MarkSynced(w.cluster, current)
			logger.V(2).Info("Exports synced", "serviceExports", len(list.Items))
			return
		}
		logger.Error(err, "First pass over the ServiceExports failed; retrying")
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// ifExported maps an object to the key of its ServiceExport, or to nothing
// if the cache holds no such ServiceExport: objects of Services that are
// not exported cost a cache lookup, no reconcile.
func ifExported[T client.Object](w *Watcher, key func(T) types.NamespacedName) handler.TypedMapFunc[T, reconcile.Request] {
	return func(ctx context.Context, obj T) []reconcile.Request {
		k := key(obj)
		if k.Name == "" {
			return nil
		}
		// The typed object, so the lookup uses the ServiceExport informer
		// the watcher has anyway (metadata would start another one).
		if err := w.client.Get(ctx, k, &mcsv1beta1.ServiceExport{}); err != nil {
			return nil
		}
		return []reconcile.Request{{NamespacedName: k}}
	}
}

// sliceChanged maps a slice to its exported Service, if any, and logs the
// slice's trigger time for it.
func (w *Watcher) sliceChanged() handler.TypedMapFunc[*discoveryv1.EndpointSlice, reconcile.Request] {
	exported := ifExported(w, func(s *discoveryv1.EndpointSlice) types.NamespacedName {
		return types.NamespacedName{Namespace: s.Namespace, Name: s.Labels[discoveryv1.LabelServiceName]}
	})
	return func(ctx context.Context, s *discoveryv1.EndpointSlice) []reconcile.Request {
		reqs := exported(ctx, s)
		if t, ok := triggerTime(s); ok && len(reqs) == 1 {
			w.triggers.record(reqs[0].NamespacedName, t)
		}
		return reqs
	}
}

// Reconcile brings one export up to date from the current state of its
// ServiceExport, Service and EndpointSlices.
func (w *Watcher) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	recheck, err := w.sync(ctx, req.NamespacedName, true)
	if retryAfter, routine := clusterset.Routine(ctx, err); routine {
		// A status write that lost a race, or a shutdown: retried (or
		// over), not a fault.
		log.FromContext(ctx).V(1).Info("Export will be retried", "reason", err.Error())
		return reconcile.Result{RequeueAfter: retryAfter}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: recheck}, nil
}

// sync puts the export of key into the Store (or withdraws it) and, with
// writeStatus, writes its ServiceExport's conditions.
func (w *Watcher) sync(ctx context.Context, key types.NamespacedName, writeStatus bool) (recheck time.Duration, err error) {
	logger := log.FromContext(ctx).WithValues("cluster", w.cluster)
	se := &mcsv1beta1.ServiceExport{}
	if err := w.client.Get(ctx, key, se); err != nil {
		if apierrors.IsNotFound(err) {
			w.triggers.forget(key)
			if w.store.Delete(w.cluster, key) {
				logger.V(2).Info("Export withdrawn: ServiceExport deleted")
			}
			return 0, nil
		}
		return 0, fmt.Errorf("get ServiceExport %s: %w", key, err)
	}

	svc := &corev1.Service{}
	if err := w.client.Get(ctx, key, svc); err != nil {
		if !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("get Service %s: %w", key, err)
		}
		w.store.Delete(w.cluster, key)
		if !writeStatus {
			return 0, nil
		}
		return 0, w.setInvalid(ctx, se, mcsv1beta1.ServiceExportReasonNoService,
			fmt.Sprintf("Service %s does not exist in cluster %s; create it to export it", key, w.cluster))
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		w.store.Delete(w.cluster, key)
		if !writeStatus {
			return 0, nil
		}
		return 0, w.setInvalid(ctx, se, mcsv1beta1.ServiceExportReasonInvalidServiceType,
			fmt.Sprintf("Service %s is of type ExternalName, which cannot be exported", key))
	}

	es, refused, err := w.exportedService(ctx, se, svc)
	if err != nil {
		return 0, err
	}
	if w.store.Put(es) {
		logger.V(2).Info("Export updated", "serviceExport", klogRef(se))
	}
	if !writeStatus {
		return 0, nil
	}
	return w.setExported(ctx, se, refused)
}

func klogRef(o client.Object) string { return o.GetNamespace() + "/" + o.GetName() }

// exportedService builds the export from the ServiceExport, its Service
// and all the Service's slices in the cache. refused names the reserved
// keys of exportedLabels and exportedAnnotations left out of it.
func (w *Watcher) exportedService(ctx context.Context, se *mcsv1beta1.ServiceExport, svc *corev1.Service) (es *clusterset.ExportedService, refused string, err error) {
	var list discoveryv1.EndpointSliceList
	if err := w.client.List(ctx, &list, client.InNamespace(svc.Namespace), client.MatchingFields{sliceServiceIndex: svc.Name}); err != nil {
		return nil, "", fmt.Errorf("list EndpointSlices of %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	spec, refused := exportedSpec(se, svc)
	es = &clusterset.ExportedService{
		Cluster:       w.cluster,
		Key:           client.ObjectKeyFromObject(se),
		ExportCreated: se.CreationTimestamp,
		Spec:          spec,
	}
	es.Endpoints, es.LastChangeTriggerTime = reconciler.GroupSlices(list.Items), newestTriggerTime(list.Items)
	if !es.LastChangeTriggerTime.IsZero() {
		w.triggers.record(es.Key, es.LastChangeTriggerTime)
		es.RecentTriggerTimes = w.triggers.upTo(es.Key, es.LastChangeTriggerTime)
	}
	return es, refused, nil
}

// exportedSpec is what the ServiceExport and its Service give the import.
// Reserved keys (clusterset.Reserved) of exportedLabels and
// exportedAnnotations are left out and named in refused ("" if none).
func exportedSpec(se *mcsv1beta1.ServiceExport, svc *corev1.Service) (spec clusterset.ExportedSpec, refused string) {
	labels, refusedLabels := clusterset.WithoutReserved(se.Spec.ExportedLabels)
	annotations, refusedAnnotations := clusterset.WithoutReserved(se.Spec.ExportedAnnotations)
	var parts []string
	if len(refusedLabels) > 0 {
		parts = append(parts, fmt.Sprintf("exportedLabels %s", strings.Join(refusedLabels, ", ")))
	}
	if len(refusedAnnotations) > 0 {
		parts = append(parts, fmt.Sprintf("exportedAnnotations %s", strings.Join(refusedAnnotations, ", ")))
	}
	refused = strings.Join(parts, "; ")
	spec = clusterset.ExportedSpec{
		Type:                  mcsv1beta1.ClusterSetIP,
		SessionAffinity:       svc.Spec.SessionAffinity,
		SessionAffinityConfig: svc.Spec.SessionAffinityConfig.DeepCopy(),
		InternalTrafficPolicy: svc.Spec.InternalTrafficPolicy,
		TrafficDistribution:   svc.Spec.TrafficDistribution,
		IPFamilies:            slices.Clone(svc.Spec.IPFamilies),
		Labels:                labels,
		Annotations:           annotations,
	}
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		spec.Type = mcsv1beta1.Headless
	}
	for _, p := range svc.Spec.Ports {
		spec.Ports = append(spec.Ports, mcsv1beta1.ServicePort{Name: p.Name, Protocol: p.Protocol, AppProtocol: p.AppProtocol, Port: p.Port})
	}
	return spec, refused
}

// ReasonReservedKeysRefused is the reason of Valid=True on an export some
// of whose exportedLabels or exportedAnnotations keys are reserved: they
// are left out of the ServiceImport, the rest is exported.
const ReasonReservedKeysRefused mcsv1beta1.ServiceExportConditionReason = "ReservedKeysRefused"

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

// notImportedEverywhere starts the part of Ready's message that names the
// consumers where the import is blocked.
const notImportedEverywhere = "not imported everywhere"

// firstPassWait is how long a valid export's status waits for a member
// that answers to finish its first pass (see Options.Connected).
const firstPassWait = 30 * time.Second

// setExported writes Valid=True, Ready=True and the Conflict condition of
// the merge over the Store. While a member that answers is in its first
// pass, it writes nothing and returns when to look again. An import of the
// Service that an object mcs-syncer does not own blocks in some consumer is
// named in Ready's message (and in a Warning event).
func (w *Watcher) setExported(ctx context.Context, se *mcsv1beta1.ServiceExport, refused string) (time.Duration, error) {
	key := client.ObjectKeyFromObject(se)
	merged := clusterset.Merge(w.store.Get(key))
	ready := "exported to the clusterset"
	if blocked := w.store.ImportBlocked(key); len(blocked) > 0 {
		var whys []string
		for _, consumer := range slices.Sorted(maps.Keys(blocked)) {
			whys = append(whys, blocked[consumer])
		}
		ready += "; " + notImportedEverywhere + ": " + strings.Join(whys, "; ")
	}
	valid := mcsv1beta1.NewServiceExportCondition(mcsv1beta1.ServiceExportConditionValid, metav1.ConditionTrue, mcsv1beta1.ServiceExportReasonValid, "the Service can be exported")
	if refused != "" {
		valid.Reason = string(ReasonReservedKeysRefused)
		valid.Message = "the Service is exported without these reserved keys, which are not put onto the ServiceImport (" +
			clusterset.ReservedPatterns() + "): " + refused
	}
	conds := []metav1.Condition{
		valid,
		mcsv1beta1.NewServiceExportCondition(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionTrue, mcsv1beta1.ServiceExportReasonExported, ready),
	}
	var unheard []string
	for _, id := range w.membership.IDs() {
		if w.store.Synced(id) {
			continue
		}
		// A member that answers and is in its first pass is heard from in
		// a moment: one write then (the Store announces every key once the
		// member is synced).
		if connected, since := w.membership.Connected(id); connected && time.Since(since) < firstPassWait {
			return firstPassWait - time.Since(since), nil
		}
		unheard = append(unheard, string(id))
	}
	// The Conflict condition of the members that answer: a member that
	// never engaged (forbidden, CRDs missing, unreachable) must not keep
	// every export without one. Its exports may change it later.
	conflict := mcsv1beta1.NewServiceExportCondition(mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionFalse,
		mcsv1beta1.ServiceExportReasonNoConflicts, "no conflicts with the other exports of this Service")
	if merged.Conflict != nil {
		conflict.Status, conflict.Reason, conflict.Message = metav1.ConditionTrue, merged.Conflict.Reason(), merged.Conflict.Message
	}
	if len(unheard) > 0 {
		conflict.Message += fmt.Sprintf("; not yet heard from %s, whose exports may change this", strings.Join(unheard, ", "))
	}
	return 0, w.writeConditions(ctx, se, nil, append(conds, conflict)...)
}

// setInvalid writes Valid=False with reason and message, Ready=False, and
// removes Conflict (an invalid export is not part of the clusterset).
func (w *Watcher) setInvalid(ctx context.Context, se *mcsv1beta1.ServiceExport, reason mcsv1beta1.ServiceExportConditionReason, message string) error {
	return w.writeConditions(ctx, se, []string{string(mcsv1beta1.ServiceExportConditionConflict)},
		mcsv1beta1.NewServiceExportCondition(mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse, reason, message),
		mcsv1beta1.NewServiceExportCondition(mcsv1beta1.ServiceExportConditionReady, metav1.ConditionFalse,
			mcsv1beta1.ServiceExportReasonPending, "not exported until the export is valid"))
}

// writeConditions sets conditions (and removes the types in remove) on a
// copy of se and writes its status only if anything changed.
func (w *Watcher) writeConditions(ctx context.Context, se *mcsv1beta1.ServiceExport, remove []string, conds ...metav1.Condition) error {
	if !w.writeStatus {
		return nil
	}
	updated := se.DeepCopy()
	changed := false
	for _, c := range conds {
		c.ObservedGeneration = se.Generation
		changed = meta.SetStatusCondition(&updated.Status.Conditions, c) || changed
	}
	for _, t := range remove {
		changed = meta.RemoveStatusCondition(&updated.Status.Conditions, t) || changed
	}
	if !changed {
		return nil
	}
	if err := w.client.Status().Update(ctx, updated); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("update status of ServiceExport %s: %w", klogRef(se), err)
	}
	w.recordProblems(se, updated)
	return nil
}

// recordProblems records a Warning event for each problem that a status
// write just raised: the export became invalid, or a conflict appeared or
// changed.
func (w *Watcher) recordProblems(before, after *mcsv1beta1.ServiceExport) {
	if w.recorder == nil {
		return
	}
	for _, problem := range []struct {
		typ    mcsv1beta1.ServiceExportConditionType
		status metav1.ConditionStatus
	}{
		{mcsv1beta1.ServiceExportConditionValid, metav1.ConditionFalse},
		{mcsv1beta1.ServiceExportConditionConflict, metav1.ConditionTrue},
	} {
		now := meta.FindStatusCondition(after.Status.Conditions, string(problem.typ))
		if now == nil || now.Status != problem.status {
			continue
		}
		if was := meta.FindStatusCondition(before.Status.Conditions, string(problem.typ)); was != nil && was.Status == now.Status && was.Reason == now.Reason && was.Message == now.Message {
			continue
		}
		w.recorder.Eventf(after, nil, corev1.EventTypeWarning, now.Reason, "Export", "%s", now.Message)
	}
	now := meta.FindStatusCondition(after.Status.Conditions, string(mcsv1beta1.ServiceExportConditionReady))
	was := meta.FindStatusCondition(before.Status.Conditions, string(mcsv1beta1.ServiceExportConditionReady))
	if now != nil && strings.Contains(now.Message, notImportedEverywhere) && (was == nil || was.Message != now.Message) {
		w.recorder.Eventf(after, nil, corev1.EventTypeWarning, "ImportBlocked", "Export", "%s", now.Message)
	}
}
