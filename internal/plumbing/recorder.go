package plumbing

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// maxEventsInFlight bounds the events a NonBlockingRecorder hands over at
// once; more are dropped (events are best effort).
const maxEventsInFlight = 256

// NonBlockingRecorder returns a recorder that hands each event to rec on a
// goroutine of its own, so that a controller's worker never waits for it:
// controller-runtime's recorder blocks every Eventf while its broadcaster
// flushes the queued events at shutdown (as long as writing them takes),
// which held a worker, and so the process's exit, past its 30 s grace.
func NonBlockingRecorder(rec events.EventRecorder) events.EventRecorder {
	if rec == nil {
		return nil
	}
	return &nonBlocking{rec: rec, slots: make(chan struct{}, maxEventsInFlight)}
}

type nonBlocking struct {
	rec   events.EventRecorder
	slots chan struct{}
}

func (n *nonBlocking) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	select {
	case n.slots <- struct{}{}:
	default:
		return // too many in flight: dropped
	}
	// Copies: the caller may change its objects once Eventf returns.
	regarding = regarding.DeepCopyObject()
	if related != nil {
		related = related.DeepCopyObject()
	}
	go func() {
		defer func() { <-n.slots }()
		n.rec.Eventf(regarding, related, eventtype, reason, action, note, args...)
	}()
}
