package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/publish"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/controlplane"
)

// The fan-out relay's objects: its source slice in the first member (or,
// for the hub load, its publication in the hub), its object in its hop
// (relayHop), and its mirror in every consumer, all in the namespace of
// the views.
const (
	relaySrcName = "relay-src"
	relayDstName = "relay-dst"
	relayService = "relay"
	// relayHopNamespace holds the relay's object in its hop (the hub, or
	// the source member), apart from the publications that mcs-syncer
	// reads.
	relayHopNamespace = "bench-relay"
)

// fanout is the raw relay floor of a clusterset: the cheapest correct copy
// of a change of one source to a mirror in every consumer, directly or
// through one object in an API server between them (relayHop: the hops of
// hub and direct mode). What it carries
// of a change is the part-sized run of endpoints that holds the changed
// one (partOf), as mcs-syncer publishes a change in one part and imports
// it into one slice of --max-endpoints-per-slice. Each write goes over the
// copy last written (no GET, as mcs-syncer writes from its cache), the
// consumers' in parallel.
type fanout struct {
	g         *growth
	ns        string
	consumers []string
	mu        sync.Mutex
	last      map[string]*discoveryv1.EndpointSlice // mirror by consumer
	hop       *relayHop
	hopLast   *v1alpha1.PublishedExport
}

// relayHop is where a change passes between its source and the consumers
// in a mode that mcs-syncer's processes do not reach across: the hub in
// hub mode; in direct mode the source member's own API server, where the
// other members' processes read its publications. Central mode has none.
type relayHop struct {
	client client.Client
	config *rest.Config
}

// relayHopOf returns the relay's hop in mode, or nil.
func (g *growth) relayHopOf(mode string) *relayHop {
	switch mode {
	case modeHub:
		return &relayHop{client: g.hub, config: g.bed.Hub.RESTConfig()}
	case modeDirect:
		return &relayHop{client: g.ctrl[memberName(0)], config: g.restConfig(g.bed.Clusters[0])}
	}
	return nil
}

