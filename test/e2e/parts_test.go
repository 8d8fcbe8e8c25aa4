package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/membership"
	"github.com/mcs-syncer/mcs-syncer/internal/publish"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/workloads"
)

// The tests of this file export Services far larger than one object can
// carry, which members publish in parts (internal/publish/parts.go).

// manyIPs returns n distinct addresses (at most 64,000) in 10.160.0.0/16,
// outside every range of the testbed.
func manyIPs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("10.160.%d.%d", i/250, 1+i%250)
	}
	return out
}

// podEndpoint is a ready endpoint at address as kube-controller-manager
// writes a pod's (node, zone, target reference: ~170 bytes in a
// publication, where an address alone takes ~55).
func podEndpoint(ns, service, address string, i int) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{address}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		NodeName: ptr.To(fmt.Sprintf("node-%d", i%10)), Zone: ptr.To("zone-a"),
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: fmt.Sprintf("%s-7d4b9c8f6-%05d", service, i), UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i))}}
}

// sourceSlice is an EndpointSlice of Service ns/name, written by the test
// as if by an EndpointSlice controller.
func sourceSlice(ns, service, name string, endpoints []discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: "e2e.mcs-syncer"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   endpoints,
	}
}

// writeSlices writes the endpoints of addresses for Service ns/name into
// slices of 1,000 (the most one EndpointSlice holds) named <name>-<n>,
// and returns them as written.
func writeSlices(ctx context.Context, t *testing.T, cl client.Client, ns, name string, addresses []string) []*discoveryv1.EndpointSlice {
	t.Helper()
	var out []*discoveryv1.EndpointSlice
	for i := 0; i*1000 < len(addresses); i++ {
		var endpoints []discoveryv1.Endpoint
		for j, address := range addresses[i*1000 : min(len(addresses), (i+1)*1000)] {
			endpoints = append(endpoints, podEndpoint(ns, name, address, i*1000+j))
		}
		slice := sourceSlice(ns, name, fmt.Sprintf("%s-%d", name, i), endpoints)
		if err := cl.Create(ctx, slice); err != nil {
			t.Fatal(err)
		}
		out = append(out, slice)
	}
	return out
}

// exportService creates Service ns/name (no selector: its slices are the
// test's), headless or not, and its ServiceExport.
func exportService(ctx context.Context, t *testing.T, cl client.Client, ns, name string, headless bool) *mcsv1beta1.ServiceExport {
	t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	if headless {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	if err := cl.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	export := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if err := cl.Create(ctx, export); err != nil {
		t.Fatal(err)
	}
	return export
}

// eventuallyLarge is eventually for checks that list a large export
// (tens of thousands of endpoints): polled every 2 s.
func eventuallyLarge(ctx context.Context, t *testing.T, what string, check func() error) {
	t.Helper()
	testbed.EventuallyEvery(ctx, t, what, 2*time.Second, check)
}

// importedExactly returns a check that consumer holds each of want as a
// ready endpoint of ns/name from source exactly once, and no other.
func importedExactly(ctx context.Context, consumer client.Client, ns, name, source string, want []string) func() error {
	return func() error {
		var list discoveryv1.EndpointSliceList
		if err := consumer.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{
			mcsv1beta1.LabelServiceName: name, mcsv1beta1.LabelSourceCluster: source}); err != nil {
			return err
		}
		return sameReady(readyAddresses(list.Items), want)
	}
}

// readyAddresses counts the ready endpoints of slices by address.
func readyAddresses(slices []discoveryv1.EndpointSlice) map[string]int {
	held := map[string]int{}
	for _, s := range slices {
		for _, e := range s.Endpoints {
			if len(e.Addresses) > 0 && (e.Conditions.Ready == nil || *e.Conditions.Ready) {
				held[e.Addresses[0]]++
			}
		}
	}
	return held
}

// sameReady says how held (ready endpoints by address) differs from want,
// each once; nil if it does not.
func sameReady(held map[string]int, want []string) error {
	missing, doubled, example := 0, 0, ""
	for _, a := range want {
		switch held[a] {
		case 0:
			missing++
			example = a
		case 1:
		default:
			doubled++
			example = a
		}
	}
	if extra := len(held) - (len(want) - missing); missing+doubled+extra > 0 {
		return fmt.Errorf("of %d endpoints, %d missing, %d held more than once (e.g. %s), %d not exported held", len(want), missing, doubled, example, extra)
	}
	return nil
}

