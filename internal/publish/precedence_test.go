package publish

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// TestReaderTrustsTheServersClock: a head's creationTimestamp, which the
// publication server sets, is the export's FirstSeen; a head rewritten by
// its member with an exportCreated of 1970 is ordered no earlier than that
// (clusterset.ExportedService.Age), and a head deleted and created again
// (a wiped hub) keeps the FirstSeen it was first seen with.
func TestReaderTrustsTheServersClock(t *testing.T) {
	store := clusterset.NewStore()
	delayed := &delayed{}
	r := newReader("east", store, nil, nil)
	r.delay = delayed.add
	r.listed = true
	r.put(Marker("east", "mcs-system", 0))
	created := metav1.NewTime(export().ExportCreated.Add(time.Hour).Truncate(time.Second))
	head := Encode(export(), "mcs-system")
	head.CreationTimestamp = created
	r.put(head)
	got := store.GetFrom(webKey, "east")
	if got == nil || !got.FirstSeen.Equal(&created) || !got.Age().Equal(created.Time) {
		t.Fatalf("read %+v, want FirstSeen and Age %v", got, created)
	}

	forged := head.DeepCopy()
	forged.Spec.ExportCreated = metav1.NewTime(time.Unix(0, 0))
	r.put(forged)
	if got := store.GetFrom(webKey, "east"); !got.Age().Equal(created.Time) {
		t.Errorf("a claim of 1970 made the export's age %v, want %v", got.Age(), created)
	}

	// The hub wiped: the head deleted, then created again an hour later.
	r.remove(head)
	again := head.DeepCopy()
	again.CreationTimestamp = metav1.NewTime(created.Add(time.Hour))
	r.put(again)
	delayed.fire()
	if got := store.GetFrom(webKey, "east"); got == nil || !got.FirstSeen.Equal(&created) {
		t.Errorf("after the head was created again: %+v, want FirstSeen %v", got, created)
	}

	// Withdrawn from the Store meanwhile (the marker back before the head,
	// CI stop 38's order): the reader still knows when it first saw it.
	r.remove(again)
	delayed.fire()
	if got := store.GetFrom(webKey, "east"); got != nil {
		t.Fatalf("not withdrawn: %+v", got)
	}
	r.put(again)
	if got := store.GetFrom(webKey, "east"); got == nil || !got.FirstSeen.Equal(&created) {
		t.Errorf("after a withdrawal and a new head: %+v, want FirstSeen %v", got, created)
	}
}

// TestPublisherOrdersItsOwnAsReadersDo: the publisher hands its member's
// Store the creationTimestamp of the export's head, so that the member's
// own ServiceExport conditions order the export as every reader does.
func TestPublisherOrdersItsOwnAsReadersDo(t *testing.T) {
	store := clusterset.NewStore()
	created := metav1.NewTime(export().ExportCreated.Add(time.Minute))
	head := Encode(export(), "mcs-system")
	head.CreationTimestamp = created
	p, _ := publisherOf(t, store, head)
	store.BeginResync("east")
	store.Put(export())
	reconcileOK(t, p, webKey)
	if got := store.GetFrom(webKey, "east"); got == nil || !got.FirstSeen.Equal(&created) {
		t.Errorf("own export after a sync: %+v, want FirstSeen %v", got, created)
	}
}

// TestPublisherWarnsOfABackdatedHead: a head that claims an export time
// before the ServiceExport's creation (written by another holder of the
// member's identity) is rewritten with the ServiceExport's, and the export
// gets a Warning that says what was found; a head that is merely out of
// date (another port) is rewritten without one.
func TestPublisherWarnsOfABackdatedHead(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(*v1alpha1.PublishedExport)
		warned bool
	}{
		{"backdated", func(h *v1alpha1.PublishedExport) { h.Spec.ExportCreated = metav1.NewTime(time.Unix(0, 0)) }, true},
		{"out of date", func(h *v1alpha1.PublishedExport) { h.Spec.Ports = nil }, false},
		{"newer", func(h *v1alpha1.PublishedExport) {
			h.Spec.ExportCreated = metav1.NewTime(h.Spec.ExportCreated.Add(time.Hour))
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := clusterset.NewStore()
			head := EncodeHead(export(), "mcs-system")
			tc.edit(head)
			p, cl := publisherOf(t, store, head)
			var warnings []string
			p.opts.Warn = func(_ context.Context, key types.NamespacedName, reason, message string) {
				warnings = append(warnings, fmt.Sprintf("%s %s: %s", key, reason, message))
			}
			store.BeginResync("east")
			store.Put(export())
			reconcileOK(t, p, webKey)
			if got := publications(t, cl)["east.ns.web"]; got == nil || !got.Spec.ExportCreated.Equal(&export().ExportCreated) {
				t.Fatalf("head not rewritten: %+v", got)
			}
			if !tc.warned {
				if len(warnings) > 0 {
					t.Errorf("warned: %q", warnings)
				}
				return
			}
			want := "ns/web PublicationRewritten: the publication east.ns.web said the export was created at 1970-01-01T00:00:00Z, before this ServiceExport was (2026-01-02T03:04:05Z); rewritten"
			if len(warnings) != 1 || !strings.HasPrefix(warnings[0], want) {
				t.Errorf("warnings %q, want one starting %q", warnings, want)
			}
		})
	}
}

