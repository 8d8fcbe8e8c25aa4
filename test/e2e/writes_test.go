package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/imports"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/controlplane"
)

// writeLog records every change, in every cluster of the testbed, to the
// objects mcs-syncer writes: ServiceImports, its derived Services,
// imported EndpointSlices (all namespaces) and ServiceExports (whose status
// it writes). Each watch starts at the resourceVersion of a list made
// first, so nothing that happens after watchWrites returns is missed and
// nothing from before is replayed.
type writeLog struct {
	mu     sync.Mutex
	writes []string
}

func (l *writeLog) seen() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.writes...)
}

func watchWrites(ctx context.Context, t *testing.T) *writeLog {
	t.Helper()
	log := &writeLog{}
	ours := client.MatchingLabels{imports.ManagedByLabel: "mcs"}
	imported := client.HasLabels{mcsv1beta1.LabelServiceName}
	for _, c := range bed.Clusters {
		cl, err := client.NewWithWatch(c.RESTConfig(), client.Options{Scheme: controlplane.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range []struct {
			list client.ObjectList
			opts []client.ListOption
		}{
			{&mcsv1beta1.ServiceImportList{}, nil},
			{&corev1.ServiceList{}, []client.ListOption{ours}},
			{&discoveryv1.EndpointSliceList{}, []client.ListOption{imported}},
			{&mcsv1beta1.ServiceExportList{}, nil},
		} {
			if err := cl.List(ctx, w.list, w.opts...); err != nil {
				t.Fatal(err)
			}
			rv := w.list.(metav1.ListInterface).GetResourceVersion()
			watcher, err := cl.Watch(ctx, w.list, append(w.opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(watcher.Stop)
			go func() {
				for ev := range watcher.ResultChan() {
					if ev.Type == watch.Bookmark {
						continue
					}
					what := fmt.Sprintf("%s: %s %T", c.Name, ev.Type, ev.Object)
					if o, err := meta.Accessor(ev.Object); err == nil {
						what = fmt.Sprintf("%s: %s %T %s/%s", c.Name, ev.Type, ev.Object, o.GetNamespace(), o.GetName())
					}
					log.mu.Lock()
					log.writes = append(log.writes, what)
					log.mu.Unlock()
				}
			}()
		}
	}
	return log
}

// quiet waits until no namespace is being deleted in any cluster: the
// namespace controller's deletions of earlier tests' imports would read as
// writes.
func quiet(ctx context.Context, t *testing.T) {
	t.Helper()
	eventually(ctx, t, "no namespace terminating", func() error {
		for _, c := range bed.Clusters {
			var list corev1.NamespaceList
			if err := bed.ClientOf(t, c.Name).List(ctx, &list); err != nil {
				return err
			}
			for _, ns := range list.Items {
				if ns.DeletionTimestamp != nil {
					return fmt.Errorf("%s: namespace %s terminating", c.Name, ns.Name)
				}
			}
		}
		return nil
	})
}

// reconciledEverything returns a check that the (restarted) mcs-syncer has
// reconciled every ServiceImport and ServiceExport of every cluster at
// least once since it started.
func reconciledEverything(ctx context.Context, t *testing.T) func() error {
	return func() error {
		for _, c := range bed.Clusters {
			cl := bed.ClientOf(t, c.Name)
			var sis mcsv1beta1.ServiceImportList
			var ses mcsv1beta1.ServiceExportList
			if err := cl.List(ctx, &sis); err != nil {
				return err
			}
			if err := cl.List(ctx, &ses); err != nil {
				return err
			}
			for controller, want := range map[string]int{"import-" + c.Name: len(sis.Items), "export-" + c.Name: len(ses.Items)} {
				if want == 0 {
					continue
				}
				n, err := syncer.metric(ctx, fmt.Sprintf(`controller_runtime_reconcile_total{controller=%q,result="success"}`, controller))
				if err != nil {
					return err
				}
				if int(n) < want {
					return fmt.Errorf("%s: %v reconciles of %d objects", controller, n, want)
				}
			}
		}
		return nil
	}
}
