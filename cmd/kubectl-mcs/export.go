package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// exportOptions are export's and unexport's own flags.
type exportOptions struct {
	labels, annotations string
	// output is export's -o: kubectl's printers (k8s.io/cli-runtime's).
	output string
}

// newExportCommand returns export, or unexport (verb), of a Service of
// one cluster: the current context's, or --context's.
func newExportCommand(ctx context.Context, kube *kubeFlags, verb string, stdout, stderr io.Writer, code *int) *cobra.Command {
	var o exportOptions
	cmd := &cobra.Command{
		Use:   verb + " NAME [-n NAMESPACE]",
		Short: "Delete the ServiceExport of a Service of the current context's cluster",
		Long: `Delete the ServiceExport of a Service of the current context's cluster
(or --context's): the Service leaves the clusterset, unless other clusters
export it too.`,
		Example: "  kubectl mcs unexport web -n demo",
		Args:    cobra.ArbitraryArgs, // refused with what to do in runExport
		RunE: func(_ *cobra.Command, args []string) error {
			*code = runExport(ctx, kube, verb, o, args, stdout, stderr)
			return nil
		},
		// unexport: the Service names of the ServiceExports.
		ValidArgsFunction: kube.completeNames(&mcsv1beta1.ServiceExportList{}, true),
	}
	if verb == "export" {
		cmd.Short = "Create (or update) the ServiceExport of a Service of the current context's cluster"
		cmd.Long = `Create (or update) the ServiceExport of a Service of the current context's
cluster (or --context's), as subctl export does: the Service joins the
clusterset. The Service must exist. --exported-labels and
--exported-annotations are the labels and annotations the ServiceImports
carry (spec.exportedLabels, spec.exportedAnnotations); an export that
holds others gets these instead.`
		cmd.Example = `  # Export web of demo
  kubectl mcs export web -n demo

  # With labels for the ServiceImports, from the cluster of context west, printed as YAML
  kubectl mcs export web -n demo --context west --exported-labels tier=web -o yaml`
		cmd.Flags().StringVar(&o.labels, "exported-labels", "", "Labels the ServiceImports carry (spec.exportedLabels): k=v,...")
		cmd.Flags().StringVar(&o.annotations, "exported-annotations", "", "Annotations the ServiceImports carry (spec.exportedAnnotations): k=v,...")
		cmd.ValidArgsFunction = kube.completeNames(&corev1.ServiceList{}, true)
		cmd.Flags().StringVarP(&o.output, "output", "o", "", "Output format, as kubectl create's: name, json or yaml (default: the name and what was done).")
		_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletion("name", "json", "yaml"))
	}
	return cmd
}

// runExport runs export or unexport (verb) of the Service args name, in
// the cluster of the kubeconfig's context.
func runExport(ctx context.Context, kube *kubeFlags, verb string, o exportOptions, args []string, stdout, stderr io.Writer) int {
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
	// -o checked before any cluster is asked.
	if _, err := printerFor(o.output, ""); err != nil {
		return fail(err)
	}
	c, gv, ns, err := kube.contextClient()
	if err != nil {
		return fail(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: name}
	if verb == "unexport" {
		if err = unexport(ctx, c, key); err == nil {
			// kubectl delete's words.
			fmt.Fprintf(stdout, "serviceexport.multicluster.x-k8s.io %q deleted from %s namespace\n", key.Name, key.Namespace)
		}
	} else {
		var se *mcsv1beta1.ServiceExport
		var operation string
		if se, operation, err = export(ctx, c, key, labels, annotations); err == nil {
			err = printExport(se, o.output, operation, schemes[gv], stdout)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "kubectl mcs %s: %v\n", verb, err)
		return exitFailed
	}
	return exitOK
}

// printExport prints se as output (-o) says, or as kubectl create does
// without it (serviceexport.multicluster.x-k8s.io/web created), its kind
// and version those of s (the version the cluster serves).
func printExport(se *mcsv1beta1.ServiceExport, output, operation string, s *runtime.Scheme, out io.Writer) error {
	p, err := printerFor(output, operation)
	if err != nil {
		return err
	}
	return printers.NewTypeSetter(s).ToPrinter(p).PrintObj(se, out)
}

// printerFor returns kubectl's printer of output (-o): name (operation
// after the name), json or yaml (both without managedFields, as kubectl
// prints by default). kubectl's jsonpath and go-template printers are left
// out: their templates call methods by reflection, which keeps the linker
// from dropping unused methods, and made kubectl-mcs 42 MB → 69 MB; pipe
// -o json into jq instead.
func printerFor(output, operation string) (printers.ResourcePrinter, error) {
	switch output {
	case "", "name":
		return &printers.NamePrinter{Operation: operation}, nil
	case "json":
		return &printers.OmitManagedFieldsPrinter{Delegate: &printers.JSONPrinter{}}, nil
	case "yaml":
		return &printers.OmitManagedFieldsPrinter{Delegate: &printers.YAMLPrinter{}}, nil
	}
	return nil, fmt.Errorf("-o %q: want name, json or yaml", output)
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

// contextClient returns a client of the kubeconfig's context, the
// version of the MCS API the cluster serves, and the namespace to use.
func (f *kubeFlags) contextClient() (client.Client, schema.GroupVersion, string, error) {
	if _, err := f.requestTimeout(); err != nil {
		return nil, schema.GroupVersion{}, "", err
	}
	loader := f.loader()
	ns, _, err := loader.Namespace()
	if err != nil {
		return nil, schema.GroupVersion{}, "", err
	}
	rc, err := loader.ClientConfig()
	if err != nil {
		return nil, schema.GroupVersion{}, "", err
	}
	perRequest := requestWithin(rc, requestTimeout)
	c, gv, err := newMemberClient(rc, perRequest, perRequest)
	return c, gv, ns, err
}

// export creates key's ServiceExport, or updates its exported labels and
// annotations, and returns it as the API server holds it and what was
// done, in kubectl's words (created, configured, unchanged). The Service
// must exist: mcs-syncer would only mark the export invalid (NoService).
func export(ctx context.Context, c client.Client, key types.NamespacedName, labels, annotations map[string]string) (*mcsv1beta1.ServiceExport, string, error) {
	if err := c.Get(ctx, key, &corev1.Service{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", fmt.Errorf("the Service %s does not exist in this cluster: create it first", key)
		}
		return nil, "", err
	}
	se := &mcsv1beta1.ServiceExport{}
	err := c.Get(ctx, key, se)
	switch {
	case apierrors.IsNotFound(err):
		se = &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Spec: mcsv1beta1.ServiceExportSpec{ExportedLabels: labels, ExportedAnnotations: annotations}}
		if err := c.Create(ctx, se); err != nil {
			return nil, "", err
		}
		return se, "created", nil
	case err != nil:
		return nil, "", err
	case maps.Equal(se.Spec.ExportedLabels, labels) && maps.Equal(se.Spec.ExportedAnnotations, annotations):
		return se, "unchanged", nil
	}
	se.Spec.ExportedLabels, se.Spec.ExportedAnnotations = labels, annotations
	if err := c.Update(ctx, se); err != nil {
		return nil, "", err
	}
	return se, "configured", nil
}

// unexport deletes key's ServiceExport.
func unexport(ctx context.Context, c client.Client, key types.NamespacedName) error {
	se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := c.Delete(ctx, se); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the Service %s is not exported from this cluster (no ServiceExport)", key)
		}
		return err
	}
	return nil
}
