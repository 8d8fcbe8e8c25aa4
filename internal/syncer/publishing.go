package syncer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/log"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/membership"
	"github.com/mcs-syncer/mcs-syncer/internal/notify"
	"github.com/mcs-syncer/mcs-syncer/internal/plumbing"
	"github.com/mcs-syncer/mcs-syncer/internal/publish"
)

// publishing follows the local member's publisher, which is built anew
// each time the member is engaged (and, in hub mode, each time the hub's
// kubeconfig changes), for /readyz.
type publishing struct {
	mu      sync.Mutex
	current *publish.Publisher
}

func (p *publishing) set(pub *publish.Publisher) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.current = pub
}

// Problem says why the member's heartbeat does not reach the others, ""
// when it does (or no publisher runs yet).
func (p *publishing) Problem() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.current == nil {
		return ""
	}
	return p.current.Problem()
}

// hubKubeconfigPoll is how often the hub's kubeconfig is read again, as
// often as the clusterset config's.
const hubKubeconfigPoll = 2 * time.Second

// throughHub returns a runnable that publishes into the hub through a
// client and cache built by build from the hub's kubeconfig as it is now:
// a change of the file (a rotated token) rebuilds them within seconds,
// without a restart, as a change of a member's kubeconfig reconnects that
// member. A kubeconfig that cannot be read is logged and read again.
func (p *publishing) throughHub(hub *membership.Hub, build buildFunc) func(context.Context) error {
	return func(ctx context.Context) error {
		logger := ctrl.Log.WithName("publisher")
		for ctx.Err() == nil {
			print := hub.Fingerprint()
			err := p.runUntilChanged(ctx, hub, print, build)
			if err != nil && ctx.Err() == nil {
				var settings hubSettingsError
				if !errors.As(err, &settings) {
					return err
				}
				logger.Error(err, "Cannot publish into the hub; its kubeconfig is read again")
				waitChanged(ctx, hub, print)
				continue
			}
			if ctx.Err() == nil {
				logger.Info("The hub's kubeconfig changed: publishing through it anew")
			}
		}
		return nil
	}
}

// buildFunc builds what publishes through the hub of a REST config: what
// runs (the hub's cache, the publisher) and the publisher.
type buildFunc func(*rest.Config) ([]func(context.Context) error, *publish.Publisher, error)

// hubSettingsError is a hub kubeconfig that cannot be used.
type hubSettingsError struct{ error }

// runUntilChanged publishes through the hub settings of fingerprint print
// until they change (nil) or the cache or publisher fails (its error).
func (p *publishing) runUntilChanged(ctx context.Context, hub *membership.Hub, print [32]byte, build buildFunc) error {
	rc, err := hub.RESTConfig()
	if err != nil {
		return hubSettingsError{fmt.Errorf("hub: %w", err)}
	}
	runs, pub, err := build(rc)
	if err != nil {
		return hubSettingsError{err}
	}
	p.set(pub)
	run, stop := context.WithCancel(ctx)
	defer stop()
	errs := make(chan error, len(runs))
	for _, r := range runs {
		go func() { errs <- r(run) }()
	}
	changed := make(chan struct{})
	go func() { waitChanged(run, hub, print); close(changed) }()
	var failed error
	pending := len(runs)
	select {
	case <-changed:
	case failed = <-errs:
		pending--
	}
	stop()
	for ; pending > 0; pending-- {
		<-errs // both have ended before the next ones start
	}
	return failed
}

// waitChanged returns once the hub's settings no longer have fingerprint
// print, or ctx ends.
func waitChanged(ctx context.Context, hub *membership.Hub, print [32]byte) {
	ticker := time.NewTicker(hubKubeconfigPoll)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			if hub.Fingerprint() != print {
				return
			}
		}
	}
}

