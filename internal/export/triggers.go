package export

import (
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// maxRecentTriggers bounds the trigger times kept per export: enough for
// the changes that pile up behind one slow write, small enough to cost
// nothing per export.
const maxRecentTriggers = 32

// triggerLog keeps, per exported Service, the distinct
// last-change-trigger-times its slices carried recently, as the watcher's
// events saw them go by. Several changes can reach the Store as one export
// (the work queue coalesces them); the log lets the import side account
// for each of them.
type triggerLog struct {
	mu    sync.Mutex
	byKey map[types.NamespacedName][]time.Time
}

func newTriggerLog() *triggerLog {
	return &triggerLog{byKey: map[types.NamespacedName][]time.Time{}}
}

// triggerTime returns the slice's last-change-trigger-time, if it has a
// valid one.
func triggerTime(s *discoveryv1.EndpointSlice) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, s.Annotations[corev1.EndpointsLastChangeTriggerTime])
	return t, err == nil
}

// record adds t to key's log, keeping the newest maxRecentTriggers.
func (l *triggerLog) record(key types.NamespacedName, t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	times := l.byKey[key]
	i, found := slices.BinarySearchFunc(times, t, time.Time.Compare)
	if found {
		return
	}
	times = slices.Insert(times, i, t)
	if len(times) > maxRecentTriggers {
		times = slices.Delete(times, 0, len(times)-maxRecentTriggers)
	}
	l.byKey[key] = times
}

// upTo returns key's trigger times up to and including newest, oldest
// first.
func (l *triggerLog) upTo(key types.NamespacedName, newest time.Time) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	times := l.byKey[key]
	n, _ := slices.BinarySearchFunc(times, newest, func(a, b time.Time) int {
		if a.After(b) {
			return 1
		}
		return -1 // equal times sort before newest, so they are kept
	})
	return slices.Clone(times[:n])
}

// forget drops key's log.
func (l *triggerLog) forget(key types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.byKey, key)
}
