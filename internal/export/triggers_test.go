package export

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestTriggerLogKeepsDistinctTimesInOrder(t *testing.T) {
	l := newTriggerLog()
	key := types.NamespacedName{Namespace: "ns", Name: "svc"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, s := range []int{3, 1, 2, 3, 1} { // out of order, repeated
		l.record(key, t0.Add(time.Duration(s)*time.Second))
	}
	got := l.upTo(key, t0.Add(2*time.Second))
	if len(got) != 2 || !got[0].Equal(t0.Add(time.Second)) || !got[1].Equal(t0.Add(2*time.Second)) {
		t.Errorf("upTo(2s) = %v, want [1s 2s]", got)
	}
	if got := l.upTo(key, t0.Add(time.Hour)); len(got) != 3 {
		t.Errorf("upTo(1h) = %v, want three times", got)
	}
	if got := l.upTo(types.NamespacedName{Name: "other"}, t0.Add(time.Hour)); len(got) != 0 {
		t.Errorf("another key has %v", got)
	}
	l.forget(key)
	if got := l.upTo(key, t0.Add(time.Hour)); len(got) != 0 {
		t.Errorf("after forget: %v", got)
	}
}

func TestTriggerLogIsBounded(t *testing.T) {
	l := newTriggerLog()
	key := types.NamespacedName{Namespace: "ns", Name: "svc"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 * maxRecentTriggers {
		l.record(key, t0.Add(time.Duration(i)*time.Millisecond))
	}
	got := l.upTo(key, t0.Add(time.Hour))
	if len(got) != maxRecentTriggers || !got[0].Equal(t0.Add(time.Duration(2*maxRecentTriggers)*time.Millisecond)) {
		t.Errorf("kept %d times from %v, want the newest %d", len(got), got[0], maxRecentTriggers)
	}
}