// TestReaderRefusesRestrictedNamespaces: a publication of a namespace the
// clusterset does not export from (kube-system by default) is refused and
// counted, whatever the member's own export side did; the others are read.
func TestReaderRefusesRestrictedNamespaces(t *testing.T) {
	store := clusterset.NewStore()
	r := newReader("east", store, nil, nil)
	r.namespaces = clusterset.NamespacePolicy{Own: "mcs-system"}
	before := refusedCount(t, r, "east")
	for _, ns := range []string{"kube-system", "mcs-system", "ns"} {
		es := export()
		es.Key.Namespace = ns
		r.put(Encode(es, "mcs-system"))
	}
	if n := refusedCount(t, r, "east") - before; n != 2 {
		t.Errorf("refusals counted %v, want 2", n)
	}
	if got := store.Keys(); len(got) != 1 || got[0] != webKey {
		t.Errorf("imported %v, want only %v", got, webKey)
	}
}

// part returns part i of east's ns/web with one endpoint.
func part(i int) *v1alpha1.PublishedExport {
	return encodePart("east", webKey, "mcs-system", strconv.Itoa(i), []v1alpha1.EndpointGroup{{AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)}}}}})
}

// TestReaderLimit: a reader holds at most MaxObjects heads and parts of its
// member: one past it is left out and counted, what is held keeps being
// read (an update of a held part), and what was left out is read once the
// member deletes some.
func TestReaderLimit(t *testing.T) {
	store := clusterset.NewStore()
	d := &demux{readers: map[clusterset.ClusterID]*Reader{}, seen: map[clusterset.ClusterID]map[string]*v1alpha1.PublishedExport{}}
	beats := NewHeartbeats()
	r := newReader("east", store, beats, nil)
	r.maxObjects = 3
	delayed := &delayed{}
	r.delay = delayed.add
	d.readers["east"] = r
	replayed := make(chan []string, 1)
	r.replay = func(names []string) { replayed <- names }
	r.listed = true
	d.put(Marker("east", "mcs-system", 0))
	d.put(Encode(export(), "mcs-system"))
	for i := range 4 {
		d.put(part(i))
	}
	before := testutil.ToFloat64(r.group.overLimit.WithLabelValues("east"))
	d.put(part(4))
	if got := testutil.ToFloat64(r.group.overLimit.WithLabelValues("east")) - before; got != 1 {
		t.Errorf("over the limit counted %v, want 1", got)
	}
	if got := store.GetFrom(webKey, "east"); got == nil || got.EndpointCount() != 3+2 || got.PartsLeftOut != 3 {
		t.Fatalf("held %+v, want the head's 3 endpoints and two parts', three parts left out", got)
	}
	if got := beats.LeftOut("east"); got != 3 {
		t.Errorf("the member's view says %d publications left out, want 3", got)
	}
	changed := part(0)
	changed.Spec.Endpoints[0].Endpoints[0].Addresses = []string{"10.9.9.9"}
	d.put(changed)
	held := func() (addresses []string) {
		for _, g := range store.GetFrom(webKey, "east").Endpoints {
			for _, e := range g.Endpoints {
				addresses = append(addresses, e.Addresses[0])
			}
		}
		return addresses
	}
	if got := held(); !slices.Contains(got, "10.9.9.9") {
		t.Errorf("a held part's update was not read: %v", got)
	}

	d.remove(part(1))
	delayed.fire()
	names := <-replayed
	if !slices.Equal(names, []string{part(2).Name, part(3).Name, part(4).Name}) {
		t.Errorf("replayed %v, want the three parts left out", names)
	}
	d.replay(r, names)
	if got := held(); len(got) != 5 || !slices.Contains(got, "10.1.0.3") {
		t.Errorf("after a part left: %v, want the head's 3, part 0's and part 2's (10.1.0.3)", got)
	}
	if got := testutil.ToFloat64(r.group.overLimit.WithLabelValues("east")) - before; got != 1 {
		t.Errorf("over the limit counted %v after the replay, want 1: parts 3 and 4, left out again, were counted before", got)
	}
	if got := store.GetFrom(webKey, "east").PartsLeftOut; got != 2 {
		t.Errorf("after part 2 was read: %d parts left out, want 2", got)
	}
	// A part left out that the member deletes is no longer missing; the
	// last one read makes the export whole.
	d.remove(part(3))
	if got := store.GetFrom(webKey, "east").PartsLeftOut; got != 1 || beats.LeftOut("east") != 1 {
		t.Errorf("after part 3 left the hub: %d parts left out (%d publications), want 1", got, beats.LeftOut("east"))
	}
	d.remove(part(2))
	delayed.fire()
	d.replay(r, <-replayed)
	if got := store.GetFrom(webKey, "east"); got.PartsLeftOut != 0 || beats.LeftOut("east") != 0 || !slices.Contains(held(), "10.1.0.5") {
		t.Errorf("with room for every part: %d parts left out (%d publications), endpoints %v, want none left out and part 4's 10.1.0.5", got.PartsLeftOut, beats.LeftOut("east"), held())
	}
	if got := beats.LeftOut("east"); got != 0 {
		t.Errorf("the member's view says %d publications left out, want none", got)
	}
}

