package imports

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// TestUnimportable: the EndpointSlice validation of the pinned Kubernetes
// (validateEndpoints, ValidateEndpointIP) as the import side applies it
// per endpoint. test/e2e's TestSpecialAddressesLeftOut shows a real API
// server refusing each refused address here.
func TestUnimportable(t *testing.T) {
	v4, v6 := discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6
	for _, tc := range []struct {
		addressType discoveryv1.AddressType
		endpoint    discoveryv1.Endpoint
		want        string // a part of the reason; "" importable
	}{
		{v4, discoveryv1.Endpoint{Addresses: []string{"10.1.0.1"}}, ""},
		{v6, discoveryv1.Endpoint{Addresses: []string{"fd00::1"}}, ""},
		{v4, discoveryv1.Endpoint{Addresses: []string{"10.1.0.1"}, Hostname: ptr.To("web-0"), NodeName: ptr.To("node-a.zone-1")}, ""},
		{v4, discoveryv1.Endpoint{}, "no address"},
		{v4, discoveryv1.Endpoint{Addresses: make([]string, 101)}, "101 addresses"},
		{v4, discoveryv1.Endpoint{Addresses: []string{"0.0.0.0"}}, "unspecified"},
		{v4, discoveryv1.Endpoint{Addresses: []string{"127.0.0.1"}}, "loopback"},
		{v4, discoveryv1.Endpoint{Addresses: []string{"169.254.169.254"}}, "link-local range"},
		{v4, discoveryv1.Endpoint{Addresses: []string{"224.0.0.1"}}, "link-local multicast"},
		{v6, discoveryv1.Endpoint{Addresses: []string{"::"}}, "unspecified"},
		{v6, discoveryv1.Endpoint{Addresses: []string{"::1"}}, "loopback"},
		{v6, discoveryv1.Endpoint{Addresses: []string{"fe80::1"}}, "link-local range"},
		{v6, discoveryv1.Endpoint{Addresses: []string{"ff02::1"}}, "link-local multicast"},
		{v6, discoveryv1.Endpoint{Addresses: []string{"FD00::1"}}, "canonical form"},
		{v6, discoveryv1.Endpoint{Addresses: []string{"::ffff:10.1.0.1"}}, "must be an IPv6 address"},
		{v4, discoveryv1.Endpoint{Addresses: []string{"fd00::1"}}, "must be an IPv4 address"},
		{v4, discoveryv1.Endpoint{Addresses: []string{"010.1.0.1"}}, "not a valid IP"},
		{v4, discoveryv1.Endpoint{Addresses: []string{"10.1.0.1", "127.0.0.1"}}, `"127.0.0.1" may not be in the loopback`},
		{v4, discoveryv1.Endpoint{Addresses: []string{"10.1.0.1"}, Hostname: ptr.To("Web_0")}, "hostname"},
		{v4, discoveryv1.Endpoint{Addresses: []string{"10.1.0.1"}, NodeName: ptr.To("node/a")}, "nodeName"},
	} {
		got := Unimportable(tc.addressType, &tc.endpoint)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s %v: %q, want %q", tc.addressType, tc.endpoint.Addresses, got, tc.want)
		}
	}
}

// TestSpecialAddressesLeftOut: an export whose slice holds addresses the
// consumer's API server refuses (a publication written by hand, say)
// beside a valid one: the valid one is imported, the others are counted
// and named in one event, and the Store's endpoints are left as they were.
func TestSpecialAddressesLeftOut(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Options{Metrics: m})
	es := h.export("east", 0, "0.0.0.0", "127.0.0.1", "169.254.169.254", "224.0.0.1", "10.1.0.1")
	h.put(es)
	h.reconcile()
	if got := h.slicesBySource()["east"]; len(got) != 1 || got[0] != "10.1.0.1" {
		t.Errorf("imported %v, want only 10.1.0.1", got)
	}
	if got := testutil.ToFloat64(m.unimportable.vec.WithLabelValues("east", "north")); got != 4 {
		t.Errorf("unimportable_endpoints %v, want 4", got)
	}
	if ev := h.events(); len(ev) != 1 || !strings.Contains(ev[0], "4 endpoints from east are not imported: 4 that the API server refuses") {
		t.Errorf("events %q", ev)
	}
	if n := len(es.Endpoints[0].Endpoints); n != 5 {
		t.Errorf("the Store's export now has %d endpoints, want its 5", n)
	}
	h.takeWrites()
	h.reconcile()
	if w, ev := h.takeWrites(), h.events(); len(w) != 0 || len(ev) != 0 {
		t.Errorf("again: writes %v, events %v; want none", w, ev)
	}
}

// TestAddressesOutsideTheirRangesLeftOut: with address ranges given for
// east, its endpoints outside them are left out, counted and evented, the
// others imported; west, without ranges, is not limited.
func TestAddressesOutsideTheirRangesLeftOut(t *testing.T) {
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Options{Metrics: m, AddressRanges: map[clusterset.ClusterID][]netip.Prefix{
		"east": {netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("10.9.9.0/24")},
	}})
	h.put(h.export("east", 0, "10.1.0.1", "10.2.0.1", "10.9.9.9"))
	h.put(h.export("west", 0, "10.3.0.1"))
	h.reconcile()
	bySource := h.slicesBySource()
	if got := bySource["east"]; !slices.Equal(got, []string{"10.1.0.1", "10.9.9.9"}) {
		t.Errorf("imported from east %v, want 10.1.0.1 and 10.9.9.9", got)
	}
	if got := bySource["west"]; !slices.Equal(got, []string{"10.3.0.1"}) {
		t.Errorf("imported from west %v, want 10.3.0.1", got)
	}
	if got := testutil.ToFloat64(m.unimportable.vec.WithLabelValues("east", "north")); got != 1 {
		t.Errorf("unimportable_endpoints of east %v, want 1", got)
	}
	if ev := h.events(); len(ev) != 1 || !strings.Contains(ev[0], `1 outside the address ranges the clusterset config gives their cluster (e.g. "10.2.0.1")`) {
		t.Errorf("events %q", ev)
	}
}

func TestOutsideRanges(t *testing.T) {
	ranges := []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("fd00:1::/64")}
	for _, tc := range []struct {
		addresses []string
		ranges    []netip.Prefix
		want      string
	}{
		{[]string{"10.2.0.1"}, nil, ""},
		{[]string{"10.1.2.3"}, ranges, ""},
		{[]string{"fd00:1::5"}, ranges, ""},
		{[]string{"10.1.2.3", "10.2.0.1"}, ranges, `"10.2.0.1"`},
		{[]string{"fd00:2::5"}, ranges, `"fd00:2::5"`},
	} {
		if got := outsideRanges(&discoveryv1.Endpoint{Addresses: tc.addresses}, tc.ranges); got != tc.want {
			t.Errorf("%v in %v: %q, want %q", tc.addresses, tc.ranges, got, tc.want)
		}
	}
}
