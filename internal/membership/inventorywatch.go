package membership

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/mcs-syncer/mcs-syncer/internal/inventory"
)

// profileWatch is the informer on an inventory's ClusterProfiles: one
// client, one LIST, then a WATCH, kept until the inventory's settings or
// the content of its kubeconfig change (a new watch then).
type profileWatch struct {
	key      string
	cancel   context.CancelFunc
	informer cache.SharedIndexInformer
	// failedAt is the resource version the informer had synced when its
	// list or watch last failed: once it has synced another, it reads
	// again.
	failedAt string
}

// follow keeps r's profiles as the inventory of cfg holds them, through
// an informer, and tells r.changed of every change: what a Set calls at
// each config poll (no request of its own: the provider config is a file,
// and the informer is started anew only when the inventory's settings or
// its kubeconfig change).
func (r *inventoryReader) follow(ctx context.Context, cfg *Config) {
	inv := cfg.Inventory
	if inv == nil {
		r.stopWatch()
		r.forget()
		return
	}
	providers, providersErr := inventory.LoadProviderConfig(inv.ProviderConfig)
	key, keyErr := watchKey(inv)
	r.mu.Lock()
	r.setSettings(*inv)
	r.setProviders(providers, providersErr)
	w := r.watch
	r.mu.Unlock()
	switch {
	case keyErr != nil:
		r.stopWatch()
		r.failed(keyErr)
	case w == nil || w.key != key:
		r.stopWatch()
		if err := r.startWatch(ctx, inv, key); err != nil {
			r.failed(err)
		}
	default:
		r.readsAgain(w)
	}
}

// watchKey is what a watch is started anew for: the inventory's settings
// and its kubeconfig's content.
func watchKey(inv *Inventory) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%+v\n", *inv)
	if inv.Kubeconfig != "" {
		raw, err := os.ReadFile(inv.Kubeconfig)
		if err != nil {
			return "", fmt.Errorf("inventory kubeconfig: %w", err)
		}
		h.Write(raw)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// startWatch starts the informer on inv's profiles, tagged key.
func (r *inventoryReader) startWatch(ctx context.Context, inv *Inventory, key string) error {
	dc, err := r.clientFor(inv)
	if err != nil {
		return err
	}
	sel, err := inv.Selection.Selector()
	if err != nil {
		return err
	}
	profiles := dc.Resource(inventory.Resource).Namespace(inv.Selection.Namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.LabelSelector = sel.String()
			// A LIST bounded as the reads before the informer were: an
			// inventory that hangs fails the read, and is retried.
			ctx, cancel := context.WithTimeout(ctx, inventoryTimeout)
			defer cancel()
			return profiles.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.LabelSelector = sel.String()
			return profiles.Watch(ctx, opts)
		},
	}
	// The client says whether it streams the first list (WatchList, what
	// an API server does; a fake client does not).
	informer := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, dc), &unstructured.Unstructured{}, 0, cache.Indexers{})
	w := &profileWatch{key: key, informer: informer}
	if err := informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		r.mu.Lock()
		w.failedAt = informer.LastSyncResourceVersion()
		r.mu.Unlock()
		r.failed(fmt.Errorf("list or watch ClusterProfiles of %s: %w", inv.Selection.Namespace, err))
	}); err != nil {
		return err
	}
	changed := func() { r.fromStore(w) }
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { changed() },
		UpdateFunc: func(any, any) { changed() },
		DeleteFunc: func(any) { changed() },
	}); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	w.cancel = cancel
	r.mu.Lock()
	r.watch = w
	r.mu.Unlock()
	go informer.RunWithContext(wctx)
	// An inventory of no profile has no event: its first sync is one.
	go func() {
		if cache.WaitForCacheSync(wctx.Done(), informer.HasSynced) {
			changed()
		}
	}()
	return nil
}

// inventoryClient is a client of the inventory's cluster, its
// kubeconfig (or in-cluster config) read anew, whose requests end after
// timeout (0: none, for a watch).
func inventoryClient(inv *Inventory, timeout time.Duration) (dynamic.Interface, error) {
	rc, err := inv.restConfig()
	if err != nil {
		return nil, err
	}
	rc.Timeout = timeout
	return dynamic.NewForConfig(rc)
}

// stopWatch stops the informer, if one runs.
func (r *inventoryReader) stopWatch() {
	r.mu.Lock()
	w := r.watch
	r.watch = nil
	r.mu.Unlock()
	if w != nil {
		w.cancel()
	}
}

// fromStore takes the profiles the informer of w holds (unless another
// watch replaced it) as the last good read, and tells r.changed.
func (r *inventoryReader) fromStore(w *profileWatch) {
	var items []*unstructured.Unstructured
	for _, obj := range w.informer.GetStore().List() {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			items = append(items, u)
		}
	}
	profiles, bad := inventory.Convert(items)
	r.mu.Lock()
	if r.watch != w {
		r.mu.Unlock()
		return
	}
	r.read(profiles, bad)
	r.mu.Unlock()
	r.notify()
}

// readsAgain clears the failure of w once its informer has synced since
// (a relist that found nothing new has no event to say so).
func (r *inventoryReader) readsAgain(w *profileWatch) {
	synced := w.informer.LastSyncResourceVersion()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.readErr != "" && r.watch == w && synced != "" && synced != w.failedAt {
		r.readErr, r.readAt = "", time.Now()
	}
}

// failed records a failure to read the inventory; what was read stays.
func (r *inventoryReader) failed(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tried = true
	if r.readErr == "" {
		r.failedAt = time.Now()
	}
	r.readErr = err.Error()
}

// notify tells r.changed, without waiting: one pending notice is enough.
func (r *inventoryReader) notify() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}
