package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// exportOptions are export's and unexport's flags.
type exportOptions struct {
	kubeconfig, context, namespace string
	labels, annotations            string
}

// runExport runs export or unexport (verb) of the Service args name, in
// the cluster of the kubeconfig's context.
func runExport(ctx context.Context, verb string, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(verb, stderr)
	var o exportOptions
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig (default $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&o.context, "context", "", "the kubeconfig's context: the cluster that exports (default its current one)")
	fs.StringVar(&o.namespace, "n", "", "the Service's namespace (default the context's)")
	if verb == "export" {
		fs.StringVar(&o.labels, "exported-labels", "", "labels the ServiceImports carry (spec.exportedLabels): k=v,...")
		fs.StringVar(&o.annotations, "exported-annotations", "", "annotations the ServiceImports carry (spec.exportedAnnotations): k=v,...")
	}
	args, err := parse(fs, args)
	if err != nil {
		return exitUsage
	}
	var name string
	if len(args) > 0 {
		name, args = args[0], args[1:]
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "kubectl mcs %s: %v\n", verb, err)
		return exitUsage
	}
	switch {
	case name == "":
		return fail(fmt.Errorf("which Service? kubectl mcs %s <service> [-n namespace]", verb))
	case len(args) > 0:
		return fail(fmt.Errorf("one Service name, not %q", append([]string{name}, args...)))
	}
	if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
		return fail(fmt.Errorf("%q is no Service name: %s", name, strings.Join(errs, "; ")))
	}
	labels, err := keyValues("--exported-labels", o.labels)
	if err != nil {
		return fail(err)
	}
	annotations, err := keyValues("--exported-annotations", o.annotations)
	if err != nil {
		return fail(err)
	}
	c, ns, err := contextClient(o)
	if err != nil {
		return fail(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: name}
	if verb == "unexport" {
		err = unexport(ctx, c, key, stdout)
	} else {
		err = export(ctx, c, key, labels, annotations, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "kubectl mcs %s: %v\n", verb, err)
		return exitFailed
	}
	return exitOK
}

// keyValues reads k=v,... (empty: none).
func keyValues(flagName, s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s: %q is not key=value", flagName, kv)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("%s: %q is no key: %s", flagName, k, strings.Join(errs, "; "))
		}
		out[k] = v
	}
	return out, nil
}

// contextClient returns a client of the kubeconfig's context and the
// namespace to use.
func contextClient(o exportOptions) (client.Client, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.kubeconfig != "" {
		rules.ExplicitPath = o.kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{
		CurrentContext: o.context, Context: clientcmdapi.Context{Namespace: o.namespace}})
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, "", err
	}
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, "", err
	}
	c, _, err := newMemberClient(rc, requestTimeout, requestTimeout)
	return c, ns, err
}

// export creates key's ServiceExport, or updates its exported labels and
// annotations. The Service must exist: mcs-syncer would only mark the
// export invalid (NoService).
func export(ctx context.Context, c client.Client, key types.NamespacedName, labels, annotations map[string]string, out io.Writer) error {
	if err := c.Get(ctx, key, &corev1.Service{}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the Service %s does not exist in this cluster: create it first", key)
		}
		return err
	}
	se := &mcsv1beta1.ServiceExport{}
	err := c.Get(ctx, key, se)
	switch {
	case apierrors.IsNotFound(err):
		se = &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Spec: mcsv1beta1.ServiceExportSpec{ExportedLabels: labels, ExportedAnnotations: annotations}}
		if err := c.Create(ctx, se); err != nil {
			return err
		}
		fmt.Fprintf(out, "serviceexport.multicluster.x-k8s.io/%s created in %s\n", key.Name, key.Namespace)
		return nil
	case err != nil:
		return err
	case maps.Equal(se.Spec.ExportedLabels, labels) && maps.Equal(se.Spec.ExportedAnnotations, annotations):
		fmt.Fprintf(out, "serviceexport.multicluster.x-k8s.io/%s unchanged in %s\n", key.Name, key.Namespace)
		return nil
	}
	se.Spec.ExportedLabels, se.Spec.ExportedAnnotations = labels, annotations
	if err := c.Update(ctx, se); err != nil {
		return err
	}
	fmt.Fprintf(out, "serviceexport.multicluster.x-k8s.io/%s updated in %s\n", key.Name, key.Namespace)
	return nil
}

// unexport deletes key's ServiceExport.
func unexport(ctx context.Context, c client.Client, key types.NamespacedName, out io.Writer) error {
	se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := c.Delete(ctx, se); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the Service %s is not exported from this cluster (no ServiceExport)", key)
		}
		return err
	}
	fmt.Fprintf(out, "serviceexport.multicluster.x-k8s.io/%s deleted in %s\n", key.Name, key.Namespace)
	return nil
}
