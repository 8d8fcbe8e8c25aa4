package imports

import (
	"fmt"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ownWrites remembers the resourceVersion that each ServiceImport and
// derived Service had after mcs-syncer's last write of it. The watch event
// that carries that version is the echo of the write: it brings nothing new,
// so it triggers no reconcile (a new import is written four times; without
// this, each write came back as one more reconcile that found nothing to
// do). Any other version, someone else's change, still triggers one.
type ownWrites struct {
	mu sync.Mutex
	rv map[string]string
}

func newOwnWrites() *ownWrites { return &ownWrites{rv: map[string]string{}} }

func writeKey(obj client.Object) string {
	return fmt.Sprintf("%T/%s/%s", obj, obj.GetNamespace(), obj.GetName())
}

// wrote records obj as returned by a create or update.
func (w *ownWrites) wrote(obj client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rv[writeKey(obj)] = obj.GetResourceVersion()
}

// isEcho reports whether obj is the object as mcs-syncer last wrote it.
func (w *ownWrites) isEcho(obj client.Object) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	rv, ok := w.rv[writeKey(obj)]
	return ok && rv == obj.GetResourceVersion()
}

// forget drops what is recorded of obj (deleted, or no longer ours).
func (w *ownWrites) forget(obj client.Object) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.rv, writeKey(obj))
}
