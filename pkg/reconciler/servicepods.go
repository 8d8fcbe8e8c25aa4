package reconciler

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// ErrNodeNotFound is returned (wrapped, with the pods concerned) by
// DesiredFromServicePods when a pod's node is unknown. The desired
// endpoints returned with it are still valid without those pods: reconcile
// them, and requeue to add the pods once their node is known.
var ErrNodeNotFound = errors.New("node not found")

// NodeGetter looks nodes up by name, typically from an informer's lister
// (a corelisters.NodeLister satisfies it). It returns an error for which
// apierrors.IsNotFound holds when the node does not exist.
type NodeGetter interface {
	Get(name string) (*corev1.Node, error)
}

// AddressTypesForService returns the address types a Service's slices
// have: one per IP family; a Service without families (a headless Service
// created before dual-stack) has both, and its pods' IPs decide.
func AddressTypesForService(svc *corev1.Service) []discoveryv1.AddressType {
	types := AddressTypesForIPFamilies(svc.Spec.IPFamilies)
	if len(types) == 0 {
		if ip, err := netip.ParseAddr(svc.Spec.ClusterIP); err == nil {
			if ip.Is4() {
				return []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4}
			}
			return []discoveryv1.AddressType{discoveryv1.AddressTypeIPv6}
		}
		types = []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6}
	}
	return types
}

// AddressTypesForIPFamilies returns the address type of each IP family, in
// order.
func AddressTypesForIPFamilies(families []corev1.IPFamily) []discoveryv1.AddressType {
	var types []discoveryv1.AddressType
	for _, family := range families {
		switch family {
		case corev1.IPv4Protocol:
			types = append(types, discoveryv1.AddressTypeIPv4)
		case corev1.IPv6Protocol:
			types = append(types, discoveryv1.AddressTypeIPv6)
		}
	}
	return types
}

// DesiredFromServicePods computes a Service's desired endpoints from the
// pods its selector matches, as the Kubernetes EndpointSlice controller
// does:
//   - pods without an IP, and pods that have terminated (Succeeded, Failed),
//     are left out; terminating pods (deletion timestamp set) stay in;
//   - each pod IP goes to the address type of its family;
//   - each service port is resolved against the pod (a named targetPort is
//     looked up in the pod's container ports with the same protocol); pods
//     whose ports resolve differently land in different groups, and a port
//     that does not resolve is left out for that pod;
//   - conditions per KEP-1672: serving = pod Ready; terminating =
//     deletion timestamp set; ready = publishNotReadyAddresses or (serving
//     and not terminating);
//   - hostname when the pod's hostname is set and its subdomain is the
//     Service's name (headless or not); nodeName; zone from the
//     node's topology.kubernetes.io/zone label; targetRef to the pod.
//
// A pod whose node is unknown is left out and reported in an error
// wrapping ErrNodeNotFound; the groups returned are valid regardless.
func DesiredFromServicePods(svc *corev1.Service, pods []*corev1.Pod, nodes NodeGetter) ([]EndpointGroup, []discoveryv1.AddressType, error) {
	addressTypes := AddressTypesForService(svc)
	type groupKey struct {
		addressType discoveryv1.AddressType
		ports       string
	}
	byKey := map[groupKey]int{}
	var groups []EndpointGroup
	var missingNodes []string

	for _, pod := range pods {
		if !podIncluded(pod) {
			continue
		}
		var node *corev1.Node
		if pod.Spec.NodeName != "" && nodes != nil {
			n, err := nodes.Get(pod.Spec.NodeName)
			if apierrors.IsNotFound(err) {
				missingNodes = append(missingNodes, pod.Name+" on "+pod.Spec.NodeName)
				continue
			}
			if err != nil {
				return nil, nil, fmt.Errorf("get node %s of pod %s/%s: %w", pod.Spec.NodeName, pod.Namespace, pod.Name, err)
			}
			node = n
		}
		ports := endpointPorts(svc, pod)
		pk := portKey(ports)
		for _, addressType := range addressTypes {
			ip := podIPOf(pod, addressType)
			if ip == "" {
				continue
			}
			key := groupKey{addressType, pk}
			i, ok := byKey[key]
			if !ok {
				i = len(groups)
				byKey[key] = i
				groups = append(groups, EndpointGroup{AddressType: addressType, Ports: ports})
			}
			groups[i].Endpoints = append(groups[i].Endpoints, podEndpoint(svc, pod, node, ip))
		}
	}
	if len(missingNodes) > 0 {
		return groups, addressTypes, fmt.Errorf("%w for pods %v; they are left out until it is", ErrNodeNotFound, missingNodes)
	}
	return groups, addressTypes, nil
}

