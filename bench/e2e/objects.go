package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// benchPort is the one port of every bench Service.
var benchPort = corev1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}

// endpointSlice returns a slice of `endpoints` ready endpoints of Service
// ns/service, managed by the bench, starting at address first.
func endpointSlice(ns, name, service, first string, endpoints int) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: service,
				discoveryv1.LabelManagedBy:   benchManager,
			},
			Annotations: map[string]string{corev1.EndpointsLastChangeTriggerTime: time.Now().UTC().Format(time.RFC3339Nano)},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(benchPort.Name), Protocol: ptr.To(benchPort.Protocol), Port: ptr.To(benchPort.Port)}},
	}
	base := parseIPv4(first)
	for j := range endpoints {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{formatIPv4(base + uint32(j))},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
		})
	}
	return s
}

func parseIPv4(s string) uint32 {
	var a, b, c, d uint32
	_, _ = fmt.Sscanf(s, "%d.%d.%d.%d", &a, &b, &c, &d)
	return a<<24 | b<<16 | c<<8 | d
}

func formatIPv4(v uint32) string {
	return fmt.Sprintf("%d.%d.%d.%d", v>>24, (v>>16)&255, (v>>8)&255, v&255)
}

// createExport creates, in cluster, a selector-less Service ns/name, its
// slice name-src of `endpoints` ready endpoints (addresses of bench owner
// o, see benchIP), and its ServiceExport.
func (b *bench) createExport(ctx context.Context, cluster string, o int, ns, name string, i, endpoints int) error {
	if err := b.createService(ctx, cluster, ns, name, benchIP(o, i, 0), endpoints); err != nil {
		return err
	}
	se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if err := b.ctrl[cluster].Create(ctx, se); err != nil {
		return fmt.Errorf("create ServiceExport %s/%s in %s: %w", ns, name, cluster, err)
	}
	return nil
}

// createService creates, in cluster, a selector-less Service ns/name and
// its slice name-src of `endpoints` ready endpoints from address first on.
func (b *bench) createService(ctx context.Context, cluster, ns, name, first string, endpoints int) error {
	cs := b.kube[cluster]
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{benchPort}},
	}
	if _, err := create(ctx, cs.CoreV1().Services(ns).Create, svc); err != nil {
		return err
	}
	_, err := create(ctx, cs.DiscoveryV1().EndpointSlices(ns).Create, endpointSlice(ns, name+"-src", name, first, endpoints))
	return err
}

// ensureNamespace creates namespace ns in every cluster.
func (b *bench) ensureNamespace(ctx context.Context, ns string) error {
	for _, c := range b.bed.Clusters {
		_, err := b.kube[c.Name].CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %s in %s: %w", ns, c.Name, err)
		}
	}
	return nil
}
