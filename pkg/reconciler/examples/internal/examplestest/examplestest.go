// Package examplestest holds what the examples' unit tests share beside
// reconcilertest's clientset: a controller run for the length of a test,
// and a poll for a namespace's EndpointSlices.
package examplestest

import (
	"context"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	k8stesting "k8s.io/client-go/testing"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler/examples/internal/run"
)

// Run builds a controller from setup with build (as run.Main does), starts
// setup's factories and runs the controller with workers until the test
// ends; then it waits for Run to return, fails t on its error and shuts the
// factories down. The context returned ends with the test.
func Run(t testing.TB, setup run.Setup, workers int, build func(run.Setup) (run.Controller, error)) context.Context {
	t.Helper()
	c, err := build(setup)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	setup.All.Start(ctx.Done())
	setup.Ours.Start(ctx.Done())
	setup.All.WaitForCacheSync(ctx.Done())
	setup.Ours.WaitForCacheSync(ctx.Done())
	if client, ok := setup.Client.(actionRecorder); ok {
		waitForWatches(t, client)
	}
	done := make(chan error)
	go func() { done <- c.Run(ctx, workers) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		setup.All.Shutdown()
		setup.Ours.Shutdown()
	})
	return ctx
}

// actionRecorder is a fake clientset: it records the actions it served.
type actionRecorder interface{ Actions() []k8stesting.Action }

// waitForWatches waits until every resource the informers listed is also
// watched. The fake clientset does not replay what happened between an
// informer's list and its watch: a slice the controller created in that
// gap would never reach its cache, nor would its deletion.
func waitForWatches(t testing.TB, client actionRecorder) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		listed, watched := map[string]bool{}, map[string]bool{}
		for _, a := range client.Actions() {
			switch a.GetVerb() {
			case "list":
				listed[a.GetResource().String()] = true
			case "watch":
				watched[a.GetResource().String()] = true
			}
		}
		for r := range listed {
			if !watched[r] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the informers' watches did not start: %v", err)
	}
}

// WaitSlices polls, for up to 10 s, until the EndpointSlices of namespace
// that match selector (a label selector, "" for all) satisfy ok, and
// returns them; it fails t with the last ones seen otherwise.
func WaitSlices(t testing.TB, client kubernetes.Interface, namespace, selector string, ok func([]discoveryv1.EndpointSlice) bool) []discoveryv1.EndpointSlice {
	t.Helper()
	var got []discoveryv1.EndpointSlice
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := client.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		got = list.Items
		return ok(got), nil
	})
	if err != nil {
		t.Fatalf("EndpointSlices of %s (%q): %v; last seen %+v", namespace, selector, err, got)
	}
	return got
}