// TestReaderForgetsFirstSeenOfGoneHeads: what a reader remembers of heads
// it no longer holds is bounded, however many names a member publishes
// and withdraws.
func TestReaderForgetsFirstSeenOfGoneHeads(t *testing.T) {
	r := newReader("east", clusterset.NewStore(), nil, nil)
	r.maxObjects = 2
	delayed := &delayed{}
	r.delay = delayed.add
	for i := range 20 {
		es := export()
		es.Key.Name = fmt.Sprintf("web-%d", i)
		head := Encode(es, "mcs-system")
		head.CreationTimestamp = metav1.NewTime(time.Unix(int64(i), 0))
		r.put(head)
		r.remove(head)
		delayed.fire()
	}
	if n := len(r.firstSeen); n > 2*r.maxObjects {
		t.Errorf("remembers %d heads, want at most %d", n, 2*r.maxObjects)
	}
}

// TestReaderByteLimit: within MaxObjects, a reader holds at most MaxBytes
// of its member's heads and parts: a part past it is left out, counted and
// shown as one past MaxObjects is; a held part that grows past it is let
// go of and left out; room made by a deletion reads it again; the count
// of bytes goes back to the head's alone when the parts are gone.
func TestReaderByteLimit(t *testing.T) {
	store := clusterset.NewStore()
	beats := NewHeartbeats()
	r, delayed := syncedReader(store, beats)
	replayed := make(chan []string, 4)
	r.replay = func(names []string) { replayed <- names }
	head := EncodeHead(export(), "mcs-system")
	r.maxBytes = heldBytes(head) + 2*heldBytes(part(0)) + 10
	r.put(head)
	for i := range 3 {
		r.put(part(i))
	}
	if got := store.GetFrom(webKey, "east"); got.EndpointCount() != 2 || got.PartsLeftOut != 1 || beats.LeftOut("east") != 1 {
		t.Fatalf("holds %d endpoints, %d parts left out (%d publications), want 2 and 1", got.EndpointCount(), got.PartsLeftOut, beats.LeftOut("east"))
	}
	grown := part(1)
	for i := range 20 {
		grown.Spec.Endpoints[0].Endpoints = append(grown.Spec.Endpoints[0].Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.2.0.%d", i+1)}})
	}
	r.put(grown)
	if got := store.GetFrom(webKey, "east"); got.EndpointCount() != 1 || got.PartsLeftOut != 2 {
		t.Errorf("after part 1 grew past the bound: %d endpoints, %d parts left out, want part 0's and 2", got.EndpointCount(), got.PartsLeftOut)
	}
	<-replayed // part 1 let go of: the parts left out are tried again
	r.remove(part(0))
	delayed.fire()
	for _, name := range <-replayed {
		if name == part(2).Name {
			r.put(part(2))
		}
	}
	if got := store.GetFrom(webKey, "east"); got.EndpointCount() != 1 || got.PartsLeftOut != 1 {
		t.Errorf("after part 0 left: %d endpoints, %d parts left out, want part 2's and part 1 left out", got.EndpointCount(), got.PartsLeftOut)
	}
	r.remove(part(2))
	delayed.fire()
	r.remove(grown)
	if r.bytes != heldBytes(head) || r.held != 1 {
		t.Errorf("the parts gone: %d bytes in %d publications held, want the head's %d in 1", r.bytes, r.held, heldBytes(head))
	}
}

// TestHeldBytesEstimatesJSON: the reader's estimate of a publication's
// size is within a fifth of its JSON for what publishers write: a head, a
// head with every endpoint (whole), parts of Pods' endpoints, and an
// endpoint with every field.
func TestHeldBytesEstimatesJSON(t *testing.T) {
	big := withEndpoints(999)
	head, parts := EncodeParts(big, "mcs-system", DefaultMaxEndpointsPerPart)
	full := export()
	full.Endpoints[0].Endpoints[0].Hostname = ptr.To("web-0")
	full.Endpoints[0].Endpoints[0].Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "zone-a"}}}
	full.Spec.Labels = map[string]string{"app.kubernetes.io/name": "web", "tier": "frontend"}
	cases := map[string]*v1alpha1.PublishedExport{
		"a head": head, "a part of Pods": parts[0], "the last part": parts[len(parts)-1],
		"whole": Encode(withEndpoints(300), "mcs-system"), "every field": Encode(full, "mcs-system"),
	}
	for name, p := range cases {
		encoded, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: estimated %d bytes, encoded %d", name, heldBytes(p), len(encoded))
		if got, want := float64(heldBytes(p)), float64(len(encoded)); got < 0.8*want || got > 1.2*want {
			t.Errorf("%s: estimated %v bytes, encoded %v", name, got, want)
		}
	}
}
