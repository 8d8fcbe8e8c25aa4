package clusterset

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// ExportedService is what one member cluster exports under one
// namespace/name: the Service's exported spec and its endpoints. It is a
// value: once put into a Store it must not be modified.
type ExportedService struct {
	// Cluster exports it.
	Cluster ClusterID
	// Key is the namespace/name of the Service and its ServiceExport.
	Key types.NamespacedName
	// ExportCreated is the ServiceExport's creationTimestamp, as the
	// exporting cluster claims it (its API server in central mode, its
	// mcs-syncer's publication otherwise).
	ExportCreated metav1.Time
	// FirstSeen is when the clusterset first saw the export published: the
	// creationTimestamp of its publication's head, set by the publication
	// server (a hub's, or the member's own in direct mode), never by the
	// member's mcs-syncer. Zero where the export is not read from a
	// publication (central mode) or not yet published. The Store keeps the
	// earliest it was given while it holds the export, so a republished
	// head (a wiped hub) moves it no later. See Age.
	FirstSeen metav1.Time
	Spec      ExportedSpec
	// Endpoints are the Service's endpoints, from all its EndpointSlices,
	// grouped by address type and port set. A group may come in runs:
	// groups of the same address type and ports one after the other, in
	// identity order (reconciler.SliceGrouper.MaxRun, reconciler.JoinRuns),
	// so that one endpoint's change makes one new run and the others stay
	// the very arrays of the last export.
	Endpoints []reconciler.EndpointGroup
	// LastChangeTriggerTime is the newest
	// endpoints.kubernetes.io/last-change-trigger-time of the source slices
	// (zero if none carries one).
	LastChangeTriggerTime time.Time
	// RecentTriggerTimes are the distinct trigger times of the latest
	// changes of the source slices, oldest first, as the export watcher saw
	// them go by (several changes can reach the Store as one export). The
	// propagation latency metric observes each. Not compared by Equal.
	RecentTriggerTimes []time.Time
	// PartsLeftOut is how many parts of the export's publication the
	// reader left out because its member publishes more than the reader
	// holds of one member (--max-publications-per-member): the endpoints
	// are those of the head and of the other parts alone. The import says
	// so in its Ready condition and an event.
	PartsLeftOut int
}

// Age is the time that orders exports in a conflict (oldest first): the
// claimed ExportCreated, but never earlier than FirstSeen. A member can
// thus make its export no older than the clusterset first saw it, whatever
// its publication says (docs/security.md); a member that forges nothing is
// ordered by the claim wherever its publication was written within the
// second it claims, and otherwise by when it was first published.
func (e *ExportedService) Age() time.Time {
	if e.FirstSeen.After(e.ExportCreated.Time) {
		return e.FirstSeen.Time
	}
	return e.ExportCreated.Time
}

// EndpointCount returns the number of endpoints of every group.
func (e *ExportedService) EndpointCount() int {
	n := 0
	for _, g := range e.Endpoints {
		n += len(g.Endpoints)
	}
	return n
}

// ChangeTriggerTimes returns RecentTriggerTimes, or just
// LastChangeTriggerTime when there are none.
func (e *ExportedService) ChangeTriggerTimes() []time.Time {
	if len(e.RecentTriggerTimes) > 0 {
		return e.RecentTriggerTimes
	}
	if e.LastChangeTriggerTime.IsZero() {
		return nil
	}
	return []time.Time{e.LastChangeTriggerTime}
}

// ExportedSpec is the part of a Service (and its ServiceExport) that a
// ServiceImport takes over.
type ExportedSpec struct {
	Type                  mcsv1beta1.ServiceImportType
	Ports                 []mcsv1beta1.ServicePort
	SessionAffinity       corev1.ServiceAffinity
	SessionAffinityConfig *corev1.SessionAffinityConfig
	InternalTrafficPolicy *corev1.ServiceInternalTrafficPolicy
	TrafficDistribution   *string
	IPFamilies            []corev1.IPFamily
	// Labels and Annotations are the ServiceExport's exportedLabels and
	// exportedAnnotations (not the Service's own).
	Labels      map[string]string
	Annotations map[string]string
	// LocalClusterFirst is the ServiceExport's LocalClusterFirstAnnotation:
	// a consumer that has ready endpoints of its own sends its traffic
	// only to them.
	LocalClusterFirst bool
}

