package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/verify"
)

// verifyLabels mark the client Pods of verify: what a cleanup after a
// killed kubectl-mcs deletes (kubectl delete pods -l ...).
var verifyLabels = map[string]string{"app.kubernetes.io/name": "mcs-verify", "app.kubernetes.io/managed-by": "kubectl-mcs"}

// verifyOptions are verify's own flags.
type verifyOptions struct {
	from       string
	image      string
	overrides  string
	tries      int
	perCluster int
}

// runVerify runs verify: from each member named by --from (default
// every member reached directly), a client Pod checks every Service that
// member imports (or the one args names) with real traffic.
func runVerify(ctx context.Context, o *options, v verifyOptions, args []string, stdout, stderr io.Writer) int {
	only, err := v.check(args, o.kube.namespace())
	if err != nil {
		fmt.Fprintln(stderr, "kubectl mcs verify:", err)
		return exitUsage
	}
	// Interrupted (Ctrl-C, SIGTERM), the Pods are deleted all the same.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	conns, leftOut, err := o.members(ctx)
	if err == nil {
		sayLeftOut(stderr, "verify", leftOut)
		conns, err = fromMembers(conns, v.from)
	}
	if err != nil {
		fmt.Fprintln(stderr, "kubectl mcs verify:", err)
		return exitUsage
	}
	out := v.verifyAll(ctx, conns, only, o.timeout)
	if err := write(stdout, o.output, out, out.text); err != nil {
		fmt.Fprintln(stderr, "kubectl mcs verify:", err)
		return exitUsage
	}
	if len(out.Problems) > 0 {
		if o.output == "json" || o.output == "yaml" {
			fmt.Fprintf(stderr, "verify failed: %s\n", strings.Join(out.Problems, "; "))
		}
		return exitFailed
	}
	return exitOK
}

func (v *verifyOptions) register(fs *pflag.FlagSet) {
	fs.StringVar(&v.from, "from", "", "Comma-separated members whose imports to verify, from a client Pod in each (default every member reached directly).")
	fs.StringVar(&v.image, "image", "", "mcs-syncer's image (its probe runs in the client Pods; default the image of an mcs-syncer Pod of the member).")
	fs.StringVar(&v.overrides, "overrides", "", "A JSON patch (strategic merge) applied to each client Pod, as kubectl run --overrides: node selectors, tolerations, ...")
	fs.IntVar(&v.tries, "tries", 5, "Connections to each clusterset IP and port.")
	fs.IntVar(&v.perCluster, "endpoints-per-cluster", 3, "Endpoints of each source cluster to connect to.")
}

// check checks verify's flags and reads its one argument (the Service,
// optional; namespace: --namespace).
func (v verifyOptions) check(args []string, namespace string) (*types.NamespacedName, error) {
	only, err := onlyService(args, namespace)
	switch {
	case err != nil:
	case v.tries < 1 || v.perCluster < 1:
		err = errors.New("--tries and --endpoints-per-cluster: want 1 or more")
	case v.overrides != "" && !json.Valid([]byte(v.overrides)):
		err = errors.New("--overrides: not JSON")
	}
	return only, err
}

// verifyAll verifies from each of conns, one after the other.
func (v verifyOptions) verifyAll(ctx context.Context, conns []memberConn, only *types.NamespacedName, total time.Duration) verifyReport {
	var out verifyReport
	for _, conn := range conns {
		got, err := v.verifyFrom(ctx, conn, only, total)
		if err != nil {
			out.Problems = append(out.Problems, fmt.Sprintf("%s: %v", conn.id, err))
		}
		out.Reports = append(out.Reports, got...)
	}
	for _, r := range out.Reports {
		out.Problems = append(out.Problems, r.Problems...)
	}
	if len(out.Reports) == 0 && len(out.Problems) == 0 {
		out.Problems = append(out.Problems, "no ServiceImport to verify in "+memberIDs(conns))
	}
	return out
}

