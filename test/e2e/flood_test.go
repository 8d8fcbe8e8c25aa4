package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/imports"
	"github.com/mcs-syncer/mcs-syncer/internal/publish"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/workloads"
)

// floodLimit is the readers' --max-publications-per-member in
// TestMemberFloodIsBounded: far under the default (whose cost
// BenchmarkReaderAtLimit measures), far over what west publishes honestly.
const floodLimit = 200

// TestMemberFloodIsBounded (hub mode, every reader holding at most
// floodLimit publications of one member): west exports web honestly; then,
// with west's mcs-syncer stopped, its own hub identity writes the head and
// floodLimit+50 parts of a Service it does not export, and keeps
// rewriting them. Every reader stops at the limit and says so: it counts
// what it left out (mcs_syncer_publications_over_limit_total), its
// /members view says how many of west's publications it leaves out, and
// north's ServiceImport of the flooded Service says first in its Ready
// condition that west's publication is incomplete, with a Warning event;
// west's web is still imported by north and east; and a change of east's
// reaches north as fast during the flood as before it: the p50 of five
// changes each, measured in this run, are printed side by side, and the
// flood's may be at most twice the other's (or 250 ms more: on a shared
// 2-core machine a few tens of milliseconds are noise). West's
// mcs-syncer, back, deletes the flood.
func TestMemberFloodIsBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	exclusive(t)
	ns := "trust-flood"
	bed.Namespace(ctx, t, ns)
	procs := startMembers(ctx, t, bed.HubConfigPath, "--max-publications-per-member", fmt.Sprint(floodLimit))
	defer func() { stopAll(t, procs) }()
	t.Cleanup(func() { clearHub(t) })
	east, west, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "west"), bed.ClientOf(t, "north")

	workloads.CreateApp(ctx, t, west, ns, 2, 80, true, nil)
	exportService(ctx, t, east, ns, "lat", false)
	slice := writeSlices(ctx, t, east, ns, "lat", []string{"10.161.0.1"})[0]
	eventually(ctx, t, "north to import west's web and east's lat", func() error {
		if err := importedEndpoints(ctx, north, ns, "web", "west", 2)(); err != nil {
			return err
		}
		return importedExactly(ctx, north, ns, "lat", "east", []string{"10.161.0.1"})()
	})
	honest := memberPublications(ctx, t, "west")
	if honest > floodLimit-20 {
		t.Fatalf("west publishes %d objects honestly, too close to the test's limit %d (earlier tests left more exports than it expects)", honest, floodLimit)
	}

	before := changeLatencies(ctx, t, east, north, slice, 5, 0)

	// West's identity floods: the head and parts of a Service that west
	// does not export, then rewritten while east changes. West's
	// mcs-syncer is stopped first: while it runs, its publisher deletes
	// within milliseconds whatever of west's it did not write.
	westAt := memberAt("west")
	if err := procs[westAt].stop(); err != nil {
		t.Fatal(err)
	}
	hubWest := hubClient(t, "west")
	flood := floodParts(floodLimit + 50)
	// Written at once, unthrottled (client-go's 5 a second took 50 s);
	// the rewrites below keep a member client's pace.
	floodWriter := hubClientQPS(t, "west", -1)
	for _, p := range flood {
		if err := floodWriter.Create(ctx, p); err != nil {
			t.Fatalf("west's identity could not write part %s (the test's premise): %v", p.Name, err)
		}
	}
	for _, at := range []int{memberAt("north"), memberAt("east")} {
		sample := `mcs_syncer_publications_over_limit_total{source="west"}`
		eventually(ctx, t, bed.Clusters[at].Name+" to leave out what is over the limit, and say so", func() error {
			if v, err := procs[at].metric(ctx, sample); err != nil || v < float64(len(flood)-floodLimit) {
				return fmt.Errorf("%s = %v (%v), want at least %d", sample, v, err, len(flood)-floodLimit)
			}
			return leavesOut(ctx, procs[at], "west", len(flood)-floodLimit)
		})
	}
	eventually(ctx, t, "north's import of the flooded Service to say that west's publication is incomplete", func() error {
		si := &mcsv1beta1.ServiceImport{}
		if err := north.Get(ctx, types.NamespacedName{Namespace: ns, Name: "spam"}, si); err != nil {
			return err
		}
		ready := meta.FindStatusCondition(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))
		if ready == nil || !strings.HasPrefix(ready.Message, "incomplete: [west]") {
			return fmt.Errorf("Ready %+v", ready)
		}
		return warningEvent(ctx, north, ns, "spam", imports.ReasonPublicationIncomplete)()
	})
	rewriting, stopRewriting := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rewriteParts(rewriting, hubWest, flood)
	}()
	during := changeLatencies(ctx, t, east, north, slice, 5, 5)
	stopRewriting()
	wg.Wait()

	p50 := func(d []time.Duration) time.Duration { return slices.Sorted(slices.Values(d))[len(d)/2] }
	b, d := p50(before), p50(during)
	t.Logf("a change of east's reaching north, p50 of 5: before the flood %v, during it %v (%.2fx); before %v, during %v", b, d, float64(d)/float64(b), before, during)
	if d > 2*b && d-b > 250*time.Millisecond {
		t.Errorf("during west's flood a change of east's took %v to reach north (p50), over twice the %v it took before", d, b)
	}
	for _, consumer := range []client.Client{north, east} {
		if err := importedEndpoints(ctx, consumer, ns, "web", "west", 2)(); err != nil {
			t.Errorf("west's web, published within the limit, after the flood: %v", err)
		}
	}

	// West's mcs-syncer back: it deletes the flood.
	p, err := startMemberSyncer(ctx, bed.HubConfigPath("west"), "west", "--max-publications-per-member", fmt.Sprint(floodLimit))
	if err != nil {
		t.Fatal(err)
	}
	procs[westAt] = p
	// The flood's own names are counted, not west's publications: those of
	// earlier tests' namespaces, still being deleted, may leave meanwhile
	// (a CI run saw 10 before the flood and 3 after it).
	// One list a look: a Get of each part took 50 s at client-go's 5
	// requests a second.
	flooded := map[string]bool{}
	for _, p := range flood {
		flooded[p.Name] = true
	}
	eventually(ctx, t, "west's mcs-syncer to delete the flood", func() error {
		var list v1alpha1.PublishedExportList
		if err := hubWest.List(ctx, &list, client.InNamespace(testbed.HubNamespace), client.MatchingLabels{mcsv1beta1.LabelSourceCluster: "west"}); err != nil {
			return err
		}
		left := 0
		for _, p := range list.Items {
			if flooded[p.Name] {
				left++
			}
		}
		if left > 0 {
			return fmt.Errorf("%d of the flood's %d parts are still in the hub", left, len(flood))
		}
		return importedEndpoints(ctx, north, ns, "web", "west", 2)()
	})
}

