package publish

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// withEndpoints returns east's export of web with n ready endpoints.
func withEndpoints(n int) *clusterset.ExportedService {
	es := export()
	g := es.Endpoints[0]
	g.Endpoints = nil
	for i := range n {
		g.Endpoints = append(g.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, NodeName: ptr.To("node-1"), Zone: ptr.To("zone-a"),
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: fmt.Sprintf("web-%d", i)}})
	}
	es.Endpoints[0] = g
	return es
}

// TestPublisherRefusesWhatDoesNotFit: published whole (a member's readers
// do not assemble parts), an export whose publication is over
// MaxPublicationBytes is not written (the etcd request limit refused
// 7,000 endpoints, silently before); the Store says why, naming the limit
// and the member that holds the publisher to the whole form, so that its
// Ready condition does; what was published before stays. Back under the
// limit, it is published and the reason cleared.
func TestPublisherRefusesWhatDoesNotFit(t *testing.T) {
	store := clusterset.NewStore()
	store.Put(withEndpoints(10))
	p, cl := publisherOf(t, store)
	p.opts.Readers = func() ([]clusterset.ClusterID, bool) { return []clusterset.ClusterID{"west"}, true }
	reconcileOK(t, p, webKey)
	before := publications(t, cl)[ObjectName("east", webKey)]

	store.Put(withEndpoints(12000))
	reconcileOK(t, p, webKey)
	why := p.opts.Feedback.Unpublished(webKey)
	if !strings.Contains(why, fmt.Sprint(MaxPublicationBytes)) || !strings.Contains(why, "12001 endpoints") || !strings.Contains(why, "while west reads whole publications only") {
		t.Errorf("unpublished because %q", why)
	}
	if after := publications(t, cl)[ObjectName("east", webKey)]; after.ResourceVersion != before.ResourceVersion {
		t.Error("the publication was rewritten")
	}

	store.Put(withEndpoints(3000)) // ~150 bytes each: fits
	reconcileOK(t, p, webKey)
	if why := p.opts.Feedback.Unpublished(webKey); why != "" {
		t.Errorf("3,000 endpoints unpublished: %s", why)
	}
	if got := publications(t, cl)[ObjectName("east", webKey)]; len(got.Spec.Endpoints[0].Endpoints) != 3000 {
		t.Errorf("published %d endpoints", len(got.Spec.Endpoints[0].Endpoints))
	}
}

