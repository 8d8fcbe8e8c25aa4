package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcs-syncer/mcs-syncer/test/testbed"
)

// eventually polls check until it returns nil (see testbed.Eventually).
func eventually(ctx context.Context, t *testing.T, what string, check func() error) {
	t.Helper()
	testbed.Eventually(ctx, t, what, check)
}

// createNamespace creates a namespace named after the test in cluster c and
// deletes it when the test ends.
func createNamespace(ctx context.Context, t *testing.T, c *testbed.Cluster) string {
	t.Helper()
	cs, err := c.Kubernetes()
	if err != nil {
		t.Fatal(err)
	}
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: strings.TrimSuffix(name, "-") + "-"}}
	ns, err = cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}