// memberAt is the index of the member named name in bed.Clusters (and so
// in the processes started for them).
func memberAt(name string) int {
	return slices.IndexFunc(bed.Clusters, func(c *testbed.Cluster) bool { return c.Name == name })
}

// memberPublications counts the objects that member publishes into the hub.
func memberPublications(ctx context.Context, t *testing.T, member string) int {
	t.Helper()
	var list v1alpha1.PublishedExportList
	if err := hubClient(t, "").List(ctx, &list, client.InNamespace(testbed.HubNamespace), client.MatchingLabels{mcsv1beta1.LabelSourceCluster: member}); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

// floodParts are the head and n parts of west's (as its publisher would
// write them) of Service trust-flood/spam, one endpoint each.
func floodParts(n int) []*v1alpha1.PublishedExport {
	es := &clusterset.ExportedService{Cluster: "west", Key: types.NamespacedName{Namespace: "trust-flood", Name: "spam"}, ExportCreated: metav1.Now(),
		Spec: clusterset.ExportedSpec{Type: mcsv1beta1.ClusterSetIP, Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}}
	var endpoints []discoveryv1.Endpoint
	for i, address := range manyIPs(n) {
		endpoints = append(endpoints, podEndpoint("trust-flood", "spam", address, i))
	}
	es.Endpoints = []reconciler.EndpointGroup{{AddressType: discoveryv1.AddressTypeIPv4, Endpoints: endpoints}}
	head, parts := publish.EncodeParts(es, testbed.HubNamespace, 1)
	return append([]*v1alpha1.PublishedExport{head}, parts...)
}

// leavesOut checks that p's /members says it leaves out at least n of
// member's publications.
func leavesOut(ctx context.Context, p *syncerProcess, member string, n int) error {
	view, err := p.Members(ctx)
	if err != nil {
		return err
	}
	for _, m := range view.Members {
		if m.ID == member {
			if m.PublicationsLeftOut < n {
				return fmt.Errorf("/members says %d of %s's publications are left out, want at least %d", m.PublicationsLeftOut, member, n)
			}
			return nil
		}
	}
	return fmt.Errorf("/members lists no %s", member)
}

// rewriteParts rewrites parts (a label changed) one after another, every
// 20 ms, until ctx ends: a flood that goes on.
func rewriteParts(ctx context.Context, cl client.Client, parts []*v1alpha1.PublishedExport) {
	for i := 0; ctx.Err() == nil; i++ {
		p := &v1alpha1.PublishedExport{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(parts[i%len(parts)]), p); err == nil {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations["e2e.mcs-syncer/flood"] = fmt.Sprint(i)
			_ = cl.Update(ctx, p)
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// changeLatencies adds n addresses, one change at a time, to east's
// source slice of lat (from 10.161.1.<first+1> on), and returns how long
// each took from its write to north's imported slices holding it (a
// watch of north's slices, opened before the write).
func changeLatencies(ctx context.Context, t *testing.T, east, north client.Client, slice *discoveryv1.EndpointSlice, n, first int) []time.Duration {
	t.Helper()
	var out []time.Duration
	for i := 0; i < n; i++ {
		address := fmt.Sprintf("10.161.1.%d", first+i+1)
		arrived := make(chan time.Time, 1)
		watchCtx, stop := context.WithCancel(ctx)
		synced := make(chan struct{})
		var once sync.Once
		ended := watchSlices(watchCtx, t, "north", slice.Namespace, mcsv1beta1.LabelServiceName+"=lat", func(e watch.Event, held map[string]*discoveryv1.EndpointSlice) bool {
			once.Do(func() { close(synced) })
			if readyAddresses(slicesOf(held))[address] > 0 {
				arrived <- time.Now()
				return false
			}
			return true
		})
		// The watch's first events are the slices north holds now.
		select {
		case <-synced:
		case <-ctx.Done():
			t.Fatal("north's slices of lat never listed")
		}
		current := &discoveryv1.EndpointSlice{}
		if err := east.Get(ctx, client.ObjectKeyFromObject(slice), current); err != nil {
			t.Fatal(err)
		}
		current.Endpoints = append(current.Endpoints, podEndpoint(slice.Namespace, "lat", address, 100+first+i))
		start := time.Now()
		if err := east.Update(ctx, current); err != nil {
			t.Fatal(err)
		}
		select {
		case at := <-arrived:
			out = append(out, at.Sub(start))
		case <-ctx.Done():
			t.Fatalf("%s never reached north", address)
		}
		stop()
		<-ended
	}
	return out
}

// slicesOf returns the slices of held.
func slicesOf(held map[string]*discoveryv1.EndpointSlice) []discoveryv1.EndpointSlice {
	out := make([]discoveryv1.EndpointSlice, 0, len(held))
	for _, s := range held {
		out = append(out, *s)
	}
	return out
}
