package membership

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// hubbed is three members read through one hub, with fake seams that
// count what they build.
type hubbed struct {
	t       *testing.T
	members []*member
	d       *deps

	mu       sync.Mutex
	clusters []*fakeCluster
	ids      []clusterset.ClusterID // the IDs newCluster was asked for
	probers  int
	prober   *fakeProber
}

func newHubbed(t *testing.T) *hubbed {
	t.Helper()
	dir := t.TempDir()
	kubeconfig(t, dir, "hub.kubeconfig", "https://127.0.0.1:7443")
	h := &hubbed{t: t, prober: &fakeProber{state: Engaged}}
	metrics, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	h.d = &deps{metrics: metrics, stopTimeout: time.Second, failingLimit: failingLimit,
		opts: Options{RetryInterval: time.Millisecond, MaxRetryInterval: 5 * time.Millisecond, HealthInterval: time.Hour,
			Engage: func(clusterset.ClusterID, cluster.Cluster) ([]func(context.Context) error, error) {
				return []func(context.Context) error{func(ctx context.Context) error { <-ctx.Done(); return nil }}, nil
			}},
		newCluster: func(id clusterset.ClusterID, _ schema.GroupVersion, _ *rest.Config, onWatchError func(context.Context, error)) (cluster.Cluster, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			synced := make(chan struct{})
			close(synced)
			c := &fakeCluster{sync: synced, onWatchError: onWatchError, stopped: make(chan struct{}), fail: make(chan error, 1)}
			h.clusters = append(h.clusters, c)
			h.ids = append(h.ids, id)
			return c, nil
		},
		newProber: func(*rest.Config, requiredAPI) (prober, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.probers++
			return h.prober, nil
		},
	}
	h.d.hubs = newHubs(h.d)
	for _, id := range []clusterset.ClusterID{"m1", "m2", "m3"} {
		h.members = append(h.members, newMember(h.d, Member{ID: id, Kubeconfig: filepath.Join(dir, "hub.kubeconfig"), ThroughHub: true}, time.Now()))
	}
	return h
}

func (h *hubbed) run(ctx context.Context) (wait func()) {
	var wg sync.WaitGroup
	for _, m := range h.members {
		wg.Add(1)
		go func() { defer wg.Done(); m.run(ctx) }()
	}
	return wg.Wait
}

func (h *hubbed) allIn(state State) {
	h.t.Helper()
	poll(h.t, "every member "+string(state), func() error {
		for _, m := range h.members {
			if st := m.getStatus(); st.State != state {
				return fmt.Errorf("%s is %s (%s)", m.id(), st.State, st.Cause)
			}
		}
		return nil
	})
}

func (h *hubbed) built() (clusters []*fakeCluster, ids []clusterset.ClusterID, probers int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*fakeCluster(nil), h.clusters...), append([]clusterset.ClusterID(nil), h.ids...), h.probers
}

// TestMembersShareTheHub: the members read through one hub are engaged on
// one cluster of it (built for no member in particular, so its cache
// selects none) and one health check; a refusal of the shared cache's
// watch reaches each of them; a shared cache that stops fails them all,
// and they come back on a new one; once they stop, its context ends and
// nothing of the hub is kept.
func TestMembersShareTheHub(t *testing.T) {
	h := newHubbed(t)
	ctx, cancel := context.WithCancel(context.Background())
	wait := h.run(ctx)
	h.allIn(Engaged)
	clusters, ids, probers := h.built()
	if len(clusters) != 1 || ids[0] != "" || probers != 1 {
		t.Fatalf("built clusters for %q and %d probers, want one of each, for no member", ids, probers)
	}

	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "mcs-syncer.io", Resource: "publishedexports"}, "", errors.New("no"))
	h.prober.set(Forbidden, forbidden) // the member's next probe says the same
	clusters[0].onWatchError(ctx, forbidden)
	h.allIn(Forbidden)
	h.prober.set(Engaged, nil)
	h.allIn(Engaged)

	clusters, _, _ = h.built()
	last := clusters[len(clusters)-1]
	last.fail <- errors.New("cache broke")
	poll(t, "a new shared cluster", func() error {
		if clusters, _, _ = h.built(); clusters[len(clusters)-1] == last {
			return errors.New("none yet")
		}
		return nil
	})
	h.allIn(Engaged)
	clusters, _, _ = h.built()
	current := clusters[len(clusters)-1]
	for _, m := range h.members {
		if st := m.getStatus(); st.State != Engaged {
			t.Errorf("%s is %s", m.id(), st.State)
		}
	}

	cancel()
	wait()
	select {
	case <-current.stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the shared cluster still runs after every member stopped")
	}
	h.d.hubs.mu.Lock()
	defer h.d.hubs.mu.Unlock()
	if len(h.d.hubs.links) != 0 {
		t.Errorf("%d hub links kept after every member stopped", len(h.d.hubs.links))
	}
}

// blockingProber answers once release is closed.
type blockingProber struct {
	fakeProber
	release chan struct{}
}

func (p *blockingProber) probe(ctx context.Context) (State, error) {
	<-p.release
	return p.fakeProber.probe(ctx)
}

// TestSharedProbe: members that ask while a probe is under way get its
// answer, as do those that ask within reuse, until a refusal makes it
// forgotten; later, the hub is probed again.
func TestSharedProbe(t *testing.T) {
	p := &blockingProber{fakeProber: fakeProber{state: Unreachable, err: errors.New("connection refused")}, release: make(chan struct{})}
	shared := &sharedProbe{prober: p, reuse: time.Hour}
	answers := make(chan State, 3)
	for range 3 {
		go func() { s, _ := shared.probe(context.Background()); answers <- s }()
	}
	poll(t, "a probe under way", func() error {
		shared.mu.Lock()
		defer shared.mu.Unlock()
		if shared.inFlight == nil {
			return errors.New("none")
		}
		return nil
	})
	close(p.release)
	for range 3 {
		if s := <-answers; s != Unreachable {
			t.Errorf("answer %s", s)
		}
	}
	if s, _ := shared.probe(context.Background()); s != Unreachable || p.count() != 1 {
		t.Errorf("within reuse: %s after %d probes, want the one answer", s, p.count())
	}
	p.set(Forbidden, errors.New("no"))
	shared.forget()
	if s, _ := shared.probe(context.Background()); s != Forbidden || p.count() != 2 {
		t.Errorf("forgotten: %s after %d probes, want a new probe's answer", s, p.count())
	}
	shared.reuse = 0
	p.set(Engaged, nil)
	if s, _ := shared.probe(context.Background()); s != Engaged || p.count() != 3 {
		t.Errorf("after reuse: %s after %d probes, want a new probe's answer", s, p.count())
	}
}