// TestPublisherRecordsRefusals: a publisher that has not read its server
// yet says so; a write the publication server refuses (a revoked token)
// is recorded for the export's Ready condition, and the marker's for
// /readyz (Problem); both clear once writes go through.
func TestPublisherRecordsRefusals(t *testing.T) {
	store := syncedStore(export())
	refuse := true
	cl, own := fedByWrites(t, fakePublicationServer(t).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if refuse {
				return apierrors.NewUnauthorized("Unauthorized")
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build())
	p := &Publisher{opts: PublisherOptions{Cluster: "east", Namespace: "mcs-system", Store: store, Feedback: clusterset.NewFeedback()}, client: cl, apiReader: cl, own: own}
	if !strings.Contains(p.Problem(), "not been read yet") {
		t.Errorf("a publisher that has not read its server: problem %q", p.Problem())
	}
	if _, err := p.Reconcile(context.Background(), reconcile.Request{NamespacedName: webKey}); err == nil {
		t.Fatal("a refused write is no error")
	}
	if why := p.opts.Feedback.Unpublished(webKey); !strings.Contains(why, "Unauthorized") {
		t.Errorf("unpublished because %q", why)
	}
	refuse = false
	reconcileOK(t, p, webKey)
	if why := p.opts.Feedback.Unpublished(webKey); why != "" {
		t.Errorf("still unpublished: %q", why)
	}
	refuse = true
	if _, err := p.Reconcile(context.Background(), markerRequest); err == nil || !strings.Contains(p.Problem(), "Unauthorized") {
		t.Errorf("marker refused: %v, problem %q", err, p.Problem())
	}
	refuse = false
	reconcileOK(t, p, markerRequest.NamespacedName)
	if p.Problem() != "" {
		t.Errorf("problem %q after the marker was written", p.Problem())
	}
}

// TestDecodeRefusesTooManyPorts: a publication of more ports than an
// EndpointSlice may carry is refused (a hand-made one of 10,000 ports was
// imported before).
func TestDecodeRefusesTooManyPorts(t *testing.T) {
	es := exportWithPorts(MaxPorts + 1)
	if _, err := Decode(Encode(es, "mcs-system")); err == nil || !strings.Contains(err.Error(), "ports") {
		t.Errorf("decoded with %d ports: %v", len(es.Spec.Ports), err)
	}
}

// TestPublisherChecksWhatReadersCheck: an export that the readers would
// refuse (more ports than an EndpointSlice may carry) is not published,
// and its Ready condition hears why, instead of saying Exported while
// every reader drops it.
func TestPublisherChecksWhatReadersCheck(t *testing.T) {
	store := syncedStore(exportWithPorts(MaxPorts + 1))
	p, cl := publisherOf(t, store)
	reconcileOK(t, p, webKey)
	if why := p.opts.Feedback.Unpublished(webKey); !strings.Contains(why, "the other members would refuse its publication: spec.ports") {
		t.Errorf("unpublished because %q", why)
	}
	if got := publications(t, cl); len(got) != 0 {
		t.Errorf("published %v", got)
	}
}

// exportWithPorts is export() with n more ports.
func exportWithPorts(n int) *clusterset.ExportedService {
	es := export()
	for i := range n {
		es.Spec.Ports = append(es.Spec.Ports, mcsv1beta1.ServicePort{Name: fmt.Sprintf("p%d", i), Protocol: corev1.ProtocolTCP, Port: int32(1000 + i)})
	}
	return es
}

// TestPublisherChecksThePartsItWrites: in parts, an endpoint the readers
// would refuse refuses the export, naming the part that would carry it,
// in the same words at every try; the export published before stays.
// (The endpoint changed its address: it leaves its place in part 1 and
// is appended where there is room, part 1 again.)
func TestPublisherChecksThePartsItWrites(t *testing.T) {
	store := clusterset.NewStore()
	store.Put(withEndpoints(250))
	p, cl, _ := countingPublisher(t, store)
	reconcileOK(t, p, webKey)
	before := len(publications(t, cl))
	bad := withEndpoints(250)
	bad.Endpoints[0].Endpoints[120].Addresses = []string{"10.0.0.300"}
	store.Put(bad)
	var refusals []string
	for range 2 {
		reconcileOK(t, p, webKey)
		refusals = append(refusals, p.opts.Feedback.Unpublished(webKey))
	}
	if want := `the other members would refuse its publication: part 1: spec.endpoints[0].endpoints[99]: "10.0.0.300" is not an IPv4 address`; refusals[0] != want || refusals[1] != want {
		t.Errorf("refused because %q, then %q; want %q twice", refusals[0], refusals[1], want)
	}
	if got := len(publications(t, cl)); got != before {
		t.Errorf("%d publications after the refusal, %d before", got, before)
	}
}

// TestEncodedSizeCountsPartIDs: a head's size, its part IDs counted
// rather than encoded, is the size of its JSON to the byte.
func TestEncodedSizeCountsPartIDs(t *testing.T) {
	for _, n := range []int{100, 250, 50000} {
		head, _ := EncodeParts(withEndpoints(n), "mcs-system", DefaultMaxEndpointsPerPart)
		for _, ids := range [][]string{head.Spec.Parts, {"0"}, {"a-b", "z9"}, {"Not_A_Label"}} {
			head.Spec.Parts = ids
			raw, err := json.Marshal(head)
			if err != nil {
				t.Fatal(err)
			}
			if got := encodedSize(head); got != len(raw) {
				t.Errorf("%d endpoints, parts %v: encodedSize %d, JSON %d bytes", n, ids, got, len(raw))
			}
		}
	}
}
