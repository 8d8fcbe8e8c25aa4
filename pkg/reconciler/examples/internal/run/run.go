// Package run holds what the example controllers' commands share: their
// flags, the client and the two informer factories built from them, and
// the workqueue's worker loop. It keeps each example down to what is its
// own: which objects it watches and how one key is synced.
package run

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// Setup is what an example controller is built from.
type Setup struct {
	Client kubernetes.Interface
	// Dynamic reads custom resources.
	Dynamic dynamic.Interface
	// All lists and watches every object of a kind; Ours only the
	// EndpointSlices labelled with ManagedBy, the controller's own.
	All, Ours informers.SharedInformerFactory
	ManagedBy string
}

// Controller is what Main runs once the factories have started.
type Controller interface {
	Run(ctx context.Context, workers int) error
}

// Main parses the command line (the flags below and klog's), builds the
// controller with build and runs it until SIGINT or SIGTERM. An error is
// printed with the command's name and ends the process with status 1.
func Main(name, defaultManagedBy string, build func(Setup) (Controller, error)) {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file (default: in-cluster, then $KUBECONFIG and ~/.kube/config)")
	managedBy := flag.String("managed-by", defaultManagedBy, "the slices' endpointslice.kubernetes.io/managed-by value")
	workers := flag.Int("workers", 5, "keys synced at once")
	// kube-controller-manager's defaults: client-go's own (5 and 10)
	// hold the writes of a busy controller back by hundreds of ms.
	qps := flag.Float64("kube-api-qps", 20, "requests per second to the API server")
	burst := flag.Int("kube-api-burst", 30, "requests allowed above --kube-api-qps in a burst")
	klog.InitFlags(nil)
	flag.Parse()
	if err := start(name, *kubeconfig, *managedBy, *workers, float32(*qps), *burst, build); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

func start(name, kubeconfig, managedBy string, workers int, qps float32, burst int, build func(Setup) (Controller, error)) error {
	switch {
	case workers < 1:
		return fmt.Errorf("--workers must be at least 1, not %d", workers)
	case qps <= 0 || burst < 1:
		return fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive, not %v and %d", qps, burst)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return err
	}
	cfg.UserAgent, cfg.QPS, cfg.Burst = name+"-example/"+managedBy, qps, burst
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s := Factories(client, managedBy)
	if s.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return err
	}
	c, err := build(s)
	if err != nil {
		return err
	}
	s.All.Start(ctx.Done())
	s.Ours.Start(ctx.Done())
	defer s.All.Shutdown()
	defer s.Ours.Shutdown()
	return c.Run(ctx, workers)
}

// Factories returns the Setup of client: informer factories without
// resync, Ours limited to managedBy's slices (Dynamic is left to the
// caller).
func Factories(client kubernetes.Interface, managedBy string) Setup {
	return Setup{
		Client: client, ManagedBy: managedBy,
		All: informers.NewSharedInformerFactory(client, 0),
		Ours: informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = discoveryv1.LabelManagedBy + "=" + managedBy
		})),
	}
}

// OnChange calls f with each object the informers add or delete (a
// deletion's last known state unwrapped) and with both the old and the new
// object of an update, so that, say, a pod that leaves a selector is seen
// by what it left.
func OnChange(f func(obj any), informers ...cache.SharedIndexInformer) error {
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    f,
		UpdateFunc: func(old, cur any) { f(old); f(cur) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			f(obj)
		},
	}
	for _, inf := range informers {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
	}
	return nil
}

// ObserveDeletion tells r's tracker of a slice event whose slice lister
// no longer holds (a deletion, by r or by anyone), as the reconciler's
// contract asks: it would otherwise wait for the slice to be listed again.
func ObserveDeletion(r *reconciler.Reconciler, lister discoverylisters.EndpointSliceLister, s *discoveryv1.EndpointSlice) {
	if _, err := lister.EndpointSlices(s.Namespace).Get(s.Name); apierrors.IsNotFound(err) {
		r.Tracker().Observed(s)
	}
}

// Work waits for the caches, then syncs the queue's keys with workers
// goroutines until ctx ends; it shuts the queue down on return. A failed
// key is logged (as what; a stale cache only at verbosity 2, as upstream
// does) and retried with the queue's backoff, a synced one forgotten.
func Work(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string], workers int,
	synced []cache.InformerSynced, what string, sync func(ctx context.Context, key string) error) error {
	defer queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return errors.New("caches did not sync")
	}
	next := func(ctx context.Context) bool {
		key, quit := queue.Get()
		if quit {
			return false
		}
		defer queue.Done(key)
		if err := sync(ctx, key); err != nil {
			if errors.Is(err, reconciler.ErrStaleCache) {
				// Expected: the echo of our last write is on its way.
				klog.FromContext(ctx).V(2).Info("Retrying on a stale cache", what, key, "reason", err)
			} else {
				utilruntime.HandleErrorWithContext(ctx, err, "sync failed", what, key)
			}
			queue.AddRateLimited(key)
			return true
		}
		queue.Forget(key)
		return true
	}
	for range workers {
		go wait.UntilWithContext(ctx, func(ctx context.Context) {
			for next(ctx) {
			}
		}, time.Second)
	}
	<-ctx.Done()
	return nil
}
