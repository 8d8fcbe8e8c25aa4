package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	discoveryclient "k8s.io/client-go/kubernetes/typed/discovery/v1"
	"k8s.io/client-go/tools/events"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxEndpointsPerSlice is the number of endpoints a slice holds at
// most unless WithMaxEndpointsPerSlice says otherwise (the Kubernetes
// EndpointSlice controller's default).
const DefaultMaxEndpointsPerSlice = 100

// maxEndpointsPerSliceLimit is the API's limit on endpoints in one slice.
const maxEndpointsPerSliceLimit = 1000

// Reconciler keeps the EndpointSlices of owner objects in line with the
// endpoints they should have. It is safe for concurrent use by several
// workers, as long as no two of them reconcile the same owner at once.
type Reconciler struct {
	client    discoveryclient.EndpointSlicesGetter
	managedBy string

	maxEndpointsPerSlice int
	placeholder          bool
	enforceOwnership     bool
	trafficDistribution  bool
	zoneMinimums         bool
	recorder             events.EventRecorder
	tracker              *Tracker
	metrics              *metrics
	// incrementalMin and memos: WithIncrementalPlans (memo.go).
	incrementalMin int
	memos          memos
	// concurrentWrites: WithConcurrentWrites (apply.go).
	concurrentWrites int
}

// Option sets an optional setting of a Reconciler.
type Option func(*Reconciler) error

// WithMaxEndpointsPerSlice sets how many endpoints one slice holds at most:
// 1..1000, default DefaultMaxEndpointsPerSlice.
func WithMaxEndpointsPerSlice(n int) Option {
	return func(r *Reconciler) error {
		if n < 1 || n > maxEndpointsPerSliceLimit {
			return fmt.Errorf("max endpoints per slice must be 1..%d, got %d", maxEndpointsPerSliceLimit, n)
		}
		r.maxEndpointsPerSlice = n
		return nil
	}
}

// WithConcurrentWrites lets Apply send up to n writes of a plan at once:
// its creates, then its updates, then its deletes, each kind finished
// before the next begins, so that an endpoint moved from one slice to
// another is in the new one before it leaves the old (as with one write at
// a time). A plan of many slices (an owner's first sync, a Service of
// 50,000 endpoints) is then written in a fraction of the round trips. The
// errors Apply returns are joined in the plan's order whatever order the
// writes ended in. Default 1 (one write at a time, as kube-controller-manager
// writes). n must be at least 1.
func WithConcurrentWrites(n int) Option {
	return func(r *Reconciler) error {
		if n < 1 {
			return fmt.Errorf("concurrent writes must be at least 1, got %d", n)
		}
		r.concurrentWrites = n
		return nil
	}
}

// WithPlaceholder keeps one empty slice (no endpoints, no ports) per
// supported address type when an owner has no endpoints at all, so that
// consumers can tell "no endpoints" from "not synced yet". Default: off
// (the Kubernetes EndpointSlice controller turns it on, the mirroring
// controller does not).
func WithPlaceholder(on bool) Option {
	return func(r *Reconciler) error { r.placeholder = on; return nil }
}

// WithOwnershipEnforced deletes slices (carrying this reconciler's
// managed-by label) whose controller owner is not the owner being
// reconciled, and never reuses them. Default: off.
func WithOwnershipEnforced(on bool) Option {
	return func(r *Reconciler) error { r.enforceOwnership = on; return nil }
}

// WithTrafficDistribution makes the reconciler compute endpoint hints from
// Input.TrafficDistribution (PreferClose, PreferSameZone, PreferSameNode),
// or with Input.Hints when given, and clear them otherwise. Default: off,
// and the hints of the desired endpoints are written as given (a
// controller that copies slices from elsewhere keeps the source's hints).
func WithTrafficDistribution(on bool) Option {
	return func(r *Reconciler) error { r.trafficDistribution = on; return nil }
}

// WithZoneMinimums makes topology-aware hints (Input.Topology) keep every
// zone at its minimum: when the hints kept in slices the plan does not
// otherwise write leave a zone with fewer endpoints than its CPU share
// less the overload threshold, those slices are rewritten one at a time,
// from the last, until none is. Default: off, as kube-controller-manager,
// whose topology cache checks kept hints against each zone's maximum only
// (getHintsByZone), so that a zone may be left below its minimum until a
// sync writes enough of its slices. The price is writes upstream does not
// make: 3 updates in 2,000 steps of make diff-kcm (docs/benchmarks.md).
func WithZoneMinimums(on bool) Option {
	return func(r *Reconciler) error { r.zoneMinimums = on; return nil }
}

// WithEventRecorder records a Warning event on the owner when writes fail.
// The recorder's scheme must know the owner's type.
func WithEventRecorder(rec events.EventRecorder) Option {
	return func(r *Reconciler) error { r.recorder = rec; return nil }
}

// RegisterMetrics registers the metrics that WithMetrics gives a
// reconciler with reg, ahead of the first reconciler: a process that makes
// its reconcilers on demand exports them (at zero) from its start.
func RegisterMetrics(reg prometheus.Registerer) error {
	_, err := newMetrics(reg)
	return err
}

