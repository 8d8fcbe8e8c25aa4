package plumbing

import (
	"fmt"
	"slices"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OwnWrites remembers mcs-syncer's last write of each object it writes
// whole (a ServiceImport, a derived Service, a ServiceExport's status):
// the resourceVersion the write replaced, the one it gave, and, until the
// cache holds it, the object the API server returned.
//
// Two things follow. The watch event that carries the version written is
// the echo of the write: it brings nothing new (IsEcho; a new import is
// written four times, and each write came back as one more reconcile that
// found nothing to do). And a reconcile that reads the object from a cache
// still behind the write reads the written object instead (Latest):
// otherwise it plans from the version the write replaced, finds the same
// difference again and writes it again, and the API server refuses that
// write for its stale resourceVersion (a 409 per retry of a failing
// import: under load, several in its first second).
type OwnWrites struct {
	mu     sync.Mutex
	writes map[string]*ownWrite
}

type ownWrite struct {
	written string
	// behind are the versions that the writes made since the cache last
	// caught up replaced, in order: one write's, or a chain's (a new
	// import's ServiceImport is created, then its spec.ips and its status
	// are written, each over the last, before the cache has any of them).
	// A cache that shows one of them is behind the last write.
	behind []string
	// obj is what the last write returned, until the cache holds it (a
	// version not in behind came: a cache never goes back).
	obj client.Object
}

func NewOwnWrites() *OwnWrites { return &OwnWrites{writes: map[string]*ownWrite{}} }

func writeKey(obj client.Object) string {
	return fmt.Sprintf("%T/%s/%s", obj, obj.GetNamespace(), obj.GetName())
}

// Wrote records obj as an update or create returned it; replaced is the
// resourceVersion the write was made over ("" for a create). The caller
// does not modify obj afterwards.
func (w *OwnWrites) Wrote(replaced string, obj client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := &ownWrite{written: obj.GetResourceVersion(), obj: obj}
	if replaced != "" {
		if last := w.writes[writeKey(obj)]; last != nil && last.obj != nil && last.written == replaced {
			now.behind = slices.Clone(last.behind) // over our own last write, which the cache may not hold yet either
		}
		now.behind = append(now.behind, replaced)
	}
	w.writes[writeKey(obj)] = now
}

// IsEcho reports whether obj, as a watch event brings it, is the object as
// mcs-syncer last wrote it.
func (w *OwnWrites) IsEcho(obj client.Object) bool {
	written, _, ok := w.observe(obj)
	return ok && written == obj.GetResourceVersion()
}

// Latest returns cached, as read from a cache, or a copy of what
// mcs-syncer last wrote over it when cached is a version that write, or
// the chain of writes it ends, replaced: the API server took each write
// with the version before as its precondition, so the written object is
// newer. A create alone is not followed (a cache without the object may be
// behind the create or after someone's delete).
func Latest[T client.Object](w *OwnWrites, cached T) T {
	_, ahead, _ := w.observe(cached)
	if ahead == nil {
		return cached
	}
	written, ok := ahead.DeepCopyObject().(T)
	if !ok {
		return cached
	}
	return written
}

// observe takes note of the version of obj that a cache shows, and returns
// what mcs-syncer last wrote of it: its version, and the object itself
// while the cache is behind it (nil otherwise). ok is false if mcs-syncer
// never wrote it, or forgot it.
func (w *OwnWrites) observe(cached client.Object) (written string, ahead client.Object, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.writes[writeKey(cached)]
	if !ok {
		return "", nil, false
	}
	if !slices.Contains(last.behind, cached.GetResourceVersion()) {
		// A cache never goes back: it holds the last write, or what came
		// after it.
		last.obj, last.behind = nil, nil
	}
	return last.written, last.obj, true
}

// Forget drops what is recorded of obj (deleted, or no longer ours).
func (w *OwnWrites) Forget(obj client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.writes, writeKey(obj))
}
