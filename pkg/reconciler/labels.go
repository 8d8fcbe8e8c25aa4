package reconciler

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Labeler decides the labels and annotations of an owner's slices. The
// reconciler adds endpointslice.kubernetes.io/managed-by itself (a Labeler
// cannot change it) and manages the last-change-trigger-time annotation.
//
// Labels are set exactly: a slice whose labels differ from Labels is
// updated. Annotations are merged: the keys returned are set, and keys that
// others put on a slice survive.
type Labeler interface {
	SliceMetadata() (labels, annotations map[string]string)
}

// LabelerFunc adapts a function to a Labeler.
type LabelerFunc func() (labels, annotations map[string]string)

// SliceMetadata calls f.
func (f LabelerFunc) SliceMetadata() (labels, annotations map[string]string) { return f() }

// ServiceLabels labels slices the way the Kubernetes EndpointSlice
// controller does for a Service: the Service's labels, except the reserved
// keys below (which a Service cannot set on its slices), plus
// kubernetes.io/service-name=<service> and, for headless Services,
// service.kubernetes.io/headless. No annotations.
type ServiceLabels struct {
	Service *corev1.Service
}

// reservedSliceLabels are set by the reconciler or ServiceLabels, never
// copied from the Service.
var reservedSliceLabels = []string{
	discoveryv1.LabelManagedBy,
	discoveryv1.LabelServiceName,
	corev1.IsHeadlessService,
}

// SliceMetadata implements Labeler.
func (s ServiceLabels) SliceMetadata() (map[string]string, map[string]string) {
	labels := maps.Clone(s.Service.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	for _, k := range reservedSliceLabels {
		delete(labels, k)
	}
	labels[discoveryv1.LabelServiceName] = s.Service.Name
	if s.Service.Spec.ClusterIP == corev1.ClusterIPNone {
		labels[corev1.IsHeadlessService] = ""
	}
	return labels, nil
}
