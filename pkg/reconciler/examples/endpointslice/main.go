// Command endpointslice is the Kubernetes EndpointSlice controller rebuilt
// on pkg/reconciler: Services with a selector, their Pods and the Nodes
// become EndpointSlices, as kube-controller-manager's
// endpointslice-controller makes them (labels, named target ports,
// publishNotReadyAddresses, terminating endpoints per KEP-1672, hostnames,
// dual-stack, headless Services, placeholders, trafficDistribution and
// topology-aware hints), under a managed-by value of its own so that it can
// run beside the original. The repository's differential test
// (test/e2e/diffkcm) runs both on one cluster and compares their slices.
//
//	endpointslice --kubeconfig ~/.kube/config --managed-by endpointslice.example.com
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
	managedBy := flag.String("managed-by", "endpointslice.example.com", "the slices' endpointslice.kubernetes.io/managed-by value")
	workers := flag.Int("workers", 5, "Services synced at once")
	klog.InitFlags(nil)
	flag.Parse()
	if err := run(*kubeconfig, *managedBy, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "endpointslice:", err)
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
	cfg.UserAgent = "endpointslice-example/" + managedBy
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