// WithMetrics registers the reconciler's metrics (see metrics.go) with reg.
// Reconcilers sharing a registerer share the metrics.
func WithMetrics(reg prometheus.Registerer) Option {
	return func(r *Reconciler) error {
		m, err := newMetrics(reg)
		if err != nil {
			return err
		}
		r.metrics = m
		return nil
	}
}

// WithTracker uses t as the stale-cache tracker, for a caller that also
// feeds it watch events (Tracker.ShouldSync, Tracker.ForgetOwner). Default: a
// tracker of the reconciler's own.
func WithTracker(t *Tracker) Option {
	return func(r *Reconciler) error {
		if t == nil {
			return errors.New("tracker must not be nil")
		}
		r.tracker = t
		return nil
	}
}

// New returns a Reconciler that writes slices through client and labels
// them endpointslice.kubernetes.io/managed-by=managedBy.
func New(client discoveryclient.EndpointSlicesGetter, managedBy string, opts ...Option) (*Reconciler, error) {
	if client == nil {
		return nil, errors.New("reconciler: client must not be nil")
	}
	if managedBy == "" {
		return nil, errors.New("reconciler: managed-by value must not be empty")
	}
	if errs := validation.IsValidLabelValue(managedBy); len(errs) > 0 {
		return nil, fmt.Errorf("reconciler: managed-by value %q is not a valid label value: %v", managedBy, errs)
	}
	r := &Reconciler{
		client:               client,
		managedBy:            managedBy,
		maxEndpointsPerSlice: DefaultMaxEndpointsPerSlice,
		concurrentWrites:     1,
	}
	for _, opt := range opts {
		if err := opt(r); err != nil {
			return nil, fmt.Errorf("reconciler: %w", err)
		}
	}
	if r.tracker == nil {
		r.tracker = NewTracker()
	}
	if r.metrics == nil {
		r.metrics = newUnregisteredMetrics()
	}
	return r, nil
}

// ManagedBy returns the value of the managed-by label of this reconciler's
// slices; callers list existing slices with it.
func (r *Reconciler) ManagedBy() string { return r.managedBy }

// Tracker returns the stale-cache tracker.
func (r *Reconciler) Tracker() *Tracker { return r.tracker }

// Owner is the object that owns a set of slices: a Service, a
// ServiceImport, any custom object. Typed objects from an informer satisfy
// it.
type Owner interface {
	metav1.Object
	runtime.Object
}

// Input is everything one reconcile of one owner needs. The reconciler
// never modifies anything it is given.
type Input struct {
	// Owner owns the slices: its namespace, name and UID give theirs, its
	// deletion timestamp stops creates.
	Owner Owner
	// OwnerGVK is the owner's group, version and kind, for the slices'
	// controller owner reference (objects from informers carry no TypeMeta).
	OwnerGVK schema.GroupVersionKind
	// Desired are the endpoints the owner should have.
	Desired []EndpointGroup
	// AddressTypes are the address types the owner supports. Slices of
	// other types are deleted, and with placeholders on each type gets its
	// placeholder. Desired groups of other types are an error.
	AddressTypes []discoveryv1.AddressType
	// Existing are the owner's current slices, as listed from a cache by the
	// managed-by label (and, typically, an owner label). Slices whose
	// managed-by label is not this reconciler's are ignored.
	Existing []*discoveryv1.EndpointSlice
	// TrafficDistribution is the owner's spec.trafficDistribution; used only
	// with WithTrafficDistribution.
	TrafficDistribution *string
	// Hints, when not nil, gives each endpoint its hints in place of
	// TrafficDistribution's rule (a policy of the caller's own, such as one
	// that only some endpoints satisfy); used only with
	// WithTrafficDistribution. It must depend on the endpoint alone and
	// must not modify it; nil hints are none.
	Hints func(*discoveryv1.Endpoint) *discoveryv1.EndpointHints
	// Topology, when not nil, gives the ready endpoints topology-aware
	// hints (service.kubernetes.io/topology-mode: Auto, see
	// TopologyModeAuto) in proportion to the zones' CPU, as
	// kube-controller-manager does: the hints of slices the plan does not
	// otherwise write are kept while they remain valid. Used only with
	// WithTrafficDistribution, in place of TrafficDistribution and Hints.
	Topology *Topology
	// Labeler decides the slices' labels and annotations; nil means none
	// but managed-by.
	Labeler Labeler
	// TriggerTime, if not zero, is written as the
	// endpoints.kubernetes.io/last-change-trigger-time annotation of every
	// slice created or updated; zero removes it from them.
	TriggerTime time.Time
}

// Reconcile plans the owner's slices and applies the plan.
func (r *Reconciler) Reconcile(ctx context.Context, in Input) error {
	plan, err := r.Plan(in)
	if err != nil {
		return err
	}
	return r.Apply(ctx, plan)
}

// Forget drops what the reconciler remembers of an owner that is gone (its
// tracker entries, its share of the gauges and its memo, see
// WithIncrementalPlans).
func (r *Reconciler) Forget(ownerUID types.UID) {
	r.tracker.ForgetOwner(ownerUID)
	r.metrics.forgetOwner(ownerUID)
	r.memos.forget(ownerUID)
}
