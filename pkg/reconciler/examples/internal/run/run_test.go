package run

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
)

// TestWorkRetriesAFailedKey: a key whose sync fails is synced again (with
// the queue's backoff) until it succeeds, and then forgotten.
func TestWorkRetriesAFailedKey(t *testing.T) {
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	var mu sync.Mutex
	calls := 0
	succeeded := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- Work(ctx, queue, 2, nil, "key", func(_ context.Context, key string) error {
			mu.Lock()
			defer mu.Unlock()
			calls++
			if calls < 3 {
				return errors.New("not yet")
			}
			close(succeeded)
			return nil
		})
	}()
	queue.Add("ns/a")
	select {
	case <-succeeded:
	case <-time.After(30 * time.Second):
		t.Fatal("the key was not retried until it succeeded")
	}
	// Forget follows the successful sync's return: poll for it.
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return queue.NumRequeues("ns/a") == 0, nil
	}); err != nil {
		t.Errorf("requeues after success %d, want 0 (forgotten)", queue.NumRequeues("ns/a"))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !queue.ShuttingDown() {
		t.Error("the queue was not shut down")
	}
}

// TestStartRejectsBadFlags: the flags are checked before any client is
// built.
func TestStartRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		workers int
		qps     float32
		burst   int
		want    string
	}{
		{0, 20, 30, "--workers must be at least 1"},
		{1, 0, 30, "--kube-api-qps and --kube-api-burst must be positive"},
		{1, 20, 0, "--kube-api-qps and --kube-api-burst must be positive"},
	} {
		err := start("test", "/nonexistent", "x", tc.workers, tc.qps, tc.burst, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("workers %d, qps %v, burst %d: error %v, want %q", tc.workers, tc.qps, tc.burst, err, tc.want)
		}
	}
}
