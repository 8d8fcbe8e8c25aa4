package plumbing

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
)

// lastApplied is the annotation `kubectl apply` keeps a whole copy of the
// object in.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// StripUnread is the cache transform of every cache mcs-syncer keeps: it
// drops what mcs-syncer never reads and what is often the largest part of
// an object — managedFields and kubectl's last-applied-configuration
// annotation of every object, and the status of Services (load-balancer
// ingress). Updates made from a cached copy send none of them: the API
// server keeps the stored managedFields, and ignores a Service's status on
// an update of the Service.
func StripUnread(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
		if a := m.GetAnnotations(); a[lastApplied] != "" {
			delete(a, lastApplied)
			m.SetAnnotations(a)
		}
	}
	if svc, ok := obj.(*corev1.Service); ok {
		svc.Status = corev1.ServiceStatus{}
	}
	return obj, nil
}
