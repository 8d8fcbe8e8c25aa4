package controlplane

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
)

// createNodes registers the cluster's fake nodes and waits until kwok has
// made them Ready. Each carries its zone and its own pod CIDR, so the pods
// kwok starts on it get IPs inside the cluster's pod CIDR.
func (cp *ControlPlane) createNodes(ctx context.Context) error {
	cs, err := cp.Kubernetes()
	if err != nil {
		return err
	}
	for i, name := range cp.Nodes {
		cpu := resource.MustParse("32")
		if z := i / cp.nodesPerZone; z < len(cp.zoneCPU) {
			var err error
			if cpu, err = resource.ParseQuantity(cp.zoneCPU[z]); err != nil {
				return fmt.Errorf("testbed: CPU of zone %s: %w", cp.Zones[z], err)
			}
		}
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:    cpu,
			corev1.ResourceMemory: resource.MustParse("256Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
		}
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name: name,
				Labels: map[string]string{
					"kubernetes.io/hostname":        name,
					"kubernetes.io/os":              "linux",
					"kubernetes.io/arch":            "amd64",
					"topology.kubernetes.io/zone":   cp.Zones[i/cp.nodesPerZone],
					"topology.kubernetes.io/region": cp.Name,
					"type":                          "kwok",
				},
				Annotations: map[string]string{
					"kwok.x-k8s.io/node":           "fake",
					"node.alpha.kubernetes.io/ttl": "0",
				},
			},
			Spec: corev1.NodeSpec{
				PodCIDR:  cp.nodePodCIDR(i),
				PodCIDRs: []string{cp.nodePodCIDR(i)},
			},
			Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
		}
		if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", name, err)
		}
	}
	return host.PollUntil(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, n := range nodes.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready == len(cp.Nodes), nil
	})
}