// podIncluded reports whether a pod has endpoints at all: it has an IP and
// has not terminated.
func podIncluded(pod *corev1.Pod) bool {
	if pod.Status.PodIP == "" && len(pod.Status.PodIPs) == 0 {
		return false
	}
	return pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// podIPOf returns the pod's IP of the family of addressType, or "".
func podIPOf(pod *corev1.Pod, addressType discoveryv1.AddressType) string {
	ips := []string{pod.Status.PodIP}
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	for _, s := range ips {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		if (addressType == discoveryv1.AddressTypeIPv4) == ip.Is4() && addressType != discoveryv1.AddressTypeFQDN {
			return ip.String()
		}
	}
	return ""
}

func endpointPorts(svc *corev1.Service, pod *corev1.Pod) []discoveryv1.EndpointPort {
	ports := make([]discoveryv1.EndpointPort, 0, len(svc.Spec.Ports))
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		number, ok := resolveTargetPort(pod, sp)
		if !ok {
			continue
		}
		ports = append(ports, discoveryv1.EndpointPort{
			Name:        ptr.To(sp.Name),
			Port:        ptr.To(number),
			Protocol:    ptr.To(protocolOrTCP(sp.Protocol)),
			AppProtocol: sp.AppProtocol,
		})
	}
	return ports
}

// resolveTargetPort returns the pod port a service port sends to. A named
// targetPort is looked up in the containers' ports, then in those of the
// sidecars (init containers with restartPolicy Always), as upstream's
// FindPort does.
func resolveTargetPort(pod *corev1.Pod, sp *corev1.ServicePort) (int32, bool) {
	if sp.TargetPort.Type != intstr.String {
		if sp.TargetPort.IntVal == 0 {
			return sp.Port, true
		}
		return sp.TargetPort.IntVal, true
	}
	containers := slices.Clone(pod.Spec.Containers)
	for _, c := range pod.Spec.InitContainers {
		if ptr.Deref(c.RestartPolicy, "") == corev1.ContainerRestartPolicyAlways {
			containers = append(containers, c)
		}
	}
	for _, c := range containers {
		for _, p := range c.Ports {
			if p.Name == sp.TargetPort.StrVal && protocolOrTCP(p.Protocol) == protocolOrTCP(sp.Protocol) {
				return p.ContainerPort, true
			}
		}
	}
	return 0, false
}

// protocolOrTCP applies the API's default protocol.
func protocolOrTCP(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

func podEndpoint(svc *corev1.Service, pod *corev1.Pod, node *corev1.Node, ip string) discoveryv1.Endpoint {
	serving := podReady(pod)
	terminating := pod.DeletionTimestamp != nil
	ready := svc.Spec.PublishNotReadyAddresses || (serving && !terminating)
	ep := discoveryv1.Endpoint{
		Addresses:  []string{ip},
		Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating},
		TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
	}
	if pod.Spec.NodeName != "" {
		ep.NodeName = ptr.To(pod.Spec.NodeName)
	}
	if node != nil && node.Labels[corev1.LabelTopologyZone] != "" {
		ep.Zone = ptr.To(node.Labels[corev1.LabelTopologyZone])
	}
	if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && pod.Namespace == svc.Namespace {
		ep.Hostname = ptr.To(pod.Spec.Hostname)
	}
	return ep
}

func podReady(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}
