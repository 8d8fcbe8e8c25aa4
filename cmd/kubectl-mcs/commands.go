package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// run runs the command line args (without the program's name) and
// returns the exit code: the command's own, or exitUsage when cobra
// refuses the command line (an unknown command or flag, a bad value).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	code := exitOK
	root := newRootCommand(ctx, stdout, stderr, &code)
	if len(args) == 0 {
		// Without a command: the help, on stderr, and exit 2 (a script
		// that forgot the command fails).
		root.SetOut(stderr)
		_ = root.Help()
		return exitUsage
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\nSee '%s --help' for usage.\n", cmd.CommandPath(), err, cmd.CommandPath())
		return exitUsage
	}
	return code
}

// newRootCommand returns kubectl mcs and its commands; the command that
// runs sets *code. Their flags are kubectl's (--kubeconfig, --context,
// --namespace, --request-timeout: kubeFlags) and their own, and each completes its arguments and flags in the shell
// (`kubectl mcs completion`, and kubectl's own completion of plugins
// through kubectl_complete-mcs).
func newRootCommand(ctx context.Context, stdout, stderr io.Writer, code *int) *cobra.Command {
	kube := &kubeFlags{}
	root := &cobra.Command{
		Use:   "kubectl-mcs",
		Short: "The clusterset of mcs-syncer, seen from its members",
		Long: `The clusterset of mcs-syncer, seen from its members.

status, diagnose, gather and verify read the clusterset as mcs-syncer's
own config names it (--clusterset-config), or as the contexts of a
kubeconfig, one per member, named after its cluster ID (--kubeconfig,
default $KUBECONFIG or ~/.kube/config; --contexts: which, default all).
In hub mode, the members without connection settings of their own are
read through their publications in the hub of the config (or of
--hub-kubeconfig). export and unexport write the ServiceExport of one
cluster: the current context's, or --context's.

Exit codes: 0 done (converged, every check passed, written); 1 not done
(not converged, a check failed, a write refused), naming why; 2 the
command could not run (bad input, no clusterset).`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl mcs"},
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	kube.addFlags(root.PersistentFlags())
	_ = root.RegisterFlagCompletionFunc("context", kube.completeContexts)
	_ = root.RegisterFlagCompletionFunc("namespace", kube.completeNames(&corev1.NamespaceList{}, false))
	root.AddCommand(
		newStatusCommand(ctx, kube, stdout, stderr, code),
		newDiagnoseCommand(ctx, kube, stdout, stderr, code),
		newGatherCommand(ctx, kube, stdout, stderr, code),
		newVerifyCommand(ctx, kube, stdout, stderr, code),
		newExportCommand(ctx, kube, "export", stdout, stderr, code),
		newExportCommand(ctx, kube, "unexport", stdout, stderr, code),
	)
	return root
}

// kubeFlags are kubectl's flags that kubectl mcs takes: --kubeconfig,
// --context, -n/--namespace and --request-timeout, as client-go's
// clientcmd binds them, which k8s.io/cli-runtime's ConfigFlags wraps (and
// kubectl's meaning: a kubeconfig's path, its context, the namespace, the
// bound of each request). cli-runtime's genericclioptions itself is left
// out: it brings kustomize and the resource builder, and made the plugin
// 42 MB → 94 MB (its printers are used: export's -o). kubectl's other
// flags (--server, --token, --as, ...) are left out too: the members'
// kubeconfig says how to reach each.
type kubeFlags struct {
	kubeconfig string
	overrides  clientcmd.ConfigOverrides
}

func (f *kubeFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.kubeconfig, clientcmd.RecommendedConfigPathFlag, "", "Path to the kubeconfig file: status, diagnose, gather and verify read a context per member, named after its cluster ID (default $KUBECONFIG or ~/.kube/config).")
	names := clientcmd.RecommendedConfigOverrideFlags("")
	names.CurrentContext.Description = "export, unexport: the kubeconfig's context of the cluster that exports (default its current one). The other commands read the members of --contexts."
	names.CurrentContext.BindStringFlag(fs, &f.overrides.CurrentContext)
	names.ContextOverrideFlags.Namespace.Description = "The namespace of the Service named without one (default the context's, for export and unexport)."
	names.ContextOverrideFlags.Namespace.BindTransformingStringFlag(fs, &f.overrides.Context.Namespace, clientcmd.RemoveNamespacesPrefix)
	names.Timeout.Description = "How long to wait for each request to an API server (1s, 2m, or seconds; 0: the default, 10s), within --timeout where a command has one."
	names.Timeout.BindStringFlag(fs, &f.overrides.Timeout)
}

// loader is the kubeconfig's client config, with the flags' overrides.
func (f *kubeFlags) loader() clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &f.overrides)
}

