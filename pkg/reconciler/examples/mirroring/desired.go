//lint:file-ignore SA1019 the mirroring controller's input is the deprecated Endpoints API, by design

package main

import (
	"bytes"
	"cmp"
	"maps"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// maxPerSubset is kube-controller-manager's
// --mirroring-max-endpoints-per-subset default: addresses past it, per
// repacked subset (ready ones first), are not mirrored.
const maxPerSubset = 1000

// desired turns an Endpoints object into groups, as the mirroring
// controller does: its subsets repacked (each address with every port it
// has, not-ready winning over ready), at most maxPerSubset addresses per
// subset, each valid IP an endpoint of its family with only the ready
// condition, its hostname, nodeName and targetRef.
func desired(ep *corev1.Endpoints) []reconciler.EndpointGroup {
	var groups []reconciler.EndpointGroup
	for _, subset := range repack(ep.Subsets) {
		ports := make([]discoveryv1.EndpointPort, 0, len(subset.Ports))
		for _, p := range subset.Ports {
			ports = append(ports, discoveryv1.EndpointPort{Name: &p.Name, Port: &p.Port, Protocol: &p.Protocol, AppProtocol: p.AppProtocol})
		}
		byType := map[discoveryv1.AddressType][]discoveryv1.Endpoint{}
		added := 0
		for _, list := range []struct {
			addrs []corev1.EndpointAddress
			ready bool
		}{{subset.Addresses, true}, {subset.NotReadyAddresses, false}} {
			for _, a := range list.addrs {
				ip, err := netip.ParseAddr(a.IP)
				if err != nil || added >= maxPerSubset {
					continue
				}
				added++
				e := discoveryv1.Endpoint{Addresses: []string{ip.Unmap().String()},
					Conditions: discoveryv1.EndpointConditions{Ready: &list.ready}, TargetRef: a.TargetRef, NodeName: a.NodeName}
				if a.Hostname != "" {
					e.Hostname = &a.Hostname
				}
				typ := discoveryv1.AddressTypeIPv4
				if ip.Unmap().Is6() {
					typ = discoveryv1.AddressTypeIPv6
				}
				byType[typ] = append(byType[typ], e)
			}
		}
		for _, typ := range slices.Sorted(maps.Keys(byType)) {
			groups = append(groups, reconciler.EndpointGroup{AddressType: typ, Ports: ports, Endpoints: byType[typ]})
		}
	}
	return groups
}

// repack regroups subsets so that each address appears once, with every
// port it has in any subset (upstream's RepackSubsets). An address is an
// IP and a targetRef UID; if it is not ready for a port in any subset, it
// is not ready for that port.
func repack(subsets []corev1.EndpointSubset) []corev1.EndpointSubset {
	type key struct{ ip, uid string }
	first := map[key]corev1.EndpointAddress{}
	// readiness[port][address]; port -1 stands for a subset without ports.
	readiness := map[corev1.EndpointPort]map[key]bool{}
	for _, s := range subsets {
		ports := s.Ports
		if len(ports) == 0 {
			ports = []corev1.EndpointPort{{Port: -1}}
		}
		for _, list := range []struct {
			addrs []corev1.EndpointAddress
			ready bool
		}{{s.Addresses, true}, {s.NotReadyAddresses, false}} {
			for _, a := range list.addrs {
				k := key{ip: a.IP}
				if a.TargetRef != nil {
					k.uid = string(a.TargetRef.UID)
				}
				if _, ok := first[k]; !ok {
					first[k] = a
				}
				for _, p := range ports {
					if readiness[p] == nil {
						readiness[p] = map[key]bool{}
					}
					if was, ok := readiness[p][k]; !ok || was {
						readiness[p][k] = list.ready
					}
				}
			}
		}
	}
	// Ports with the same addresses and readiness form one subset.
	bySet := map[string]*corev1.EndpointSubset{}
	var order []string
	for p, addrs := range readiness {
		keys := slices.SortedFunc(maps.Keys(addrs), func(a, b key) int {
			return cmp.Or(bytes.Compare([]byte(a.ip), []byte(b.ip)), cmp.Compare(a.uid, b.uid))
		})
		var id bytes.Buffer
		for _, k := range keys {
			id.WriteString(k.ip + "/" + k.uid + "/" + map[bool]string{true: "r", false: "n"}[addrs[k]] + ";")
		}
		s, ok := bySet[id.String()]
		if !ok {
			s = &corev1.EndpointSubset{}
			for _, k := range keys {
				if addrs[k] {
					s.Addresses = append(s.Addresses, first[k])
				} else {
					s.NotReadyAddresses = append(s.NotReadyAddresses, first[k])
				}
			}
			bySet[id.String()] = s
			order = append(order, id.String())
		}
		if p.Port > 0 {
			s.Ports = append(s.Ports, p)
		}
	}
	out := make([]corev1.EndpointSubset, 0, len(order))
	for _, id := range order {
		out = append(out, *bySet[id])
	}
	return out
}
