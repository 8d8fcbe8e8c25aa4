package imports

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// maxAddressesPerEndpoint is the discovery API's bound on one endpoint's
// addresses.
const maxAddressesPerEndpoint = 100

// Unimportable says why a consumer's API server would refuse endpoint in
// an EndpointSlice of addressType ("" when it would not). The rules are
// those of the EndpointSlice validation of the Kubernetes version we pin
// (k8s.io/kubernetes v1.36.3, pkg/apis/discovery/validation,
// validateEndpoints): one to 100 addresses, each a valid IP of the slice's
// family in canonical form, and none unspecified, loopback, link-local or
// link-local multicast (ValidateEndpointIP); a hostname that is a DNS-1123
// label and a nodeName that is a DNS-1123 subdomain. Canonical form is the
// strict rule (StrictIPCIDRValidation): an address that passes it passes
// the legacy rule as well.
//
// Such an endpoint is left out of the import and counted; the others of
// the same slice are imported. Written as they were, one refused endpoint
// made the API server refuse its whole slice, on every try.
func Unimportable(addressType discoveryv1.AddressType, endpoint *discoveryv1.Endpoint) string {
	switch n := len(endpoint.Addresses); {
	case n == 0:
		return "it has no address"
	case n > maxAddressesPerEndpoint:
		return fmt.Sprintf("it has %d addresses, over the %d an endpoint may have", n, maxAddressesPerEndpoint)
	}
	for _, address := range endpoint.Addresses {
		if why := refusedAddress(addressType, address); why != "" {
			return fmt.Sprintf("%q %s", address, why)
		}
	}
	if h := endpoint.Hostname; h != nil {
		if errs := validation.IsDNS1123Label(*h); len(errs) > 0 {
			return fmt.Sprintf("hostname %q: %s", *h, strings.Join(errs, "; "))
		}
	}
	if n := endpoint.NodeName; n != nil {
		if errs := validation.IsDNS1123Subdomain(*n); len(errs) > 0 {
			return fmt.Sprintf("nodeName %q: %s", *n, strings.Join(errs, "; "))
		}
	}
	return ""
}

// refusedAddress says why address may not stand in an EndpointSlice of
// addressType, in the API server's words where it has them.
func refusedAddress(addressType discoveryv1.AddressType, address string) string {
	ip, err := netip.ParseAddr(address)
	var canonical [len("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")]byte // an IPv6 address's longest form
	switch {
	case err != nil || ip.Zone() != "":
		return "is not a valid IP address"
	case addressType == discoveryv1.AddressTypeIPv4 && !ip.Is4():
		return "must be an IPv4 address"
	case addressType == discoveryv1.AddressTypeIPv6 && (!ip.Is6() || ip.Is4In6()):
		return "must be an IPv6 address"
	case ip.Is6() && string(ip.AppendTo(canonical[:0])) != address: // an IPv4 address that parses is canonical; no allocation per endpoint
		return fmt.Sprintf("must be in canonical form (%q)", ip.String())
	case ip.IsUnspecified():
		return "may not be unspecified"
	case ip.IsLoopback():
		return "may not be in the loopback range (127.0.0.0/8, ::1/128)"
	case ip.IsLinkLocalUnicast():
		return "may not be in the link-local range (169.254.0.0/16, fe80::/10)"
	case ip.IsLinkLocalMulticast():
		return "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"
	}
	return ""
}

// leftOut counts the endpoints of one export that an import cannot carry.
type leftOut struct {
	// otherType: FQDN endpoints, or of an IP family the import lacks.
	otherType int
	// refused: endpoints the consumer's API server would refuse
	// (unimportable); example says why, for the first of them.
	refused int
	example string
	// outside: endpoints with an address outside the address ranges the
	// clusterset config gives their source (outsideRanges); outsideExample
	// names the first.
	outside        int
	outsideExample string
}

func (l leftOut) total() int { return l.otherType + l.refused + l.outside }

// String says why, in words that stay the same while the endpoints do
// (an event quoting it aggregates).
func (l leftOut) String() string {
	var whys []string
	if l.otherType > 0 {
		whys = append(whys, fmt.Sprintf("%d of an address type the import lacks (FQDN endpoints, or an IP family the Service does not have)", l.otherType))
	}
	if l.refused > 0 {
		whys = append(whys, fmt.Sprintf("%d that the API server refuses in an EndpointSlice (e.g. %s)", l.refused, l.example))
	}
	if l.outside > 0 {
		whys = append(whys, fmt.Sprintf("%d outside the address ranges the clusterset config gives their cluster (e.g. %s)", l.outside, l.outsideExample))
	}
	return strings.Join(whys, ", and ")
}

// importableOnly returns g's endpoints less those unimportable says the
// API server refuses, and (ranges set) those with an address outside
// ranges, counted in left. g's own slice is never changed (it is the
// Store's): a copy is made when something is left out.
func importableOnly(endpoints []discoveryv1.Endpoint, addressType discoveryv1.AddressType, ranges []netip.Prefix, left *leftOut) []discoveryv1.Endpoint {
	var kept []discoveryv1.Endpoint
	for i := range endpoints {
		why := Unimportable(addressType, &endpoints[i])
		outside := ""
		if why == "" {
			outside = outsideRanges(&endpoints[i], ranges)
		}
		if why == "" && outside == "" {
			if kept != nil {
				kept = append(kept, endpoints[i])
			}
			continue
		}
		if kept == nil {
			kept = append(make([]discoveryv1.Endpoint, 0, len(endpoints)-1), endpoints[:i]...)
		}
		switch {
		case why != "":
			if left.refused == 0 {
				left.example = why
			}
			left.refused++
		default:
			if left.outside == 0 {
				left.outsideExample = outside
			}
			left.outside++
		}
	}
	if kept == nil {
		return endpoints
	}
	return kept
}

// outsideRanges names the first of endpoint's addresses that no prefix of
// ranges holds ("" when all are held, or ranges is empty: no limit). The
// addresses were checked by Unimportable first.
func outsideRanges(endpoint *discoveryv1.Endpoint, ranges []netip.Prefix) string {
	if len(ranges) == 0 {
		return ""
	}
	for _, address := range endpoint.Addresses {
		ip, err := netip.ParseAddr(address)
		if err != nil || !slices.ContainsFunc(ranges, func(p netip.Prefix) bool { return p.Contains(ip) }) {
			return strconv.Quote(address)
		}
	}
	return ""
}