// TestAnyServiceSize (direct and hub mode, where members publish): an
// export of 50,000 endpoints (as kube-controller-manager writes pods'
// endpoints; one object of the form before parts held about 6,300, and
// etcd refused 7,000) is published, in east's API server or in the hub, as
// a head without endpoints and parts of at most --max-endpoints-per-slice,
// imported exactly, each endpoint once, into west and north, and east's
// export says Ready=True. Unexported, it leaves the consumers and every
// part is deleted. Each mode's import time is printed. The Service is
// headless, so that the testbed's kube-proxies leave its 50,000 endpoints
// alone (programming them, iptables-restore took most of the 2 cores the
// test shares with them). (Central mode publishes nothing: its import of
// 50,000 endpoints is make bench-scale's.)
func TestAnyServiceSize(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	exclusive(t)
	const endpoints = 50000
	addresses := manyIPs(endpoints)
	east := bed.ClientOf(t, "east")
	for _, mode := range []struct {
		name  string
		start func() []*syncerProcess
		// published reaches where east publishes, into namespace
		// publishedIn.
		published   client.Client
		publishedIn string
	}{
		{"direct", func() []*syncerProcess { return startDirectMode(ctx, t) }, east, membership.DefaultPublicationNamespace},
		{"hub", func() []*syncerProcess {
			t.Cleanup(func() { clearHub(t) })
			return startHubMode(ctx, t)
		}, hubClient(t, ""), testbed.HubNamespace},
	} {
		ns := "size-" + mode.name
		bed.Namespace(ctx, t, ns)
		procs := mode.start()
		began := time.Now()
		writeSlices(ctx, t, east, ns, "huge", addresses)
		export := exportService(ctx, t, east, ns, "huge", true)
		for _, consumer := range []string{"west", "north"} {
			eventuallyLarge(ctx, t, fmt.Sprintf("%s mode: %s to import huge's %d endpoints exactly", mode.name, consumer, endpoints),
				importedExactly(ctx, bed.ClientOf(t, consumer), ns, "huge", "east", addresses))
		}
		t.Logf("FIGURE %s mode: %d endpoints exported from east imported exactly into west and north %s after the first of its slices was written",
			mode.name, endpoints, time.Since(began).Round(100*time.Millisecond))
		eventually(ctx, t, mode.name+" mode: huge's ServiceExport Ready", func() error {
			cond, err := workloads.ExportCondition(ctx, east, ns, "huge", mcsv1beta1.ServiceExportConditionReady)
			if err != nil {
				return err
			}
			if cond.Status != metav1.ConditionTrue {
				return fmt.Errorf("Ready %s %s: %s", cond.Status, cond.Reason, cond.Message)
			}
			return nil
		})
		checkParts(ctx, t, mode.name, mode.published, mode.publishedIn, "east", ns, "huge", endpoints)

		if err := east.Delete(ctx, export); err != nil {
			t.Fatal(err)
		}
		for _, consumer := range []string{"west", "north"} {
			eventuallyLarge(ctx, t, fmt.Sprintf("%s mode: %s to withdraw huge", mode.name, consumer),
				importedExactly(ctx, bed.ClientOf(t, consumer), ns, "huge", "east", nil))
		}
		eventuallyLarge(ctx, t, mode.name+" mode: huge's head and parts deleted", func() error {
			pubs, err := publicationsOf(ctx, mode.published, mode.publishedIn, "east", ns, "huge")
			if err != nil {
				return err
			}
			if len(pubs) > 0 {
				return fmt.Errorf("%d objects left, e.g. %s", len(pubs), pubs[0].Name)
			}
			return nil
		})
		stopAll(t, procs)
	}
}

// startDirectMode runs one mcs-syncer per member in per-cluster (direct)
// mode: each publishes into its own API server and reads the others'.
func startDirectMode(ctx context.Context, t *testing.T) []*syncerProcess {
	t.Helper()
	return startMembers(ctx, t, func(string) string { return bed.ConfigPath })
}