// publisher returns what publishes the local member's exports: into its
// own API server (through cl, whose cache publish.ConfigureCache set up),
// or into the hub, through a client and cache of its own that run beside
// the publisher and are rebuilt when the hub's kubeconfig changes. A hub
// that does not answer holds up the publications only, never the member's
// own imports.
func (sy *Syncer) publisher(cl cluster.Cluster) ([]func(context.Context) error, error) {
	cfg, s := sy.cfg, sy.settings
	opts := publish.PublisherOptions{Cluster: sy.local, Namespace: cfg.PublicationNamespace, Store: sy.store, Feedback: sy.feedback, Workers: s.ExportSyncs, Heartbeat: s.Heartbeat,
		MaxEndpointsPerPart: s.MaxEndpointsPerSlice, Readers: sy.publicationReaders, ReadersChanged: sy.readers.Changed, Warn: warnExport(cl)}
	if cfg.Hub == nil {
		p, err := publish.NewPublisher(cl, opts)
		if err != nil {
			return nil, fmt.Errorf("publisher: %w", err)
		}
		sy.published.set(p)
		return []func(context.Context) error{p.Start}, nil
	}
	build := func(rc *rest.Config) ([]func(context.Context) error, *publish.Publisher, error) {
		rc, err := sy.credentials.Configure(rc)
		if err != nil {
			return nil, nil, fmt.Errorf("hub: %w", err)
		}
		hub, err := cluster.New(withClientLimits(rc, s), func(o *cluster.Options) {
			o.Scheme = sy.scheme
			o.Cache.DefaultTransform = plumbing.StripUnread
			publish.ConfigureCache(&o.Cache, cfg.PublicationNamespace, sy.local)
		})
		if err != nil {
			return nil, nil, fmt.Errorf("hub: %w", err)
		}
		p, err := publish.NewPublisher(hub, opts)
		if err != nil {
			return nil, nil, fmt.Errorf("publisher: %w", err)
		}
		return []func(context.Context) error{hub.Start, p.Start}, p, nil
	}
	return []func(context.Context) error{sy.published.throughHub(cfg.Hub, build)}, nil
}

// warnExport returns what gives a Warning event to the ServiceExport of
// key in cl (the local member): the event names the ServiceExport by its
// UID, as kubectl describe looks events up, so the object is read first;
// an export gone meanwhile needs no warning.
func warnExport(cl cluster.Cluster) func(ctx context.Context, key types.NamespacedName, reason, message string) {
	recorder := plumbing.NonBlockingRecorder(cl.GetEventRecorder("mcs-syncer"))
	return func(ctx context.Context, key types.NamespacedName, reason, message string) {
		se := &mcsv1beta1.ServiceExport{}
		if err := cl.GetClient().Get(ctx, key, se); err != nil {
			log.FromContext(ctx).V(1).Info("No warning given to the ServiceExport", "export", key, "reason", reason, "error", err)
			return
		}
		recorder.Eventf(se, nil, corev1.EventTypeWarning, reason, "Publish", "%s", message)
	}
}

// readersSettleLimit bounds how long a publisher waits, after the process
// started, to know whether every member reads parts (a member whose
// publications cannot be listed holds no one's publications for longer).
const readersSettleLimit = publish.SilenceIntervals * publish.DefaultHeartbeat

// publicationReaders tells the publisher which members read whole
// publications only (their markers lack readsParts: an mcs-syncer before
// parts), and whether that is settled: every other member that can be read
// was listed once, or readersSettleLimit has passed since the start. Until
// it is, nothing is published: a member upgraded first would take the
// others for readers of parts and leave them, for a moment, exports
// without endpoints. A member never marked (no mcs-syncer runs there) reads
// nothing and holds no one to the whole form.
func (sy *Syncer) publicationReaders() (wholeOnly []clusterset.ClusterID, settled bool) {
	for _, id := range sy.heartbeats.ReadsWholeOnly() {
		if _, member := sy.set.Status(id); member && id != sy.local {
			wholeOnly = append(wholeOnly, id)
		}
	}
	if time.Since(sy.started) >= readersSettleLimit {
		return wholeOnly, true
	}
	for _, id := range sy.set.IDs() {
		if id == sy.local {
			continue
		}
		st, _ := sy.set.Status(id)
		switch st.State {
		case membership.Connecting:
			return wholeOnly, false
		case membership.Syncing, membership.Engaged:
			if !sy.heartbeats.Listed(id) {
				return wholeOnly, false
			}
		}
	}
	return wholeOnly, true
}

// followReaders notifies sy.readers, until ctx ends, at each change of
// what publicationReaders reads: the markers' readsParts and the members
// listed (Heartbeats), the members and their states (the Set), and once
// when readersSettleLimit has passed since the start.
func (sy *Syncer) followReaders(ctx context.Context) error {
	notify.Forward(ctx, &sy.readers, sy.heartbeats.ReadersChanged, sy.set.Changes)
	settled := time.AfterFunc(readersSettleLimit-time.Since(sy.started), sy.readers.Notify)
	defer settled.Stop()
	<-ctx.Done()
	return nil
}

// withClientLimits gives rc (the publisher's config of the hub) the
// members' client limits: client-go's default of 5 requests per second
// made a member's first publications into the hub take 20 s for 100
// exports (make bench-scale).
func withClientLimits(rc *rest.Config, s Settings) *rest.Config {
	rc.QPS, rc.Burst = float32(s.KubeAPIQPS), s.KubeAPIBurst
	return rc
}
