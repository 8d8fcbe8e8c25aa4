package notify

import (
	"context"
	"sync"
)

// Signal wakes every waiter at each Notify. A waiter takes Changed before
// it reads what the signal guards, and waits on it after: a change made
// after the read closes the channel taken before it, so none is missed.
// Notifications between two reads merge into one. The zero Signal is ready
// to use; Notify on a nil Signal does nothing.
type Signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// Changed returns a channel that is closed at the next Notify.
func (s *Signal) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Notify closes the channel that Changed returned, waking its waiters.
// Call it after the change, so that they read it.
func (s *Signal) Notify() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// Forward notifies to at each change of every source (a Changed of
// another Signal, or a function like it) until ctx ends: one goroutine a
// source, for the lifetime of ctx. It takes the source's next channel
// before it notifies to, so that a change made while to's waiters read is
// forwarded too.
func Forward(ctx context.Context, to *Signal, sources ...func() <-chan struct{}) {
	for _, changed := range sources {
		next := changed() // now: a change after Forward returns is forwarded
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-next:
				}
				next = changed()
				to.Notify()
			}
		}()
	}
}