// publicationsOf lists source's head and parts of ns/name in namespace in
// of cl (the hub, or the source itself in direct mode).
func publicationsOf(ctx context.Context, cl client.Client, in, source, ns, name string) ([]v1alpha1.PublishedExport, error) {
	var list v1alpha1.PublishedExportList
	err := cl.List(ctx, &list, client.InNamespace(in), client.MatchingLabels{
		mcsv1beta1.LabelSourceCluster: source, mcsv1beta1.LabelServiceName: name, publish.ServiceNamespaceLabel: ns})
	return list.Items, err
}

// checkParts asserts that source's publication of ns/name of n endpoints
// (in namespace in of cl) is a head without endpoints and parts of at
// most the default --max-endpoints-per-slice, holding n endpoints in all.
func checkParts(ctx context.Context, t *testing.T, mode string, cl client.Client, in, source, ns, name string, n int) {
	t.Helper()
	if err := inParts(ctx, cl, in, source, ns, name, n)(); err != nil {
		t.Errorf("%s mode: %v", mode, err)
	}
}

// inParts returns a check that source's publication of ns/name of n
// endpoints (in namespace in of cl) is a head without endpoints and parts
// of at most the default --max-endpoints-per-slice, holding n endpoints in
// all.
func inParts(ctx context.Context, cl client.Client, in, source, ns, name string, n int) func() error {
	return func() error {
		pubs, err := publicationsOf(ctx, cl, in, source, ns, name)
		if err != nil {
			return err
		}
		heads, parts, held := 0, 0, 0
		for _, p := range pubs {
			count := 0
			for _, g := range p.Spec.Endpoints {
				count += len(g.Endpoints)
			}
			held += count
			switch {
			case !publish.IsPart(&p):
				heads++
				if count > 0 {
					return fmt.Errorf("head %s holds %d endpoints", p.Name, count)
				}
			case count > publish.DefaultMaxEndpointsPerPart:
				return fmt.Errorf("part %s holds %d endpoints", p.Name, count)
			default:
				parts++
			}
		}
		if heads != 1 || held != n || parts < n/publish.DefaultMaxEndpointsPerPart {
			return fmt.Errorf("%d heads and %d parts holding %d endpoints; want one head and at least %d parts holding %d",
				heads, parts, held, n/publish.DefaultMaxEndpointsPerPart, n)
		}
		return nil
	}
}

// stableWatch watches a consumer's imported slices of one export and
// records the first moment at which an endpoint of stable (each ready
// throughout in its source) was not held ready exactly once, or any
// endpoint was held ready twice, once every stable endpoint had been seen.
type stableWatch struct {
	mu        sync.Mutex
	started   bool
	violation string
	events    int
	ended     <-chan struct{}
}

// watchStable starts a stableWatch of consumer's slices of ns/name from
// source, until ctx ends.
func watchStable(ctx context.Context, t *testing.T, consumer, source, ns, name string, stable []string) *stableWatch {
	t.Helper()
	selector := mcsv1beta1.LabelServiceName + "=" + name + "," + mcsv1beta1.LabelSourceCluster + "=" + source
	sw := &stableWatch{}
	sw.ended = watchSlices(ctx, t, consumer, ns, selector, func(e watch.Event, bySlice map[string]*discoveryv1.EndpointSlice) bool {
		held := readyAddresses(slicesOf(bySlice))
		s, _ := e.Object.(*discoveryv1.EndpointSlice)
		sw.mu.Lock()
		defer sw.mu.Unlock()
		sw.events++
		if !sw.started {
			sw.started = sameReady(pick(held, stable), stable) == nil
		}
		if sw.started && sw.violation == "" {
			for _, a := range stable {
				if held[a] != 1 {
					sw.violation = fmt.Sprintf("after event %d (%s %s), stable endpoint %s held ready %d times", sw.events, e.Type, s.Name, a, held[a])
					break
				}
			}
			for a, n := range held {
				if n > 1 && sw.violation == "" {
					sw.violation = fmt.Sprintf("after event %d (%s %s), %s held ready %d times", sw.events, e.Type, s.Name, a, n)
				}
			}
		}
		return true
	})
	return sw
}

