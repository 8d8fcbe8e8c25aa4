package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/workloads"
)

// eventually polls check until it returns nil (see testbed.Eventually).
func eventually(ctx context.Context, t *testing.T, what string, check func() error) {
	t.Helper()
	testbed.Eventually(ctx, t, what, check)
}

// holds checks every second, for d, that check still passes, and fails t
// at once when it does not (what must not change while something is down).
func holds(ctx context.Context, t *testing.T, what string, d time.Duration, check func() error) {
	t.Helper()
	start := time.Now()
	for time.Since(start) < d {
		if err := check(); err != nil {
			t.Fatalf("%s, %s in: %v", what, time.Since(start).Round(time.Second), err)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// createNamespace creates a namespace named after the test in cluster c,
// ready for pods, and deletes it when the test ends.
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
	if err := testbed.WaitForPodsAllowed(ctx, cs, ns.Name); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// watchSlices watches consumer's EndpointSlices of ns matching selector
// and calls seen with each event and the slices then held, by name, until
// seen returns false or the watch ends (ctx); ended is closed then.
func watchSlices(ctx context.Context, t *testing.T, consumer, ns, selector string, seen func(watch.Event, map[string]*discoveryv1.EndpointSlice) bool) (ended <-chan struct{}) {
	t.Helper()
	cs, err := bed.Cluster(consumer).Kubernetes()
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.DiscoveryV1().EndpointSlices(ns).Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer w.Stop()
		held := map[string]*discoveryv1.EndpointSlice{}
		for e := range w.ResultChan() {
			s, ok := e.Object.(*discoveryv1.EndpointSlice)
			if !ok {
				continue
			}
			if e.Type == watch.Deleted {
				delete(held, s.Name)
			} else {
				held[s.Name] = s
			}
			if !seen(e, held) {
				return
			}
		}
	}()
	return done
}

// watchReady is watchSlices calling seen with each event's type and the
// number of ready endpoints the slices then hold together.
func watchReady(ctx context.Context, t *testing.T, consumer, ns, selector string, seen func(watch.EventType, int) bool) (ended <-chan struct{}) {
	t.Helper()
	return watchSlices(ctx, t, consumer, ns, selector, func(e watch.Event, held map[string]*discoveryv1.EndpointSlice) bool {
		total := 0
		for _, s := range held {
			total += workloads.CountReady(s.Endpoints)
		}
		return seen(e.Type, total)
	})
}
