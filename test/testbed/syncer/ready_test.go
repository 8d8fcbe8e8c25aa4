package syncer

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// probe serves /readyz: not ready with one more check passing on each
// call until passing reaches ready (ready < 0: never more than one).
func probe(t *testing.T, ready int) *Process {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(calls.Add(1))
		if ready < 0 {
			n = 1
		}
		if ready >= 0 && n >= ready {
			fmt.Fprintln(w, "ok")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "%s[-]member m%03d failed: syncing\n", strings.Repeat("[+]member ok\n", n), n)
	}))
	t.Cleanup(srv.Close)
	return &Process{ProbeAddr: strings.TrimPrefix(srv.URL, "http://"), done: make(chan struct{})}
}

func TestWaitReadyWaitsWhileChecksPass(t *testing.T) {
	// 8 calls, 1.4 s: longer than the stall, but every call one more passes.
	if err := probe(t, 8).waitReady(context.Background(), 500*time.Millisecond); err != nil {
		t.Fatalf("gave up while members kept coming in: %v", err)
	}
}

func TestWaitReadyGivesUpWithoutProgress(t *testing.T) {
	err := probe(t, -1).waitReady(context.Background(), 500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "[-]member m001 failed: syncing") {
		t.Fatalf("error %v, want one quoting what /readyz said", err)
	}
}
