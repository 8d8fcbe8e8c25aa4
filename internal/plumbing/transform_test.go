package plumbing

import (
	"maps"
	"reflect"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestStripUnreadKeepsWhatIsRead(t *testing.T) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "demo", Labels: map[string]string{"app": "web"},
			Annotations:   map[string]string{lastApplied: `{"huge":true}`, "keep": "me"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Spec:   corev1.ServiceSpec{ClusterIP: "10.0.0.1", Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "1.2.3.4"}}}},
	}
	var transform cache.TransformFunc = StripUnread
	out, err := transform(svc)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Service)
	if got.ManagedFields != nil || got.Annotations[lastApplied] != "" || len(got.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("not stripped: %+v", got)
	}
	if got.Annotations["keep"] != "me" || got.Labels["app"] != "web" || got.Spec.ClusterIP != "10.0.0.1" || len(got.Spec.Ports) != 1 {
		t.Errorf("stripped too much: %+v", got)
	}
	if _, err := transform("not an object"); err != nil {
		t.Errorf("a value without metadata: %v", err)
	}
}

func TestKeysShareOneCopy(t *testing.T) {
	const key = "multicluster.kubernetes.io/source-cluster"
	k := NewKeys(key)
	decoded := func() map[string]string {
		// As a decoder gives it: a key of its own.
		return map[string]string{string([]byte(key)): "east", "app": "web"}
	}
	a, b := k.Share(decoded()), k.Share(decoded())
	if !maps.Equal(a, decoded()) || !maps.Equal(b, decoded()) {
		t.Fatalf("shared labels %v, %v; want %v", a, b, decoded())
	}
	keyOf := func(m map[string]string) *byte {
		for key := range m {
			if key != "app" {
				return unsafe.StringData(key)
			}
		}
		return nil
	}
	if keyOf(a) != keyOf(b) || keyOf(a) != unsafe.StringData(key) {
		t.Error("two maps' equal keys are not one copy")
	}
	if other := map[string]string{"app": "web"}; reflect.ValueOf(k.Share(other)).UnsafePointer() != reflect.ValueOf(other).UnsafePointer() {
		t.Error("a map of no known key was copied")
	}
	if k.Share(nil) != nil {
		t.Error("no labels became a map")
	}
}
