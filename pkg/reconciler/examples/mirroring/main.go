// Command mirroring is the Kubernetes EndpointSlice mirroring controller
// rebuilt on pkg/reconciler: the Endpoints of Services without a selector
// become EndpointSlices, as kube-controller-manager's
// endpointslicemirroring-controller makes them (the Endpoints' labels and
// annotations, repacked subsets, at most 1,000 addresses per subset, the
// skip-mirror label and leader-election records honoured), under a
// managed-by value of its own so that it can run beside the original. The
// repository's differential test (test/e2e/diffkcm) compares the two.
//
//	mirroring --kubeconfig ~/.kube/config --managed-by mirroring.example.com
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig file (default: in-cluster, then $KUBECONFIG and ~/.kube/config)")
	managedBy := flag.String("managed-by", "mirroring.example.com", "the slices' endpointslice.kubernetes.io/managed-by value")
	workers := flag.Int("workers", 5, "Endpoints synced at once")
	klog.InitFlags(nil)
	flag.Parse()
	if err := run(*kubeconfig, *managedBy, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "mirroring:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, managedBy string, workers int) error {
	if workers < 1 {
		return fmt.Errorf("--workers must be at least 1, not %d", workers)
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return err
	}
	cfg.UserAgent = "mirroring-example/" + managedBy
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	all := informers.NewSharedInformerFactory(client, 0)
	ours := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = discoveryv1.LabelManagedBy + "=" + managedBy
	}))
	c, err := newController(client, all, ours, managedBy)
	if err != nil {
		return err
	}
	all.Start(ctx.Done())
	ours.Start(ctx.Done())
	defer all.Shutdown()
	defer ours.Shutdown()
	return c.run(ctx, workers)
}
