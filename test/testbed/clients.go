package testbed

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

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
// when none is named) and deletes it when the test ends. It returns once
// the namespace takes pods: in a cluster whose controller manager gives
// namespaces a default ServiceAccount, once the namespace has it (the API
// server refuses pods until then; seen in CI on a loaded machine).
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
		kube, err := cs.Cluster(c).Kubernetes()
		if err != nil {
			t.Fatal(err)
		}
		if err := WaitForPodsAllowed(ctx, kube, name); err != nil {
			t.Fatalf("cluster %s: %v", c, err)
		}
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
