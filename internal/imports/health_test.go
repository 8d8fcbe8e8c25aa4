package imports

import (
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// The import side of clusterset.Health: a member read through a hub that
// cannot be read is held (nothing withdrawn, however long), and a member
// that cannot be read (forbidden, syncing over and over, never marked)
// holds up the decisions of the others for the grace at most.

// TestHeldMemberKeepsItsExports: west, read through a hub that has been out
// of reach for far longer than the grace, keeps its endpoints and the
// ServiceImport, and nothing is written; no recheck is asked for (the
// hub's return announces).
func TestHeldMemberKeepsItsExports(t *testing.T) {
	h := newHarness(t, Options{UnreachableGrace: time.Minute})
	h.put(h.export("west", 1, "10.2.0.1"))
	h.reconcile()
	uid := h.serviceImport().UID
	h.takeWrites()

	h.members.held["west"] = true
	h.store.BeginResync("west") // its reader stopped with the hub
	res := h.reconcile()
	if got := h.slicesBySource(); len(got["west"]) != 1 {
		t.Errorf("held: %v", got)
	}
	if si := h.serviceImport(); si.UID != uid {
		t.Error("the ServiceImport was replaced")
	}
	if w := h.takeWrites(); len(w) != 0 {
		t.Errorf("writes while held: %v", w)
	}
	if res.RequeueAfter != 0 {
		t.Errorf("requeue after %v while held", res.RequeueAfter)
	}
}

// TestStuckMemberHoldsOthersForTheGraceOnly: east stops exporting while
// south, another member, is stuck unsynced (forbidden, flapping through
// syncing). Within the grace counted from when south was last up, absence
// proves nothing and the import stays; once the grace has run out, south
// counts as a member without exports and east's withdrawal goes through.
// The same for a member that is up (engaged through the hub) but never
// marked its first pass.
func TestStuckMemberHoldsOthersForTheGraceOnly(t *testing.T) {
	for _, tc := range []struct {
		name string
		// stuck makes south stuck since `since`.
		stuck func(h *harness, since time.Time)
	}{
		{"down", func(h *harness, since time.Time) { h.members.down["south"] = since }},
		{"never marked", func(h *harness, since time.Time) { h.members.up["south"] = since }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{UnreachableGrace: time.Minute})
			h.put(h.export("east", 0, "10.1.0.1"))
			h.reconcile()
			h.members.ids = append(h.members.ids, "south")
			h.store.BeginResync("south")

			tc.stuck(h, time.Now().Add(-30*time.Second))
			h.store.Delete("east", key)
			res := h.reconcile()
			if _, err := h.getServiceImport(); err != nil {
				t.Fatalf("withdrawn within south's grace: %v", err)
			}
			if res.RequeueAfter <= 0 || res.RequeueAfter > 30*time.Second {
				t.Errorf("requeue after %v, want by the end of south's grace", res.RequeueAfter)
			}

			tc.stuck(h, time.Now().Add(-2*time.Minute))
			h.reconcile()
			if _, err := h.getServiceImport(); !apierrors.IsNotFound(err) {
				t.Errorf("not withdrawn past south's grace: %v", err)
			}
		})
	}
}

func (h *harness) getServiceImport() (*mcsv1beta1.ServiceImport, error) {
	si := &mcsv1beta1.ServiceImport{}
	return si, h.client.Get(h.t.Context(), key, si)
}
