package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestWaitForWaitsWhileTheStateChanges(t *testing.T) {
	const stall = 250 * time.Millisecond
	looks := 0
	took, err := waitFor(context.Background(), "the work", stall, func() (bool, string) {
		looks++
		return looks == 12, fmt.Sprintf("%d done", looks) // 1.1 s: longer than stall, never still
	})
	if err != nil {
		t.Fatalf("gave up while the work made progress: %v", err)
	}
	if took <= stall {
		t.Errorf("took %s: the test did not outlast the stall", took)
	}
}

func TestWaitForGivesUpWithoutProgressNamingWhatItSaw(t *testing.T) {
	_, err := waitFor(context.Background(), "the namespace deleted", 250*time.Millisecond, func() (bool, string) {
		return false, "7 objects left"
	})
	if err == nil || !strings.Contains(err.Error(), "the namespace deleted") || !strings.Contains(err.Error(), "last seen: 7 objects left") {
		t.Fatalf("error %v: want one naming what it waited for and the last state", err)
	}
}

func TestWaitForEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := waitFor(ctx, "x", time.Hour, func() (bool, string) { return false, "1" }); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("error %v, want the context's", err)
	}
}