// fromMembers returns the members of conns named in from (all reached
// directly if empty); one read through the hub cannot run a Pod.
func fromMembers(conns []memberConn, from string) ([]memberConn, error) {
	var out []memberConn
	names := strings.Split(from, ",")
	for _, c := range conns {
		if from != "" && !slices.Contains(names, c.id) {
			continue
		}
		if c.rest == nil {
			if from != "" {
				return nil, fmt.Errorf("--from %s: it is read through the hub, and no client Pod can run there from here: give its kubeconfig", c.id)
			}
			continue
		}
		out = append(out, c)
	}
	for _, n := range names {
		if n != "" && !slices.ContainsFunc(conns, func(c memberConn) bool { return c.id == n }) {
			return nil, fmt.Errorf("--from %s: no such member", n)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no member to verify from")
	}
	return out, nil
}

func memberIDs(conns []memberConn) string {
	var ids []string
	for _, c := range conns {
		ids = append(ids, c.id)
	}
	return strings.Join(ids, ", ")
}

// verifyFrom verifies the imports of one member: a client Pod per
// namespace, one after the other.
func (v verifyOptions) verifyFrom(ctx context.Context, conn memberConn, only *types.NamespacedName, total time.Duration) ([]verify.Report, error) {
	c, _, err := newMemberClient(conn.rest, requestWithin(conn.rest, total), requestWithin(conn.rest, total))
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(withTimeout(conn.rest, requestWithin(conn.rest, total)))
	if err != nil {
		return nil, err
	}
	targets, err := targetsOf(ctx, c, conn.id, only)
	if err != nil {
		return nil, err
	}
	if len(targets) == 0 {
		return nil, nil
	}
	image := v.image
	if image == "" {
		if image, err = syncerImage(ctx, c); err != nil {
			return nil, err
		}
	}
	byNamespace := map[string][]verify.Target{}
	for _, t := range targets {
		byNamespace[t.Namespace] = append(byNamespace[t.Namespace], t)
	}
	var reports []verify.Report
	for _, ns := range slices.Sorted(maps.Keys(byNamespace)) {
		got, err := v.verifyNamespace(ctx, kube, image, byNamespace[ns], total)
		if err != nil {
			return reports, fmt.Errorf("namespace %s: %w", ns, err)
		}
		reports = append(reports, got...)
	}
	return reports, nil
}

// verifyNamespace runs the checks of the targets of one namespace in one
// client Pod there, and judges each target by its own results (their IDs
// start with the target's name).
func (v verifyOptions) verifyNamespace(ctx context.Context, kube kubernetes.Interface, image string, targets []verify.Target, total time.Duration) ([]verify.Report, error) {
	var checks []verify.Check
	planned := map[string][]verify.Check{}
	for _, t := range targets {
		for _, ch := range t.Plan(v.tries, v.perCluster) {
			planned[t.Name] = append(planned[t.Name], ch)
			ch.ID = t.Name + " " + ch.ID
			checks = append(checks, ch)
		}
	}
	results, err := runClientPod(ctx, kube, clientPod(targets[0].Namespace, image, checks, total), []byte(v.overrides))
	if err != nil {
		return nil, err
	}
	var reports []verify.Report
	for _, t := range targets {
		own := map[string]verify.Result{}
		for id, r := range results {
			if name, check, ok := strings.Cut(id, " "); ok && name == t.Name {
				own[check] = r
			}
		}
		reports = append(reports, verify.Evaluate(t, planned[t.Name], own))
	}
	return reports, nil
}

// targetsOf reads the member's ServiceImports (or the one named) and their
// imported EndpointSlices.
func targetsOf(ctx context.Context, c client.Client, member string, only *types.NamespacedName) ([]verify.Target, error) {
	var imports []mcsv1beta1.ServiceImport
	if only != nil {
		var si mcsv1beta1.ServiceImport
		if err := c.Get(ctx, *only, &si); err != nil {
			return nil, fmt.Errorf("ServiceImport %s: %w", only, err)
		}
		imports = append(imports, si)
	} else {
		var list mcsv1beta1.ServiceImportList
		if err := c.List(ctx, &list); err != nil {
			return nil, fmt.Errorf("list ServiceImports: %w", err)
		}
		imports = list.Items
	}
	var targets []verify.Target
	for i := range imports {
		si := &imports[i]
		var imported discoveryv1.EndpointSliceList
		if err := c.List(ctx, &imported, client.InNamespace(si.Namespace), client.MatchingLabels{mcsv1beta1.LabelServiceName: si.Name}); err != nil {
			return nil, fmt.Errorf("list the EndpointSlices of %s/%s: %w", si.Namespace, si.Name, err)
		}
		targets = append(targets, verify.TargetOf(member, si, imported.Items))
	}
	return targets, nil
}

// syncerImage is the image of an mcs-syncer Pod of the member, the image
// the client Pods run (its probe): one its nodes have, or can pull.
func syncerImage(ctx context.Context, c client.Reader) (string, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, syncerPods); err != nil {
		return "", fmt.Errorf("find mcs-syncer's image (pass --image to name it): %w", err)
	}
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			if c.Name == "mcs-syncer" {
				return c.Image, nil
			}
		}
	}
	return "", errors.New("no mcs-syncer Pod runs here to take its image from: pass --image (mcs-syncer's image, as make image builds it, loaded into the nodes or in a registry they pull from)")
}