// check fails t if the watch saw a violation, never saw every stable
// endpoint, or ended before the test did.
func (sw *stableWatch) check(t *testing.T, what string) {
	t.Helper()
	select {
	case <-sw.ended:
		t.Errorf("%s: the watch ended early", what)
	default:
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	switch {
	case !sw.started:
		t.Errorf("%s: the stable endpoints were never all held", what)
	case sw.violation != "":
		t.Errorf("%s: %s", what, sw.violation)
	default:
		t.Logf("%s: %d events watched, every stable endpoint held ready once throughout", what, sw.events)
	}
}

// pick is held restricted to the addresses of want.
func pick(held map[string]int, want []string) map[string]int {
	out := map[string]int{}
	for _, a := range want {
		if n, ok := held[a]; ok {
			out[a] = n
		}
	}
	return out
}

// TestStormNeverHalves (direct and hub mode): a Service of 12,000
// endpoints, 10,000 of them ready throughout (KEP-1645's consumers must
// keep routing to them), the rest, spread over the same source slices
// and so over the same parts, made not ready, ready again and replaced by
// new endpoints in a storm of 36 writes issued back to back. A watch in
// each consumer asserts that no stable endpoint ever left its imported
// slices or was held twice, and no endpoint was held twice; at the end
// the consumers hold exactly what east does. The Service is headless, as
// TestAnyServiceSize's is.
func TestStormNeverHalves(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	exclusive(t)
	east := bed.ClientOf(t, "east")
	for _, mode := range []struct {
		name  string
		start func() []*syncerProcess
	}{
		{"direct", func() []*syncerProcess { return startDirectMode(ctx, t) }},
		{"hub", func() []*syncerProcess {
			t.Cleanup(func() { clearHub(t) })
			return startHubMode(ctx, t)
		}},
	} {
		ns := "storm-" + mode.name
		bed.Namespace(ctx, t, ns)
		procs := mode.start()
		addresses := manyIPs(20000)
		// Every sixth endpoint churns: 10,000 stable, 2,000 churning.
		churns := func(k int) bool { return k%6 == 5 }
		var stable []string
		for k, a := range addresses[:12000] {
			if !churns(k) {
				stable = append(stable, a)
			}
		}
		sources := writeSlices(ctx, t, east, ns, "storm", addresses[:12000])
		export := exportService(ctx, t, east, ns, "storm", true)
		watches := map[string]*stableWatch{}
		for _, consumer := range []string{"west", "north"} {
			eventuallyLarge(ctx, t, fmt.Sprintf("%s mode: %s to import storm's 12,000 endpoints", mode.name, consumer),
				importedExactly(ctx, bed.ClientOf(t, consumer), ns, "storm", "east", addresses[:12000]))
			watches[consumer] = watchStable(ctx, t, consumer, "east", ns, "storm", stable)
		}

		next := 12000 // the next new address
		for r := range 36 {
			s := sources[r%len(sources)]
			for j := range s.Endpoints {
				if !churns(r%len(sources)*1000 + j) {
					continue
				}
				e := &s.Endpoints[j]
				switch r / len(sources) {
				case 0:
					e.Conditions.Ready = ptr.To(false)
				case 1:
					e.Conditions.Ready = ptr.To(true)
				default:
					e.Addresses = []string{addresses[next]}
					next++
				}
			}
			if err := east.Update(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		var final []string
		for _, s := range sources {
			for _, e := range s.Endpoints {
				final = append(final, e.Addresses[0])
			}
		}
		for _, consumer := range []string{"west", "north"} {
			eventuallyLarge(ctx, t, fmt.Sprintf("%s mode: %s to hold what east holds after the storm", mode.name, consumer),
				importedExactly(ctx, bed.ClientOf(t, consumer), ns, "storm", "east", final))
			watches[consumer].check(t, mode.name+" mode, "+consumer)
		}
		if err := east.Delete(ctx, export); err != nil {
			t.Fatal(err)
		}
		for _, consumer := range []string{"west", "north"} {
			eventuallyLarge(ctx, t, fmt.Sprintf("%s mode: %s to withdraw storm", mode.name, consumer),
				importedExactly(ctx, bed.ClientOf(t, consumer), ns, "storm", "east", nil))
		}
		stopAll(t, procs)
	}
}

// TestUpgradeFromWholePublications (hub mode): for a while west runs an
// mcs-syncer of the form before parts, which the test plays through west's
// hub identity as that version wrote: a marker without readsParts (and no
// heartbeat), and west's export "old" published whole, one object. East
// and north run today's. While west is older, east publishes its export of
// 1,000 endpoints whole too (a head that the older reader imports alone),
// and north imports both exports exactly. Then west is upgraded: today's
// mcs-syncer starts on what the older one left. Its marker says
// readsParts, its export goes into parts, and east's goes into parts with
// no change of its own. North's watches see no endpoint of either export
// leave or held twice throughout; at the end no head in the hub holds an
// endpoint.
func TestUpgradeFromWholePublications(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	exclusive(t)
	t.Cleanup(func() { clearHub(t) })
	ns := "upgrade-to-parts"
	bed.Namespace(ctx, t, ns)
	east, west, north, hub := bed.ClientOf(t, "east"), bed.ClientOf(t, "west"), bed.ClientOf(t, "north"), hubClient(t, "")

	// West's export, and what the older mcs-syncer published of it.
	westAddresses := manyIPs(20000)[15000:15300]
	sources := writeSlices(ctx, t, west, ns, "old", westAddresses)
	westExport := exportService(ctx, t, west, ns, "old", false)
	older := publish.Marker("west", testbed.HubNamespace, 0)
	older.Spec.ReadsParts = false
	var endpoints []discoveryv1.Endpoint
	for _, s := range sources {
		endpoints = append(endpoints, s.Endpoints...)
	}
	whole := publish.Encode(&clusterset.ExportedService{
		Cluster: "west", Key: types.NamespacedName{Namespace: ns, Name: "old"}, ExportCreated: westExport.CreationTimestamp,
		Spec: clusterset.ExportedSpec{Type: mcsv1beta1.ClusterSetIP, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
		Endpoints: []reconciler.EndpointGroup{{AddressType: sources[0].AddressType, Ports: sources[0].Ports, Endpoints: endpoints}},
	}, testbed.HubNamespace)
	for _, o := range []client.Object{older, whole} {
		if err := hubClient(t, "west").Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	procs := map[string]*syncerProcess{}
	t.Cleanup(func() { stopAll(t, slices.Collect(maps.Values(procs))) })
	for _, member := range []string{"east", "north"} {
		p, err := startHubMember(ctx, member)
		if err != nil {
			t.Fatal(err)
		}
		procs[member] = p
	}
	eastAddresses := manyIPs(1000)
	writeSlices(ctx, t, east, ns, "big", eastAddresses)
	exportService(ctx, t, east, ns, "big", false)
	eventually(ctx, t, "north to import west's old exactly", importedExactly(ctx, north, ns, "old", "west", westAddresses))
	eventually(ctx, t, "north to import east's big exactly", importedExactly(ctx, north, ns, "big", "east", eastAddresses))
	eventually(ctx, t, "east's big published whole while west is older", func() error {
		pubs, err := publicationsOf(ctx, hub, testbed.HubNamespace, "east", ns, "big")
		if err != nil {
			return err
		}
		if len(pubs) != 1 {
			return fmt.Errorf("%d objects", len(pubs))
		}
		// What an older reader takes: the head alone.
		es, err := publish.Decode(&pubs[0])
		if err != nil {
			return err
		}
		if n := es.EndpointCount(); n != len(eastAddresses) {
			return fmt.Errorf("the head holds %d endpoints", n)
		}
		return nil
	})
	watches := map[string]*stableWatch{
		"west's old": watchStable(ctx, t, "north", "west", ns, "old", westAddresses),
		"east's big": watchStable(ctx, t, "north", "east", ns, "big", eastAddresses),
	}

	p, err := startHubMember(ctx, "west")
	if err != nil {
		t.Fatal(err)
	}
	procs["west"] = p
	eventually(ctx, t, "west's marker to say readsParts", func() error {
		m := &v1alpha1.PublishedExport{}
		if err := hub.Get(ctx, types.NamespacedName{Namespace: testbed.HubNamespace, Name: publish.MarkerName("west")}, m); err != nil {
			return err
		}
		if !m.Spec.ReadsParts {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	for _, e := range []struct {
		source, name string
		n            int
	}{{"west", "old", len(westAddresses)}, {"east", "big", len(eastAddresses)}} {
		eventually(ctx, t, e.source+"'s "+e.name+" in parts", inParts(ctx, hub, testbed.HubNamespace, e.source, ns, e.name, e.n))
	}
	eventually(ctx, t, "north to hold west's old exactly", importedExactly(ctx, north, ns, "old", "west", westAddresses))
	eventually(ctx, t, "north to hold east's big exactly", importedExactly(ctx, north, ns, "big", "east", eastAddresses))
	for what, w := range watches {
		w.check(t, "north, "+what)
	}
	var all v1alpha1.PublishedExportList
	if err := hub.List(ctx, &all, client.InNamespace(testbed.HubNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, p := range all.Items {
		if !publish.IsPart(&p) && len(p.Spec.Endpoints) > 0 {
			t.Errorf("after the upgrade, head %s holds endpoints", p.Name)
		}
	}
}

// TestDeletedPartsKeepEveryEndpoint (hub mode, issue 55): east exports
// 1,000 endpoints (ten full parts), then one leaves its source slice, so
// a part has room. Twenty times, the hub's administrator deletes a full
// part; east's publisher writes it again and may move one of its
// endpoints into the part with room in a second write. A watch in west
// and in north sees none of the 999 endpoints leave its imported slices,
// or held twice, throughout.
func TestDeletedPartsKeepEveryEndpoint(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	exclusive(t)
	ns := "parts-deleted"
	bed.Namespace(ctx, t, ns)
	t.Cleanup(func() { clearHub(t) })
	procs := startHubMode(ctx, t)
	defer func() { stopAll(t, procs) }()
	east, hub := bed.ClientOf(t, "east"), hubClient(t, "")
	addresses := manyIPs(1000)
	source := writeSlices(ctx, t, east, ns, "parts", addresses)[0]
	exportService(ctx, t, east, ns, "parts", false)
	for _, consumer := range []string{"west", "north"} {
		eventually(ctx, t, consumer+" to import parts' 1,000 endpoints", importedExactly(ctx, bed.ClientOf(t, consumer), ns, "parts", "east", addresses))
	}
	source.Endpoints = source.Endpoints[1:]
	if err := east.Update(ctx, source); err != nil {
		t.Fatal(err)
	}
	stable := addresses[1:]
	for _, consumer := range []string{"west", "north"} {
		eventually(ctx, t, consumer+" to import the 999 left", importedExactly(ctx, bed.ClientOf(t, consumer), ns, "parts", "east", stable))
	}
	eventually(ctx, t, "east's 999 endpoints in parts", inParts(ctx, hub, testbed.HubNamespace, "east", ns, "parts", len(stable)))
	watches := map[string]*stableWatch{}
	for _, consumer := range []string{"west", "north"} {
		watches[consumer] = watchStable(ctx, t, consumer, "east", ns, "parts", stable)
	}

	for i := range 20 {
		pubs, err := publicationsOf(ctx, hub, testbed.HubNamespace, "east", ns, "parts")
		if err != nil {
			t.Fatal(err)
		}
		var full *v1alpha1.PublishedExport
		for j := range pubs {
			if p := &pubs[j]; publish.IsPart(p) && len(p.Spec.Endpoints) == 1 && len(p.Spec.Endpoints[0].Endpoints) == publish.DefaultMaxEndpointsPerPart {
				full = p
				break
			}
		}
		if full == nil {
			t.Fatalf("deletion %d: no full part among %d publications", i+1, len(pubs))
		}
		if err := hub.Delete(ctx, full); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, fmt.Sprintf("deletion %d: %s written again", i+1, full.Name), func() error {
			again := &v1alpha1.PublishedExport{}
			if err := hub.Get(ctx, client.ObjectKeyFromObject(full), again); err != nil {
				return err
			}
			if again.UID == full.UID {
				return fmt.Errorf("not deleted yet")
			}
			return inParts(ctx, hub, testbed.HubNamespace, "east", ns, "parts", len(stable))()
		})
	}
	for _, consumer := range []string{"west", "north"} {
		eventually(ctx, t, consumer+" to hold the 999 after the deletions", importedExactly(ctx, bed.ClientOf(t, consumer), ns, "parts", "east", stable))
		watches[consumer].check(t, consumer)
	}
}
