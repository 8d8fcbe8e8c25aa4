package imports

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// The start-up of a process (or a member's return) is a race between the
// members' first passes, which fill the Store and announce its keys, and
// each consumer's controller, which subscribes to the Store when it starts.
// These tests play every order of those events deterministically and check
// that every import is written whatever the order: a key must never depend
// on an announcement that came before its consumer listened (issue 19: 18
// of 1,000 imports were never written into north after a restart).

// startupKeys are the keys the start-up tests export: every one from east,
// every third one from west too.
func startupKeys() []types.NamespacedName {
	var keys []types.NamespacedName
	for i := range 12 {
		keys = append(keys, types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("svc-%02d", i)})
	}
	return keys
}

// startupEvents are what the members do at start-up, in their natural
// order: east's first pass (in two halves), west's, every member synced.
func (h *harness) startupEvents() []func() {
	keys := startupKeys()
	put := func(cluster string, keys []types.NamespacedName) func() {
		return func() {
			for i, k := range keys {
				es := h.export(cluster, i, fmt.Sprintf("10.1.%d.1", i))
				es.Key = k
				h.store.Put(es)
			}
		}
	}
	var west []types.NamespacedName
	for i := 0; i < len(keys); i += 3 {
		west = append(west, keys[i])
	}
	synced := func(cluster string, keys []types.NamespacedName) func() {
		return func() {
			current := map[types.NamespacedName]bool{}
			for _, k := range keys {
				current[k] = true
			}
			h.store.MarkSynced(clusterset.ClusterID(cluster), current)
		}
	}
	return []func(){
		put("east", keys[:len(keys)/2]),
		put("east", keys[len(keys)/2:]),
		put("west", west),
		synced("east", keys),
		synced("west", west),
		synced("north", nil),
	}
}

// instance is one run of the controller's Store source: what a consumer's
// controller listens to from its start until it stops.
type instance struct {
	h      *harness
	q      workqueue.TypedRateLimitingInterface[reconcile.Request]
	cancel context.CancelFunc
	// later holds the keys a reconcile asked to see again after a delay
	// (a partial view): they are reconciled when the queue is drained.
	later []reconcile.Request
}

// start starts the controller's Store source, and, like its
// ServiceImport informer's first list, enqueues every ServiceImport the
// consumer holds.
func (h *harness) start() *instance {
	h.t.Helper()
	ctx, cancel := context.WithCancel(h.t.Context())
	h.t.Cleanup(cancel)
	in := &instance{h: h, cancel: cancel,
		q: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())}
	h.t.Cleanup(in.q.ShutDown)
	if err := h.c.storeSource().Start(ctx, in.q); err != nil {
		h.t.Fatal(err)
	}
	var list mcsv1beta1.ServiceImportList
	if err := h.client.List(ctx, &list); err != nil {
		h.t.Fatal(err)
	}
	for i := range list.Items {
		in.q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return in
}

// process reconciles at most n queued keys (all of them for n < 0), as the
// controller's workers would. With later, the keys that asked to be looked
// at again after a delay are, as their timers would, until none asks again
// (a few rounds at most: in the end every member is synced).
func (in *instance) process(n int, later bool) {
	in.h.t.Helper()
	for round := 0; ; round++ {
		for ; n != 0 && in.q.Len() > 0; n-- {
			req, _ := in.q.Get()
			res, err := in.h.c.Reconcile(in.h.t.Context(), req)
			in.q.Done(req)
			if err != nil {
				in.h.t.Fatalf("reconcile %s: %v", req, err)
			}
			if res.RequeueAfter > 0 {
				in.later = append(in.later, req)
			}
		}
		if !later || len(in.later) == 0 || n == 0 {
			return
		}
		if round == 3 {
			in.h.t.Fatalf("still asking to be looked at again: %v", in.later)
		}
		for _, req := range in.later {
			in.q.Add(req)
		}
		in.later = nil
	}
}

// imported checks that every key has its ServiceImport, with the clusters
// that export it, and a slice per source.
func (h *harness) imported() {
	h.t.Helper()
	for i, k := range startupKeys() {
		si := &mcsv1beta1.ServiceImport{}
		if err := h.client.Get(h.t.Context(), k, si); err != nil {
			h.t.Errorf("%s: %v", k, err)
			continue
		}
		want := 1
		if i%3 == 0 {
			want = 2
		}
		if len(si.Status.Clusters) != want || len(si.Spec.IPs) != 1 {
			h.t.Errorf("%s: imported from %v, ips %v", k, si.Status.Clusters, si.Spec.IPs)
		}
	}
}

// TestStartupOrderings: the controller's subscription comes at every point
// of the members' first passes (before, between each step, after all),
// with its workers reconciling what is queued after every step: every
// import is written.
func TestStartupOrderings(t *testing.T) {
	for at := 0; at <= 6; at++ {
		t.Run(fmt.Sprintf("subscribed-after-%d-steps", at), func(t *testing.T) {
			h := newHarness(t, Options{})
			var in *instance
			for i, step := range append(h.startupEvents(), func() {}) {
				if i == at {
					in = h.start()
				}
				step()
				if in != nil {
					in.process(-1, false)
				}
			}
			in.process(-1, true)
			h.imported()
		})
	}
}

// TestStartupControllerRestarted: a consumer's controller that stops
// part-way (its member flapped) and starts anew after every announcement
// was made still writes every import: the new one is told every key the
// Store holds, not only the ServiceImports that already exist.
func TestStartupControllerRestarted(t *testing.T) {
	h := newHarness(t, Options{})
	first := h.start()
	for _, step := range h.startupEvents() {
		step()
	}
	first.process(3, false) // three imports written, then the member went away
	first.cancel()
	first.q.ShutDown()
	h.store.AnnounceAll() // its return announced to nobody yet
	second := h.start()
	second.process(-1, true)
	h.imported()
}

// TestEverythingFindsOrphanedImport: an import whose only exporter was out
// of reach when the process started (grace 0: kept until it is back) and
// whose export is gone by then is no key of the Store; when the member's
// first pass is done, the controller looks at every ServiceImport it
// manages again, and withdraws it.
func TestEverythingFindsOrphanedImport(t *testing.T) {
	h := newHarness(t, Options{})
	h.put(h.export("east", 0, "10.1.0.1"))
	h.reconcile()
	h.takeWrites()

	// A new process: a Store that knows nothing of east, which is down.
	h.store = clusterset.NewStore()
	h.c.opts.Store = h.store
	h.members.down["east"] = time.Now()
	for _, id := range []clusterset.ClusterID{"north", "west"} {
		h.store.MarkSynced(id, nil)
	}
	in := h.start()
	in.process(-1, false)
	if got := h.takeWrites(); len(got) != 0 {
		t.Fatalf("wrote %v while east's exports were unknown", got)
	}

	// East returns, its first pass finds nothing exported.
	delete(h.members.down, "east")
	h.store.MarkSynced("east", nil)
	deadline := time.Now().Add(10 * time.Second)
	for in.q.Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // Everything runs on a goroutine of its own
	}
	in.process(-1, true)
	err := h.client.Get(t.Context(), key, &mcsv1beta1.ServiceImport{})
	if err == nil {
		t.Fatalf("the ServiceImport nobody exports is still there; writes %v", h.takeWrites())
	}
}
