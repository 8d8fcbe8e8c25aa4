package plumbing

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// blockingRecorder blocks every Eventf until release is closed, as
// controller-runtime's does while its broadcaster flushes at shutdown.
type blockingRecorder struct{ release chan struct{} }

func (b blockingRecorder) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...interface{}) {
	<-b.release
}

// TestNonBlockingRecorder: a recorder that blocks never holds the caller.
func TestNonBlockingRecorder(t *testing.T) {
	blocked := blockingRecorder{release: make(chan struct{})}
	defer close(blocked.release)
	rec := NonBlockingRecorder(blocked)
	done := make(chan struct{})
	go func() {
		for range 2 * maxEventsInFlight { // beyond the bound: dropped
			rec.Eventf(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, nil, "Warning", "R", "A", "note")
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Eventf waited for a blocked recorder")
	}
}
