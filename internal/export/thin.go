package export

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/mcsapi"
	"github.com/mcs-syncer/mcs-syncer/internal/plumbing"
)

// A member's cache holds every EndpointSlice of the cluster, but the export
// watcher reads only those of exported Services: with 2,000 Services that
// nobody exports, their endpoints made a third of the process's memory
// (make bench-scale, -private 2000). So the cache keeps a slice's endpoints
// only if its Service was exported when the slice arrived; other slices are
// kept without endpoints and marked (thinned). A slice thinned before its
// Service was exported is read from the API server when the export needs it
// (fetched), until the cache delivers a newer version of it, which keeps
// its endpoints. Services are thinned the same way (their spec dropped),
// except derived Services (controlled by a ServiceImport), which the
// import side of the same cache reads whole.

// EndpointsDroppedAnnotation marks a cached slice whose endpoints the cache
// dropped because its Service was not exported when the slice arrived. It
// exists only in the cache of a member; nothing is written with it.
const EndpointsDroppedAnnotation = "mcs-syncer.io/endpoints-dropped"

// SpecDroppedAnnotation marks a cached Service whose spec and status the
// cache dropped because it was not exported when the Service arrived; as
// EndpointsDroppedAnnotation, it exists only in a member's cache.
const SpecDroppedAnnotation = "mcs-syncer.io/spec-dropped"

// ExportedNames are the Services whose ServiceExports a member's caches
// have seen. A name is never removed: a transform cannot tell a deletion
// from an update, and a slice kept whole needlessly costs memory only.
//
// They outlive the member's engagements (NewExportedNames, one per
// member): a new cache's informers start together, and its slices and
// Services are listed as soon as its ServiceExports, or sooner; with
// names of its own only, a member's cache thinned most of them on every
// return, and its first pass then read each export's Service and slices
// from the API server, one export after the other (10 s for 1,000
// exports, make bench-e2e's member return, where the clusterset waits
// for that pass). Names kept from the last engagement keep them whole.
type ExportedNames struct {
	mu    sync.RWMutex
	names map[types.NamespacedName]struct{}
}

// NewExportedNames returns the names of a member that none of its caches
// has seen yet.
func NewExportedNames() *ExportedNames {
	return &ExportedNames{names: map[types.NamespacedName]struct{}{}}
}

// learnTimeout bounds learn's one list.
const learnTimeout = 10 * time.Second

// learn adds the ServiceExports that the member's API server holds, read
// with one list before a new cache starts: its informers list Services,
// slices and ServiceExports at once, and the first two were transformed
// before the last were noted, so a process's first start thinned most of
// what it exports (the race that NewExportedNames' sharing leaves). A
// failed list is only logged: the cache's own informer reports what is
// wrong with the member, and the names known already still hold.
func (e *ExportedNames) learn(r client.Reader, cluster clusterset.ClusterID) {
	ctx, cancel := context.WithTimeout(context.Background(), learnTimeout)
	defer cancel()
	// The typed list: the member's scheme reads it in the version the
	// member serves.
	var list mcsv1beta1.ServiceExportList
	if err := r.List(ctx, &list); err != nil {
		log.Log.V(1).Info("ServiceExports not listed before the cache starts; their Services may be read from the API server", "cluster", cluster, "error", err.Error())
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range list.Items {
		e.names[client.ObjectKeyFromObject(&list.Items[i])] = struct{}{}
	}
}

// noteExport is the ServiceExports' transform: it notes the name before
// the cache holds the ServiceExport, so a slice that arrives after the
// ServiceExport can be read is never thinned.
func (e *ExportedNames) noteExport(obj any) (any, error) {
	obj, err := plumbing.StripUnread(obj)
	if se, ok := obj.(*mcsv1beta1.ServiceExport); ok && err == nil {
		e.mu.Lock()
		e.names[client.ObjectKeyFromObject(se)] = struct{}{}
		e.mu.Unlock()
	}
	return obj, err
}

func (e *ExportedNames) has(key types.NamespacedName) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	_, ok := e.names[key]
	return ok
}

// thinSlice is the EndpointSlices' transform: a slice of a Service that was
// never exported keeps no endpoints, nor anything else the watcher does not
// read before the Service is exported, and says so.
func (e *ExportedNames) thinSlice(obj any) (any, error) {
	obj, err := plumbing.StripUnread(obj)
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if err != nil || !ok || len(s.Endpoints) == 0 {
		return obj, err
	}
	if e.has(types.NamespacedName{Namespace: s.Namespace, Name: s.Labels[discoveryv1.LabelServiceName]}) {
		return s, nil
	}
	// What the watcher reads of a thinned slice: its name and version,
	// its Service, and its trigger time (sliceChanged). The rest is read
	// from the API server once the Service is exported.
	thin := &discoveryv1.EndpointSlice{AddressType: s.AddressType}
	thin.Namespace, thin.Name, thin.UID, thin.ResourceVersion = s.Namespace, s.Name, s.UID, s.ResourceVersion
	thin.Labels = map[string]string{discoveryv1.LabelServiceName: s.Labels[discoveryv1.LabelServiceName]}
	thin.Annotations = map[string]string{EndpointsDroppedAnnotation: "true"}
	if t, ok := s.Annotations[corev1.EndpointsLastChangeTriggerTime]; ok {
		thin.Annotations[corev1.EndpointsLastChangeTriggerTime] = t
	}
	return thin, nil
}