// clientPod is the client Pod of checks in namespace ns: mcs-syncer's
// image running its probe, as the restricted Pod Security Standard
// allows, ended by the kubelet after total if nobody deletes it.
func clientPod(ns, image string, checks []verify.Check, total time.Duration) *corev1.Pod {
	raw, _ := json.Marshal(checks)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "mcs-verify-", Namespace: ns, Labels: verifyLabels},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			ActiveDeadlineSeconds:         ptr.To(int64(total.Seconds()) + 1),
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "probe", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Args: []string{verify.ProbeCommand, "-timeout", "3s", "-checks", string(raw)},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
				},
			}},
		},
	}
}

// waitingReasons are the reasons a container waits that no wait ends.
var waitingReasons = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError", "CreateContainerError"}

// runClientPod creates pod (patched with overrides), waits until it ends,
// reads its results from its log, and deletes it, also when ctx ends
// first (an interrupt).
func runClientPod(ctx context.Context, kube kubernetes.Interface, pod *corev1.Pod, overrides []byte) (map[string]verify.Result, error) {
	if len(overrides) > 0 {
		var err error
		if pod, err = patched(pod, overrides); err != nil {
			return nil, err
		}
	}
	pods := kube.CoreV1().Pods(pod.Namespace)
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create the client Pod: %w", err)
	}
	defer func() {
		cleanup, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = pods.Delete(cleanup, created.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	}()
	name := pod.Namespace + "/" + created.Name
	var last *corev1.Pod
	err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := pods.Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = got
		for _, s := range got.Status.ContainerStatuses {
			if w := s.State.Waiting; w != nil && slices.Contains(waitingReasons, w.Reason) {
				return false, fmt.Errorf("client Pod %s cannot start: %s: %s (--image: mcs-syncer's image, one the nodes have or can pull)", name, w.Reason, w.Message)
			}
		}
		return got.Status.Phase == corev1.PodSucceeded || got.Status.Phase == corev1.PodFailed, nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("client Pod %s did not end in time (%s): %w", name, podState(last), ctx.Err())
		}
		return nil, err
	}
	log, err := pods.GetLogs(created.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the log of client Pod %s: %w", name, err)
	}
	if last.Status.Phase == corev1.PodFailed {
		return nil, fmt.Errorf("client Pod %s failed (%s): %s", name, podState(last), strings.TrimSpace(string(log)))
	}
	return verify.ReadResults(log), nil
}

// patched applies a strategic merge patch to pod.
func patched(pod *corev1.Pod, patch []byte) (*corev1.Pod, error) {
	raw, err := json.Marshal(pod)
	if err != nil {
		return nil, err
	}
	merged, err := strategicpatch.StrategicMergePatch(raw, patch, corev1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("--overrides: %w", err)
	}
	out := &corev1.Pod{}
	if err := json.Unmarshal(merged, out); err != nil {
		return nil, fmt.Errorf("--overrides: %w", err)
	}
	return out, nil
}

// podState says where a client Pod is: its phase, and why it waits or
// ended.
func podState(p *corev1.Pod) string {
	if p == nil {
		return "not read"
	}
	state := string(p.Status.Phase)
	for _, s := range p.Status.ContainerStatuses {
		switch {
		case s.State.Waiting != nil:
			state += ", waiting: " + s.State.Waiting.Reason
		case s.State.Terminated != nil:
			state += fmt.Sprintf(", exited %d", s.State.Terminated.ExitCode)
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			state += ", not scheduled: " + c.Message
		}
	}
	return state
}

// verifyReport is verify's output.
type verifyReport struct {
	Reports  []verify.Report `json:"reports"`
	Problems []string        `json:"problems,omitempty"`
}

func (r verifyReport) text() string {
	var b strings.Builder
	for _, rep := range r.Reports {
		kind := "ClusterSetIP"
		if rep.Headless {
			kind = "Headless"
		}
		fmt.Fprintf(&b, "%s  %s/%s  %s\n", rep.Consumer, rep.Namespace, rep.Name, kind)
		fmt.Fprintf(&b, "  dns  %s -> %s\n", rep.DNS.What, rep.DNS.Detail)
		for _, ip := range rep.IPs {
			fmt.Fprintf(&b, "  ip   %s: %d/%d connections answered\n", strings.TrimPrefix(ip.What, "clusterset IP "), ip.Answered, ip.Tries)
		}
		for _, c := range rep.Clusters {
			exports := "exports"
			if !c.Exports {
				exports = "does not export (endpoints imported all the same)"
			}
			fmt.Fprintf(&b, "  %s  %s; %d ready endpoints, %d tried, %d answered\n", c.Cluster, exports, c.Endpoints, c.Tried, c.Answered)
		}
		fmt.Fprintf(&b, "  answered: %s  (exported by: %s)\n", orNone(rep.Answered), orNone(rep.Exporters))
	}
	if len(r.Problems) == 0 {
		b.WriteString("verified: every cluster that exports answered\n")
	}
	for _, p := range r.Problems {
		fmt.Fprintf(&b, "FAILED: %s\n", p)
	}
	return b.String()
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
