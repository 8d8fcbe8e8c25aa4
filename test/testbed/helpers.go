package testbed

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Helpers that the tests of several packages share.

// ClientOf returns a client of the named cluster, failing t if there is
// none.
func (cs *Clusterset) ClientOf(t testing.TB, name string) client.Client {
	t.Helper()
	c := cs.Cluster(name)
	if c == nil {
		t.Fatalf("testbed: no cluster %q", name)
	}
	cl, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// Namespace creates namespace name in the named clusters (every cluster
// when none is named) and deletes it when the test ends.
func (cs *Clusterset) Namespace(ctx context.Context, t testing.TB, name string, clusters ...string) {
	t.Helper()
	if len(clusters) == 0 {
		for _, c := range cs.Clusters {
			clusters = append(clusters, c.Name)
		}
	}
	for _, c := range clusters {
		cl := cs.ClientOf(t, c)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := createNamespace(ctx, cl, ns); err != nil {
			t.Fatalf("cluster %s: %v", c, err)
		}
		t.Cleanup(func() { _ = cl.Delete(context.Background(), ns) })
	}
}

// createNamespace creates ns; one of the same name that an earlier run of
// the test deleted (its contents are still being collected) is waited for
// until ctx ends, so that a test can run again at once (go test -count=N).
func createNamespace(ctx context.Context, cl client.Client, ns *corev1.Namespace) error {
	for {
		err := cl.Create(ctx, ns.DeepCopy())
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		old := &corev1.Namespace{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(ns), old); client.IgnoreNotFound(err) != nil {
			return err
		} else if err == nil && old.DeletionTimestamp == nil {
			return fmt.Errorf("namespace %s already exists (left over from an earlier run?)", ns.Name)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s of an earlier run is still being deleted: %w", ns.Name, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

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