// LocalClusterFirstAnnotation, "true" on a ServiceExport, asks that each
// consumer with ready endpoints of its own keep the Service's traffic in
// its own cluster, and send it to every cluster when it has none (see
// docs/user-guide.md, "Local cluster first"). mcs-syncer's own until a
// standard exists (KEP-5939, a draft, proposes one). The merged value is
// set on the ServiceImport under the same key.
const LocalClusterFirstAnnotation = "mcs-syncer.io/local-cluster-first"

// Equal reports whether two exports carry the same information.
func (e *ExportedService) Equal(o *ExportedService) bool {
	return e.Cluster == o.Cluster && e.Key == o.Key && e.ExportCreated.Equal(&o.ExportCreated) &&
		e.FirstSeen.Equal(&o.FirstSeen) &&
		e.LastChangeTriggerTime.Equal(o.LastChangeTriggerTime) && e.PartsLeftOut == o.PartsLeftOut &&
		equality.Semantic.DeepEqual(e.Spec, o.Spec) &&
		endpointsEqual(e.Endpoints, o.Endpoints)
}

// endpointsEqual reports whether two exports' endpoints are the same, in
// the same order, as the reconciler compares endpoints (a targetRef's
// resourceVersion aside): without reflection, which took a third of a
// reader's time for one endpoint's change of 50,000.
func endpointsEqual(a, b []reconciler.EndpointGroup) bool {
	// By index, not slices.EqualFunc: a group is 72 bytes, and an export of
	// 50,000 endpoints has 500 of them (runs), most sharing their ports
	// and endpoints with the last export's.
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.AddressType != y.AddressType || !reconciler.PortsEqual(x.Ports, y.Ports) || !sameEndpoints(x.Endpoints, y.Endpoints) {
			return false
		}
	}
	return true
}

func sameEndpoints(a, b []discoveryv1.Endpoint) bool {
	if len(a) != len(b) {
		return false
	}
	// The entries that are the very same (an export watcher's new export
	// shares its unchanged endpoints with the last) need no comparison.
	head, tail := reconciler.Unmoved(a, b)
	for i := head; i < len(a)-tail; i++ {
		if !reconciler.EndpointEqual(&a[i], &b[i]) {
			return false
		}
	}
	return true
}

// Membership is what the export and import sides need to know of the
// clusterset's members while it runs: who they are now, and how healthy
// each is.
type Membership interface {
	// IDs returns the current members' IDs, sorted; the slice may be
	// shared (a membership change replaces it): never modify it.
	IDs() []ClusterID
	// Health reports what is known of a member's health; a member not in
	// the clusterset is Down since the zero time.
	Health(ClusterID) Health
	// Changes returns a channel closed at the next change of IDs or of a
	// member's state (internal/notify's Signal.Changed).
	Changes() <-chan struct{}
}

// Health is what the import side knows of one member's health: a member
// is Up, Held, or else down.
type Health struct {
	// Up: mcs-syncer reads the member (its cache is synced) and, for a
	// member read through its publications, the member's own mcs-syncer
	// renews its heartbeat there.
	Up bool
	// Held: what carries the member's news (the hub) cannot be read, so
	// nothing is known of the member itself: its exports stay as they
	// are, and no grace runs out (KEP-1645 withdraws a cluster that is
	// unhealthy, not one whose messenger is).
	Held bool
	// Since is, when Up, since when it is; otherwise when the member was
	// last up (or joined, or the process started): a failure that repeats
	// (forbidden, syncing, forbidden, ...) does not move it, so the grace
	// counts from it.
	Since time.Time
	// Answering: the member's API server answers (its cache is syncing or
	// synced); a member that answers is heard from in a moment.
	Answering bool
}