// requestTimeout is --request-timeout as a duration: kubectl's format,
// a duration or whole seconds; 0 leaves each request's bound to the
// command.
func (f *kubeFlags) requestTimeout() (time.Duration, error) {
	s := strings.TrimSpace(f.overrides.Timeout)
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		seconds, serr := strconv.Atoi(s)
		if serr != nil {
			return 0, fmt.Errorf("--request-timeout: %q: want a duration (1s, 2m) or whole seconds", s)
		}
		d = time.Duration(seconds) * time.Second
	}
	if d < 0 {
		return 0, fmt.Errorf("--request-timeout: %q: want 0 or more", s)
	}
	return d, nil
}

// namespace is --namespace ("": not given).
func (f *kubeFlags) namespace() string { return f.overrides.Context.Namespace }

// clustersetCommand registers the flags that status, diagnose, gather and
// verify share (where the members are, --syncer, -o, --timeout) and
// completes their flags' values.
func clustersetCommand(cmd *cobra.Command, kube *kubeFlags, o *options, timeout time.Duration) {
	o.kube = kube
	o.register(cmd.Flags(), timeout)
	_ = cmd.RegisterFlagCompletionFunc("output", fixedCompletion("text", "wide", "json", "yaml"))
	_ = cmd.RegisterFlagCompletionFunc("contexts", kube.completeContextList)
	_ = cmd.RegisterFlagCompletionFunc("clusterset-config", yamlFiles)
	_ = cmd.RegisterFlagCompletionFunc("hub-kubeconfig", cobra.NoFileCompletions)
	_ = cmd.RegisterFlagCompletionFunc("syncer", cobra.NoFileCompletions)
}

// cutLast splits s at its last sep: what is before it ("" without one)
// and what follows.
func cutLast(s, sep string) (string, string) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):]
	}
	return "", s
}