// thinService is the Services' transform: a Service that was never
// exported keeps its identity, labels and owners (what the import side
// reads of a Service in the way of a derived one), and says so. Derived
// Services, controlled by a ServiceImport, are kept whole.
func (e *ExportedNames) thinService(obj any) (any, error) {
	obj, err := plumbing.StripUnread(obj)
	svc, ok := obj.(*corev1.Service)
	if err != nil || !ok || e.has(client.ObjectKeyFromObject(svc)) || controlledByServiceImport(svc) {
		return obj, err
	}
	thin := &corev1.Service{ObjectMeta: metav1.ObjectMeta{
		Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID, ResourceVersion: svc.ResourceVersion,
		CreationTimestamp: svc.CreationTimestamp, DeletionTimestamp: svc.DeletionTimestamp,
		Labels: svc.Labels, OwnerReferences: svc.OwnerReferences,
		Annotations: map[string]string{SpecDroppedAnnotation: "true"},
	}}
	return thin, nil
}

func controlledByServiceImport(svc *corev1.Service) bool {
	return mcsapi.IsServiceImport(metav1.GetControllerOfNoCopy(svc))
}

func serviceThinned(svc *corev1.Service) bool {
	_, ok := svc.Annotations[SpecDroppedAnnotation]
	return ok
}

func thinned(s *discoveryv1.EndpointSlice) bool {
	_, ok := s.Annotations[EndpointsDroppedAnnotation]
	return ok
}

// fetched holds the Services that the cache holds thinned and their
// slices, as read from the API server, by Service (and slice name): each
// serves while the cache holds the same resourceVersion.
type fetched struct {
	mu       sync.Mutex
	services map[types.NamespacedName]map[string]*discoveryv1.EndpointSlice
	specs    map[types.NamespacedName]*corev1.Service
}

func newFetched() *fetched {
	return &fetched{services: map[types.NamespacedName]map[string]*discoveryv1.EndpointSlice{}, specs: map[types.NamespacedName]*corev1.Service{}}
}

// service returns cached, or, if the cache holds it thinned, the Service as
// read from the API server through reader: the one read before if its
// resourceVersion is the cache's, else read now. A Service the API server
// no longer holds is NotFound (its deletion is on its way to the cache).
// The Service returned is shared: never modified.
func (f *fetched) service(ctx context.Context, reader client.Reader, cached *corev1.Service) (*corev1.Service, error) {
	key := client.ObjectKeyFromObject(cached)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !serviceThinned(cached) {
		delete(f.specs, key)
		return cached, nil
	}
	if got := f.specs[key]; got != nil && got.ResourceVersion == cached.ResourceVersion {
		return got, nil
	}
	live := &corev1.Service{}
	if err := reader.Get(ctx, key, live); err != nil {
		delete(f.specs, key)
		if apierrors.IsNotFound(err) {
			return nil, err
		}
		return nil, fmt.Errorf("read Service %s, whose spec the cache left out: %w", key, err)
	}
	// Held as the cache holds a whole Service (what the watcher never
	// reads dropped), so that the two read the same.
	_, _ = plumbing.StripUnread(live)
	f.specs[key] = live
	return live, nil
}

// whole returns the slices of Service svc with every thinned one in items
// (the cache's) replaced by its version read from the API server through
// reader: the one fetched before if its resourceVersion is the cache's,
// else read now (one list of the Service's slices). A thinned slice that
// the API server no longer holds is left out: its deletion is on its way
// to the cache. What was fetched of svc and is no longer thinned in the
// cache is forgotten.
func (f *fetched) whole(ctx context.Context, reader client.Reader, svc types.NamespacedName, items []discoveryv1.EndpointSlice) ([]discoveryv1.EndpointSlice, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	had := f.services[svc]
	missing, anyThinned := false, false
	for i := range items {
		if thinned(&items[i]) {
			anyThinned = true
			if got := had[items[i].Name]; got == nil || got.ResourceVersion != items[i].ResourceVersion {
				missing = true
			}
		}
	}
	if !anyThinned {
		// The common case, an export whose slices all arrived after it:
		// the cache's slices as they are.
		delete(f.services, svc)
		return items, nil
	}
	if missing {
		var live discoveryv1.EndpointSliceList
		selector := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name}).Add(notImported())
		if err := reader.List(ctx, &live, client.InNamespace(svc.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
			return nil, fmt.Errorf("read the EndpointSlices of %s, whose endpoints the cache left out: %w", svc, err)
		}
		had = make(map[string]*discoveryv1.EndpointSlice, len(live.Items))
		for i := range live.Items {
			_, _ = plumbing.StripUnread(&live.Items[i])
			had[live.Items[i].Name] = &live.Items[i]
		}
	}
	out := make([]discoveryv1.EndpointSlice, 0, len(items))
	kept := map[string]*discoveryv1.EndpointSlice{}
	for i := range items {
		if !thinned(&items[i]) {
			out = append(out, items[i])
		} else if got := had[items[i].Name]; got != nil {
			kept[got.Name] = got
			out = append(out, *got)
		}
	}
	if len(kept) == 0 {
		delete(f.services, svc)
	} else {
		f.services[svc] = kept
	}
	return out, nil
}

// forget drops what was fetched of Service svc (its export is gone).
func (f *fetched) forget(svc types.NamespacedName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.services, svc)
	delete(f.specs, svc)
}
