package publish

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
)

// TestWriteEachWritesTogether: writeEach sends concurrentWrites writes at
// once, waits for all, and reports the first failed part in the parts'
// order, even when a later part failed first.
func TestWriteEachWritesTogether(t *testing.T) {
	parts := make([]*v1alpha1.PublishedExport, 3*concurrentWrites)
	for i := range parts {
		parts[i] = &v1alpha1.PublishedExport{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("part-%d", i)}}
	}
	var started, done atomic.Int32
	met := make(chan struct{})
	laterFailed := make(chan struct{})
	failed, err := writeEach(parts, func(part *v1alpha1.PublishedExport) error {
		defer done.Add(1)
		if started.Add(1) == concurrentWrites {
			close(met)
		}
		select {
		case <-met:
		case <-time.After(30 * time.Second):
			return errors.New("the first writes were not sent together")
		}
		switch part.Name {
		case "part-1":
			<-laterFailed // fails after part-5 has
			return errors.New("refused part-1")
		case "part-5":
			defer close(laterFailed)
			return errors.New("refused part-5")
		}
		return nil
	})
	if failed != parts[1] || err == nil || err.Error() != "refused part-1" {
		t.Errorf("writeEach: %v, %v; want part-1 and its refusal", failed, err)
	}
	if n := done.Load(); n != int32(len(parts)) {
		t.Errorf("%d of %d writes had returned", n, len(parts))
	}
	if failed, err := writeEach(parts, func(*v1alpha1.PublishedExport) error { return nil }); failed != nil || err != nil {
		t.Errorf("no failure: %v, %v", failed, err)
	}
}