// newFanout creates the mirrors (and the object of hop, if any) and
// returns the relay.
func (g *growth) newFanout(ctx context.Context, ns string, consumers []string, hop *relayHop) (*fanout, error) {
	f := &fanout{g: g, ns: ns, consumers: consumers, last: map[string]*discoveryv1.EndpointSlice{}, hop: hop}
	for _, c := range consumers {
		dst := endpointSlice(ns, relayDstName, relayService, benchIP(9, 0, 0), min(g.endpoints, partSize))
		dst.Labels[roleLabel] = roleRelayDst
		got, err := g.kube[c].DiscoveryV1().EndpointSlices(ns).Create(ctx, dst, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			got, err = g.kube[c].DiscoveryV1().EndpointSlices(ns).Get(ctx, relayDstName, metav1.GetOptions{})
		}
		if err != nil {
			return nil, fmt.Errorf("relay mirror in %s: %w", c, err)
		}
		f.last[c] = got
	}
	if hop != nil {
		if err := hop.object(ctx, relayHopNamespace, relayObject(ns, min(g.endpoints, partSize)), &f.hopLast); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// partSize is the most endpoints of a part (and of an imported slice) by
// default: what the relay carries of a change.
const partSize = publish.DefaultMaxEndpointsPerPart

// partOf returns the part-sized run of endpoints that holds endpoints[i].
func partOf(endpoints []discoveryv1.Endpoint, i int) []discoveryv1.Endpoint {
	start := i / partSize * partSize
	return endpoints[start:min(len(endpoints), start+partSize)]
}

// changedAt returns the index of the first endpoint that differs between
// before and after, or -1 if none does.
func changedAt(before, after []discoveryv1.Endpoint) int {
	for i := range after {
		if i >= len(before) || !equality.Semantic.DeepEqual(before[i], after[i]) {
			return i
		}
	}
	if len(before) > len(after) {
		return len(after) - 1
	}
	return -1
}

// relayObject is the relay's object in its hop: a publication, like what
// a member publishes there.
func relayObject(ns string, endpoints int) *v1alpha1.PublishedExport {
	s := endpointSlice(ns, "", relayService, benchIP(9, 0, 0), endpoints)
	return &v1alpha1.PublishedExport{
		ObjectMeta: metav1.ObjectMeta{Namespace: relayHopNamespace, Name: "relay." + ns + "." + relayService},
		Spec: v1alpha1.PublishedExportSpec{Cluster: "relay", Namespace: ns, Name: relayService,
			Endpoints: []v1alpha1.EndpointGroup{{AddressType: s.AddressType, Ports: s.Ports, Endpoints: s.Endpoints}}},
	}
}

// object creates namespace ns in the hop's API server and obj in it (or
// reads it back), into *out.
func (h *relayHop) object(ctx context.Context, ns string, obj *v1alpha1.PublishedExport, out **v1alpha1.PublishedExport) error {
	if err := h.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("relay namespace %s: %w", ns, err)
	}
	err := h.client.Create(ctx, obj)
	if apierrors.IsAlreadyExists(err) {
		err = h.client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	}
	if err != nil {
		return fmt.Errorf("relay object %s: %w", obj.Name, err)
	}
	*out = obj
	return nil
}

// toHop writes the source's endpoints and trigger time over the hop's
// object.
func (f *fanout) toHop(ctx context.Context, endpoints []discoveryv1.Endpoint, trigger string) error {
	f.mu.Lock()
	p := f.hopLast.DeepCopy()
	f.mu.Unlock()
	p.Spec.Endpoints[0].Endpoints = endpoints
	p.Spec.LastChangeTriggerTime = trigger
	if err := f.hop.client.Update(ctx, p); err != nil {
		if apierrors.IsConflict(err) {
			if err := f.hop.client.Get(ctx, client.ObjectKeyFromObject(p), p); err == nil {
				f.mu.Lock()
				f.hopLast = p
				f.mu.Unlock()
			}
		}
		return fmt.Errorf("relay to its hop: %w", err)
	}
	f.mu.Lock()
	f.hopLast = p
	f.mu.Unlock()
	return nil
}

// toConsumers writes endpoints and trigger time over every consumer's
// mirror, in parallel.
func (f *fanout) toConsumers(ctx context.Context, endpoints []discoveryv1.Endpoint, trigger string) error {
	var wg sync.WaitGroup
	errs := make([]error, len(f.consumers))
	for i, c := range f.consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.mu.Lock()
			dst := f.last[c].DeepCopy()
			f.mu.Unlock()
			dst.Endpoints = endpoints
			dst.Annotations[corev1.EndpointsLastChangeTriggerTime] = trigger
			written, err := f.g.kube[c].DiscoveryV1().EndpointSlices(f.ns).Update(ctx, dst, metav1.UpdateOptions{})
			if err != nil {
				// After a conflict the next write starts from the mirror as
				// it is; after another error from the copy last written.
				written = nil
				if apierrors.IsConflict(err) {
					if fresh, gerr := f.g.kube[c].DiscoveryV1().EndpointSlices(f.ns).Get(ctx, relayDstName, metav1.GetOptions{}); gerr == nil {
						written = fresh
					}
				}
				errs[i] = fmt.Errorf("relay to %s: %w", c, err)
			}
			if written != nil {
				f.mu.Lock()
				f.last[c] = written
				f.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// watchHop runs the relay's second hop: every change of the hop's object
// is copied to the consumers. It returns once its informer has synced.
func (f *fanout) watchHop(ctx context.Context) error {
	hc, err := cache.New(f.hop.config, cache.Options{
		Scheme: controlplane.Scheme(), DefaultNamespaces: map[string]cache.Config{relayHopNamespace: {}},
	})
	if err != nil {
		return err
	}
	inf, err := hc.GetInformer(ctx, &v1alpha1.PublishedExport{})
	if err != nil {
		return err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			p, ok := obj.(*v1alpha1.PublishedExport)
			if !ok || len(p.Spec.Endpoints) == 0 {
				return
			}
			if err := f.toConsumers(ctx, p.Spec.Endpoints[0].Endpoints, p.Spec.LastChangeTriggerTime); err != nil && ctx.Err() == nil {
				f.g.logf("%v", err)
			}
		},
	}); err != nil {
		return err
	}
	go func() { _ = hc.Start(ctx) }()
	if !hc.WaitForCacheSync(ctx) {
		return errors.New("the relay's informer of its hop did not sync")
	}
	return nil
}

// triggerNow is the trigger time of a change made now, as a consumer
// parses it back.
func triggerNow() (time.Time, string) {
	s := time.Now().UTC().Format(time.RFC3339Nano)
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t, s
}

// flip returns a copy of endpoints with endpoint i's readiness (ready and
// serving) flipped, its address and its new readiness.
func flip(endpoints []discoveryv1.Endpoint, i int) ([]discoveryv1.Endpoint, string, bool) {
	out := make([]discoveryv1.Endpoint, len(endpoints))
	for j := range endpoints {
		endpoints[j].DeepCopyInto(&out[j])
	}
	ep := &out[i%len(out)]
	ready := ep.Conditions.Ready == nil || !*ep.Conditions.Ready
	ep.Conditions.Ready, ep.Conditions.Serving = &ready, &ready
	return out, ep.Addresses[0], ready
}