// contextNames are the contexts of the kubeconfig (--kubeconfig, or
// $KUBECONFIG, or ~/.kube/config), sorted; none when it cannot be read.
func (f *kubeFlags) contextNames() []string {
	raw, err := f.loader().RawConfig()
	if err != nil {
		return nil
	}
	var names []string
	for name := range raw.Contexts {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// completeContextList completes a comma-separated list of contexts
// (--contexts, --from): its last element.
func (f *kubeFlags) completeContextList(_ *cobra.Command, _ []string, typed string) ([]string, cobra.ShellCompDirective) {
	done, _ := cutLast(typed, ",")
	listed := strings.Split(done, ",")
	var out []string
	for _, name := range f.contextNames() {
		switch {
		case done == "":
		case slices.Contains(listed, name):
			continue
		default:
			name = done + "," + name
		}
		out = append(out, name)
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

// completeContexts completes --context.
func (f *kubeFlags) completeContexts(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return f.contextNames(), cobra.ShellCompDirectiveNoFileComp
}

// completionTimeout bounds what a completion asks the API server: a
// shell waits for it.
const completionTimeout = 5 * time.Second

// completeNames completes an argument with the names of the objects of
// list's kind in the context's cluster: those of its namespace where
// namespaced, the first argument only.
func (f *kubeFlags) completeNames(list client.ObjectList, namespaced bool) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, _, ns, err := f.contextClient()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		var opts []client.ListOption
		if namespaced {
			opts = append(opts, client.InNamespace(ns))
		}
		if err := c.List(ctx, list, opts...); err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var names []string
		for _, item := range items {
			if o, err := meta.Accessor(item); err == nil {
				names = append(names, o.GetName())
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

func fixedCompletion(values ...string) cobra.CompletionFunc {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return values, cobra.ShellCompDirectiveNoFileComp
	}
}

func yamlFiles(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return []string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt
}

func newStatusCommand(ctx context.Context, kube *kubeFlags, stdout, stderr io.Writer, code *int) *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "status [NAMESPACE/NAME | NAME -n NAMESPACE]",
		Short: "Report every member, every exported Service and its import into each member",
		Long: `Report every member, every exported Service and its import into each member.

Each member is listed with its health as mcs-syncer sees it (up, held,
silent, down, since when; its last heartbeat; the version of its
mcs-syncer: read from /members of the mcs-syncer Pods in the members, or
of --syncer), each exported Service with the clusters that export it, its
conflicts, and per member its ServiceImport (clusterset IP, Ready) and
the endpoints imported from each source against those the source holds
now. -o wide adds each member's state and what each mcs-syncer sees of
it, and each import's type and clusters.

Exits 0 when every import is converged, 1 when not (naming what), 2 when
it cannot run.`,
		Example: `  # Every exported Service, the members being mcs-syncer's own config's
  kubectl mcs status --clusterset-config clusterset.yaml

  # One Service, the members being the contexts of a kubeconfig
  kubectl mcs status demo/web --kubeconfig all.kubeconfig --contexts east,west,north

  # The same, as JSON
  kubectl mcs status web -n demo --kubeconfig all.kubeconfig -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			*code = runStatus(ctx, &o, args, stdout, stderr)
			return nil
		},
	}
	clustersetCommand(cmd, kube, &o, 30*time.Second)
	return cmd
}

func newDiagnoseCommand(ctx context.Context, kube *kubeFlags, stdout, stderr io.Writer, code *int) *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "diagnose",
		Short: "Check what the clusterset needs of its members",
		Long: `Check what the clusterset needs of its members.

The MCS CRDs served in a version mcs-syncer speaks, every version the
CRDs store still served, members' credentials not expiring within 7 days,
CoreDNS answering clusterset.local, pod and service CIDRs that do not
overlap, mcs-syncer ready at one version, clocks that agree; in hub mode
(a config with a hub, or --hub-kubeconfig), the hub's admission policy
and what each member's hub identity may do. Each check passes, fails
(saying what to do), warns (saying what to do, without failing) or is
skipped (saying why).

Exits 1 when a check fails, 2 when it cannot run.`,
		Example: `  # Every check of the members of mcs-syncer's config, and of its hub
  kubectl mcs diagnose --clusterset-config clusterset.yaml

  # A hub administrator's check of every member's hub identity
  kubectl mcs diagnose --kubeconfig all.kubeconfig --hub-kubeconfig hub-admin.kubeconfig`,
		Args: noArguments,
		RunE: func(_ *cobra.Command, _ []string) error {
			*code = runDiagnose(ctx, &o, stdout, stderr)
			return nil
		},
	}
	clustersetCommand(cmd, kube, &o, 30*time.Second)
	return cmd
}

func newGatherCommand(ctx context.Context, kube *kubeFlags, stdout, stderr io.Writer, code *int) *cobra.Command {
	var o options
	var file string
	cmd := &cobra.Command{
		Use:   "gather [-f BUNDLE.tar.gz]",
		Short: "Write a support bundle of the clusterset",
		Long: `Write a support bundle of the clusterset.

The bundle holds each member's ServiceExports, ServiceImports, imported
EndpointSlices and their events, and each mcs-syncer Pod's log, /metrics
and /readyz?verbose (through the API server's pods/proxy), with the
status and diagnose reports. It holds no credentials.`,
		Example: `  # A bundle named after the time, in the current folder
  kubectl mcs gather --clusterset-config clusterset.yaml

  # Into a file of your choice
  kubectl mcs gather -f mcs.tar.gz --kubeconfig all.kubeconfig`,
		Args: noArguments,
		RunE: func(_ *cobra.Command, _ []string) error {
			*code = runGather(ctx, &o, file, stdout, stderr)
			return nil
		},
	}
	clustersetCommand(cmd, kube, &o, 30*time.Second)
	cmd.Flags().StringVarP(&file, "file", "f", "mcs-gather-"+time.Now().UTC().Format("20060102-150405")+".tar.gz", "The archive to write.")
	_ = cmd.RegisterFlagCompletionFunc("file", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"gz"}, cobra.ShellCompDirectiveFilterFileExt
	})
	return cmd
}

func newVerifyCommand(ctx context.Context, kube *kubeFlags, stdout, stderr io.Writer, code *int) *cobra.Command {
	var o options
	var v verifyOptions
	cmd := &cobra.Command{
		Use:   "verify [NAMESPACE/NAME | NAME -n NAMESPACE]",
		Short: "Send real traffic to each imported Service from a client Pod in each member",
		Long: `Send real traffic to each imported Service from a client Pod in each member.

In each member (or those of --from) a short-lived client Pod (mcs-syncer's
image, its probe) resolves <name>.<namespace>.svc.clusterset.local of each
imported Service (or the one named), connects to its clusterset IP on
each TCP port, and to the endpoints each source cluster contributed; the
report says which clusters answered against those that export the
Service. The Pods are deleted, also when interrupted (they carry
app.kubernetes.io/name=mcs-verify). --overrides patches the Pods (node
selectors, tolerations).

Exits 1 naming what failed, 2 when it cannot run.`,
		Example: `  # web of demo, from north's client Pod
  kubectl mcs verify demo/web --kubeconfig all.kubeconfig --from north

  # Every imported Service, from every member, with an image of your registry
  kubectl mcs verify --clusterset-config clusterset.yaml --image registry.example/mcs-syncer:v0.1.0`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			*code = runVerify(ctx, &o, v, args, stdout, stderr)
			return nil
		},
	}
	// Pods start in seconds to a minute: verify's default is longer.
	clustersetCommand(cmd, kube, &o, 3*time.Minute)
	v.register(cmd.Flags())
	_ = cmd.RegisterFlagCompletionFunc("from", kube.completeContextList)
	_ = cmd.RegisterFlagCompletionFunc("image", cobra.NoFileCompletions)
	return cmd
}

// noArguments refuses any argument, saying so.
func noArguments(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("no arguments, not %q", args)
	}
	return nil
}
