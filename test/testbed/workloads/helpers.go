package workloads

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Helpers that the tests of several packages share.

// CreateApp creates in ns a Deployment "web" of replicas pods and a
// Service "web" with the given port (mutate, if given, changes the Service
// first), and with export a ServiceExport "web" too. It returns the
// Deployment, to scale.
func CreateApp(ctx context.Context, t testing.TB, cl client.Client, ns string, replicas, port int32, export bool, mutate func(*corev1.Service)) *appsv1.Deployment {
	t.Helper()
	svc := Service(ns, "web", port)
	if mutate != nil {
		mutate(svc)
	}
	d := Deployment(ns, "web", replicas)
	objs := []client.Object{d, svc}
	if export {
		objs = append(objs, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}})
	}
	for _, obj := range objs {
		if err := cl.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// ExportCondition returns the condition typ of ServiceExport ns/name, or an
// error if it has none.
func ExportCondition(ctx context.Context, cl client.Client, ns, name string, typ mcsv1beta1.ServiceExportConditionType) (*metav1.Condition, error) {
	se := &mcsv1beta1.ServiceExport{}
	if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, se); err != nil {
		return nil, err
	}
	c := meta.FindStatusCondition(se.Status.Conditions, string(typ))
	if c == nil {
		return nil, fmt.Errorf("ServiceExport %s/%s has no %s condition", ns, name, typ)
	}
	return c, nil
}

// CountReady counts the ready endpoints among eps.
func CountReady(eps []discoveryv1.Endpoint) int {
	n := 0
	for _, ep := range eps {
		if ptr.Deref(ep.Conditions.Ready, false) {
			n++
		}
	}
	return n
}
