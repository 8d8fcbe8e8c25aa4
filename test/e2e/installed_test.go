package e2e

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/status"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/audit"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
)

// The e2e tests with mcs-syncer as Pods, installed as docs/user-guide.md
// says: its blocks marked `sh build-image` and `sh install-<mode>` are run
// as they are written there, in a folder holding a copy of config/ and
// hack/, with a kubeconfig whose contexts are named after the members.

// installedNamespace is where config/ installs mcs-syncer.
const installedNamespace = "mcs-system"

// docBlock returns the code of the block of docs/user-guide.md whose info
// string is "sh <tag>".
func docBlock(t *testing.T, tag string) string {
	t.Helper()
	root, err := host.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "docs", "user-guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var code strings.Builder
	in, found := false, false
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := scanner.Text()
		switch {
		case !in && line == "```sh "+tag:
			in, found = true, true
		case in && line == "```":
			in = false
		case in:
			code.WriteString(line + "\n")
		}
	}
	if !found || in {
		t.Fatalf("docs/user-guide.md has no complete block ```sh %s", tag)
	}
	return code.String()
}

// runDoc runs the block tag of the user guide with bash (-e, -u,
// pipefail) in dir, with the testbed's kubectl first in PATH and
// KUBECONFIG set to kubeconfig (if not empty), and returns its output.
func runDoc(ctx context.Context, t *testing.T, dir, kubeconfig, tag string) string {
	t.Helper()
	return runDocWithPath(ctx, t, dir, kubeconfig, tag, bed.BinDir)
}

// runDocWithPath is runDoc with path (a PATH list) first in PATH instead
// of the testbed's kubectl alone, and env (NAME=value) in its
// environment.
func runDocWithPath(ctx context.Context, t *testing.T, dir, kubeconfig, tag, path string, env ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", docBlock(t, tag))
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), env...), "PATH="+path+string(os.PathListSeparator)+os.Getenv("PATH"))
	if kubeconfig != "" {
		cmd.Env = append(cmd.Env, "KUBECONFIG="+kubeconfig)
	}
	start := time.Now()
	out := &stampedLines{start: start}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		t.Fatalf("the user guide's block %q failed after %s: %v\n%s", tag, time.Since(start).Round(time.Millisecond), err, out.b.String())
	}
	t.Logf("the user guide's block %q ran in %s:\n%s", tag, time.Since(start).Round(time.Millisecond), out.b.String())
	return out.b.String()
}

// stampedLines collects output, each line prefixed by the seconds since
// start: where a block spends its time.
type stampedLines struct {
	start   time.Time
	mu      sync.Mutex
	b       strings.Builder
	midLine bool
}

func (s *stampedLines) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, line := range strings.SplitAfter(string(p), "\n") {
		if line == "" {
			continue
		}
		if !s.midLine {
			fmt.Fprintf(&s.b, "%6.1fs ", time.Since(s.start).Seconds())
		}
		s.b.WriteString(line)
		s.midLine = !strings.HasSuffix(line, "\n")
	}
	return len(p), nil
}

// installFolder returns a new folder for a user's install: a copy of
// config/ and hack/ of this checkout, and kubeconfig, the user's
// kubeconfig of every member and the hub.
func installFolder(t *testing.T) (dir, kubeconfig string) {
	t.Helper()
	root, err := host.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	for _, sub := range []string{"config", "hack"} {
		if err := os.CopyFS(filepath.Join(dir, sub), os.DirFS(filepath.Join(root, sub))); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "hack", "kubeconfig.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := bed.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	return dir, kubeconfig
}

// buildAndLoadImage runs the user guide's build-image block in the
// checkout and imports the archive into every real node, as `ctr -n
// k8s.io images import` on each node does.
func buildAndLoadImage(ctx context.Context, t *testing.T) {
	t.Helper()
	root, err := host.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	runDoc(ctx, t, root, "", "build-image")
	for _, c := range bed.Clusters {
		if err := c.RealNode.ImportImage(ctx, filepath.Join(root, "bin", "mcs-syncer.tar")); err != nil {
			t.Fatal(err)
		}
	}
}

// uninstall removes what the user guide says to remove in each cluster
// (the Deployment, the metrics Service, the Secret) and waits until no
// mcs-syncer Pod is left, so that none writes after the test.
func uninstall(ctx context.Context, t *testing.T, clusters ...string) {
	t.Helper()
	for _, c := range clusters {
		cl := bed.ClientOf(t, c)
		for _, obj := range []client.Object{
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "mcs-syncer", Namespace: installedNamespace}},
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "mcs-syncer-metrics", Namespace: installedNamespace}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mcs-syncer-clusterset", Namespace: installedNamespace}},
		} {
			if err := cl.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("%s: uninstall %T: %v", c, obj, err)
			}
		}
	}
	for _, c := range clusters {
		cl := bed.ClientOf(t, c)
		eventually(ctx, t, c+"'s mcs-syncer Pods to be gone", func() error {
			var pods corev1.PodList
			if err := cl.List(ctx, &pods, client.InNamespace(installedNamespace), client.MatchingLabels{"app.kubernetes.io/name": "mcs-syncer"}); err != nil {
				return err
			}
			if len(pods.Items) > 0 {
				return fmt.Errorf("%d left", len(pods.Items))
			}
			return nil
		})
	}
}

// checkTraffic serves web in east and west (one netserver each), exports
// it, and checks that every member imports it and that a pod in north
// reaches both exporters through the clusterset name. It returns the data
// plane, for more checks.
func checkTraffic(ctx context.Context, t *testing.T, ns string) *dataPlane {
	t.Helper()
	dp := newDataPlane(ctx, t, ns)
	for _, c := range []string{"east", "west"} {
		serve(ctx, t, c, ns, "web", 1, true, nil, port("tcp", corev1.ProtocolTCP, 80))
	}
	for _, c := range bed.Clusters {
		eventually(ctx, t, c.Name+" to import web from east and west", readyImported(ctx, bed.ClientOf(t, c.Name), ns, map[string]int{"east": 1, "west": 1}))
	}
	dp.reaches(ctx, t, "tcp", "web."+ns+".svc.clusterset.local:80", 20, "east", "west")
	return dp
}

// unexport deletes web's ServiceExports and waits until north no longer
// imports it: withdrawn by the installed mcs-syncers themselves, before
// they are uninstalled.
func unexport(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	for _, c := range []string{"east", "west"} {
		se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}
		if err := bed.ClientOf(t, c).Delete(ctx, se); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	for _, c := range bed.Clusters {
		cl := bed.ClientOf(t, c.Name)
		eventually(ctx, t, c.Name+" to withdraw web", func() error {
			if _, err := getImport(ctx, cl, ns); !apierrors.IsNotFound(err) {
				return fmt.Errorf("ServiceImport web: %v", err)
			}
			return nil
		})
	}
}

// TestInstalledFromTheDocs installs mcs-syncer as Pods from its image in
// each mode exactly as docs/user-guide.md says (central, per-cluster
// direct, hub), and checks traffic through the clusterset name each time.
// In central mode it also deletes the leader Pod (the standby takes over;
// the takeover time is printed; no import is withdrawn or rewritten),
// upgrades and rolls back mcs-syncer under traffic (upgradeUnderTraffic),
// and stops east's API server for longer than the grace (east is withdrawn
// after it, and returns).
func TestInstalledFromTheDocs(t *testing.T) {
	exclusive(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	buildAndLoadImage(ctx, t)
	kubectlMCS := buildKubectlMCS(ctx, t)

	t.Run("central", func(t *testing.T) {
		dir, kubeconfig := installFolder(t)
		t.Cleanup(func() { uninstall(context.Background(), t, "north") })
		runDoc(ctx, t, dir, kubeconfig, "install-central")
		ns := "installed-central"
		dp := checkTraffic(ctx, t, ns)
		operatorSees(ctx, t, kubectlMCS, kubeconfig, ns, "north")
		leaderPodDeleted(ctx, t, ns, dp)
		upgradeUnderTraffic(ctx, t, kubeconfig, ns, dp)
		memberOutage(ctx, t, kubeconfig, ns)
		unexport(ctx, t, ns)
	})
	for _, mode := range []string{"per-cluster", "hub"} {
		t.Run(mode, func(t *testing.T) {
			dir, kubeconfig := installFolder(t)
			t.Cleanup(func() { uninstall(context.Background(), t, "east", "west", "north") })
			runDoc(ctx, t, dir, kubeconfig, "install-"+mode)
			ns := "installed-" + mode
			checkTraffic(ctx, t, ns)
			operatorSees(ctx, t, kubectlMCS, kubeconfig, ns, "east", "west", "north")
			unexport(ctx, t, ns)
		})
	}
}

// operatorSees runs kubectl mcs on the installed clusterset, over a
// kubeconfig with a context per member: status reports web of ns
// converged, imported into every member with one endpoint from each of
// east and west; gather's bundle holds the log, /metrics and /readyz of
// the mcs-syncer Pods of each of runsIn.
func operatorSees(ctx context.Context, t *testing.T, kubectlMCS, kubeconfig, ns string, runsIn ...string) {
	t.Helper()
	members := []string{"--kubeconfig", kubeconfig, "--contexts", "east,west,north"}
	var r status.Report
	eventually(ctx, t, "kubectl mcs status to report web converged, and every member up as its mcs-syncer Pods see it", func() error {
		if code, stderr := runJSON(ctx, t, &r, kubectlMCS, append([]string{"status", ns + "/web", "-o", "json"}, members...)...); code != 0 {
			return fmt.Errorf("exit %d: %s", code, stderr)
		}
		for _, m := range r.Members {
			if m.Health != "up" || m.Version == "" {
				return fmt.Errorf("member %s: %s, version %q; mcs-syncers read: %+v", m.ID, m.Health, m.Version, r.Syncers)
			}
		}
		return nil
	})
	if len(r.Services) != 1 || len(r.Services[0].Imports) != 3 {
		t.Fatalf("kubectl mcs status: %+v", r.Services)
	}
	for _, imp := range r.Services[0].Imports {
		if got := fmt.Sprintf("%+v", imp.Endpoints); got != "[{Source:east Imported:1 Exported:1 Unimportable:0} {Source:west Imported:1 Exported:1 Unimportable:0}]" {
			t.Errorf("kubectl mcs status: %s's import %s", imp.Consumer, got)
		}
	}
	bundle := filepath.Join(t.TempDir(), "bundle.tar.gz")
	if out, err := exec.CommandContext(ctx, kubectlMCS, append([]string{"gather", "-f", bundle}, members...)...).CombinedOutput(); err != nil {
		t.Fatalf("kubectl mcs gather: %v\n%s", err, out)
	}
	files := readTarGz(t, bundle)
	for _, member := range runsIn {
		logs, metrics, readyz, views := 0, 0, 0, 0
		for name, content := range files {
			if !strings.HasPrefix(name, member+"/mcs-syncer/") {
				continue
			}
			switch {
			case strings.HasSuffix(name, ".log") && len(content) > 0:
				logs++
			case strings.HasSuffix(name, ".metrics") && strings.Contains(content, "mcs_syncer_build_info"):
				metrics++
			case strings.HasSuffix(name, ".readyz") && strings.Contains(content, "readyz check passed"):
				readyz++
			case strings.HasSuffix(name, ".members.json") && strings.Contains(content, `"leading":`):
				views++
			}
		}
		if logs == 0 || metrics == 0 || readyz == 0 || metrics != logs || views != logs {
			t.Errorf("gather's bundle, %s: %d logs, %d metrics, %d readyz, %d /members of mcs-syncer Pods; errors: %s", member, logs, metrics, readyz, views, files[member+"/errors.txt"])
		}
	}
	if !strings.Contains(files["status.txt"], "converged") || !strings.Contains(files["north/serviceimports.yaml"], "name: web") {
		t.Errorf("gather's bundle lacks the status or north's ServiceImports: %v", slices.Sorted(maps.Keys(files)))
	}
}

// readTarGz returns the files of a gzipped tar.
func readTarGz(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = string(raw)
	}
}

// leaseHolder returns the Pod that holds north's leader election Lease.
func leaseHolder(ctx context.Context, t *testing.T) (pod string, err error) {
	var lease coordinationv1.Lease
	if err := bed.ClientOf(t, "north").Get(ctx, types.NamespacedName{Namespace: installedNamespace, Name: "mcs-syncer-demo"}, &lease); err != nil {
		return "", err
	}
	holder, _, _ := strings.Cut(ptr.Deref(lease.Spec.HolderIdentity, ""), "_")
	return holder, nil
}

// importedState is what a consumer holds of an import: the ServiceImport's
// UID and resourceVersion and each imported EndpointSlice's
// resourceVersion, by cluster.
func importedState(ctx context.Context, t *testing.T, ns string) (map[string]string, error) {
	state := map[string]string{}
	for _, c := range bed.Clusters {
		cl := bed.ClientOf(t, c.Name)
		si, err := getImport(ctx, cl, ns)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Name, err)
		}
		state[c.Name+"/ServiceImport"] = string(si.UID) + "@" + si.ResourceVersion
		var slices discoveryv1.EndpointSliceList
		if err := cl.List(ctx, &slices, client.InNamespace(ns), client.MatchingLabels{mcsv1beta1.LabelServiceName: "web"}); err != nil {
			return nil, err
		}
		for _, s := range slices.Items {
			state[c.Name+"/"+s.Name] = string(s.UID) + "@" + s.ResourceVersion
		}
	}
	return state, nil
}

// leaderPodDeleted deletes the Pod that leads north's mcs-syncer and
// measures until the other replica holds the Lease. Nothing imported
// changes meanwhile or in the 10 s after, and the traffic still reaches
// both exporters.
func leaderPodDeleted(ctx context.Context, t *testing.T, ns string, dp *dataPlane) {
	t.Helper()
	north := bed.ClientOf(t, "north")
	var leader string
	eventually(ctx, t, "a leader", func() (err error) {
		leader, err = leaseHolder(ctx, t)
		if err == nil && leader == "" {
			err = fmt.Errorf("no holder")
		}
		return err
	})
	before, err := importedState(ctx, t, ns)
	if err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	if err := north.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: leader, Namespace: installedNamespace}}); err != nil {
		t.Fatal(err)
	}
	var next string
	eventually(ctx, t, "the standby to take over", func() (err error) {
		next, err = leaseHolder(ctx, t)
		if err == nil && (next == "" || next == leader) {
			err = fmt.Errorf("held by %q", next)
		}
		return err
	})
	takeover := time.Since(deleted)
	fmt.Printf("installed, central: leader Pod %s deleted, %s took over after %s\n", leader, next, takeover.Round(10*time.Millisecond))
	holds(ctx, t, "the imports after the takeover", 10*time.Second, func() error {
		after, err := importedState(ctx, t, ns)
		if err != nil {
			return err
		}
		for k, v := range before {
			if after[k] != v {
				return fmt.Errorf("%s was %s, is %q: the new leader rewrote or withdrew it", k, v, after[k])
			}
		}
		for k := range after {
			if _, ok := before[k]; !ok {
				return fmt.Errorf("%s is new", k)
			}
		}
		return nil
	})
	dp.reaches(ctx, t, "tcp", "web."+ns+".svc.clusterset.local:80", 20, "east", "west")
}

// memberOutage sets a grace of 20 s (a flag patched in as the user guide
// says, which rolls the Deployment), stops east's API server, and checks
// that north withdraws east's endpoints only after the grace and imports
// them again once east is back.
func memberOutage(ctx context.Context, t *testing.T, kubeconfig, ns string) {
	t.Helper()
	kubectlNorth(ctx, t, kubeconfig, "patch", "deployment", "mcs-syncer", "--type", "json", "-p",
		`[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--cluster-unreachable-grace=20s"}]`)
	kubectlNorth(ctx, t, kubeconfig, "rollout", "status", "deployment/mcs-syncer", "--timeout", "3m")
	north := bed.ClientOf(t, "north")
	eventually(ctx, t, "north to import web from east and west after the rollout", readyImported(ctx, north, ns, map[string]int{"east": 1, "west": 1}))
	// The imports above are the old leader's. The new leader counts east's
	// grace from when it last had east engaged, or, if east goes down
	// during its first sync, from its own start (seen: withdrawn 15.7 s
	// after the stop): stop east once the leader has engaged it, as its
	// /readyz (through the API server's proxy to the Pod) says.
	eventually(ctx, t, "the new leader to have engaged east", func() error {
		leader, err := leaseHolder(ctx, t)
		if err != nil {
			return err
		}
		kube, err := bed.Cluster("north").Kubernetes()
		if err != nil {
			return err
		}
		body, err := kube.CoreV1().Pods(installedNamespace).ProxyGet("http", leader, "8081", "readyz", map[string]string{"verbose": ""}).DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%s's /readyz: %w: %s", leader, err, body)
		}
		if !strings.Contains(string(body), "[+]member east ok: engaged since") {
			return fmt.Errorf("%s's /readyz: %s", leader, body)
		}
		return nil
	})

	east := bed.Cluster("east")
	down := true
	t.Cleanup(func() {
		if down {
			_ = east.StartAPIServer(context.Background())
		}
	})
	// From before the stop: mcs-syncer sees east go as soon as the server
	// is killed, before StopAPIServer returns.
	stopped := time.Now()
	if err := east.StopAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "north to withdraw east's endpoints", func() error {
		bySource, err := importedSlices(ctx, north, ns)
		if err != nil {
			return err
		}
		if len(bySource["east"]) > 0 {
			return fmt.Errorf("%d slices from east", len(bySource["east"]))
		}
		return nil
	})
	withdrawn := time.Since(stopped)
	if withdrawn < 20*time.Second {
		t.Errorf("east withdrawn %s after its API server stopped, before the 20 s grace", withdrawn)
	}
	if err := east.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	down = false
	back := time.Now()
	eventually(ctx, t, "north to import east again", readyImported(ctx, north, ns, map[string]int{"east": 1, "west": 1}))
	fmt.Printf("installed, central: east's API server down: withdrawn after %s (grace 20 s); back, imported again after %s\n",
		withdrawn.Round(100*time.Millisecond), time.Since(back).Round(100*time.Millisecond))
}

// secondVersion is the version the upgrade goes to: the same commit as
// the installed v0.1.0, built with another version string.
const secondVersion = "v0.1.1"

// buildSecondVersion builds the image of secondVersion, as make image
// does, and loads it into north's real node.
func buildSecondVersion(ctx context.Context, t *testing.T) {
	t.Helper()
	root, err := host.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(root, "bin", "mcs-syncer-"+secondVersion+".tar")
	cmd := exec.CommandContext(ctx, "make", "image", "VERSION="+secondVersion, "IMAGE_ARCHIVE="+archive)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image VERSION=%s: %v\n%s", secondVersion, err, out)
	}
	if err := bed.Cluster("north").RealNode.ImportImage(ctx, archive); err != nil {
		t.Fatal(err)
	}
}

// kubectlNorth runs kubectl with the user's kubeconfig on north's
// mcs-system.
func kubectlNorth(ctx context.Context, t *testing.T, kubeconfig string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, filepath.Join(bed.BinDir, "kubectl"),
		append([]string{"--kubeconfig", kubeconfig, "--context", "north", "-n", installedNamespace}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// importIDs are the UID and clusterset IPs of every ServiceImport of the
// namespaces, in every member, by cluster/namespace/name.
func importIDs(ctx context.Context, t *testing.T, namespaces ...string) map[string]string {
	t.Helper()
	ids := map[string]string{}
	for _, c := range bed.Clusters {
		for _, ns := range namespaces {
			var list mcsv1beta1.ServiceImportList
			if err := bed.ClientOf(t, c.Name).List(ctx, &list, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			for _, si := range list.Items {
				ids[c.Name+"/"+ns+"/"+si.Name] = string(si.UID) + " " + strings.Join(si.Spec.IPs, ",")
			}
		}
	}
	return ids
}

// trafficCount is what traffic saw: requests tried and failed, the first
// failures' lines, the probe commands that printed nothing (kubectl exec
// itself failed: no request was made, so none counts as failed), and the
// requests answered in the netserver's bare TCP form (late: see traffic).
type trafficCount struct {
	tries, failed, execFailed, bare int
	failures                        []string
}

// bareAnswer says whether a probe's failed HTTP try was answered by a
// netserver in its bare TCP form: it waits 3 s (300 ms until two e2e
// processes shared CI's 2 cores) for a request line,
// then writes "<cluster> <pod> <ip> <proto>/<port>", which Go's HTTP
// client reads as a status line whose code is the pod's name. The
// connection reached a backend; the request came late.
func bareAnswer(line string) bool {
	return strings.HasPrefix(line, "error:") && strings.Contains(line, "malformed HTTP status code")
}

// traffic sends an HTTP request (a new connection each) to target
// (host:port) from north's client pod every 50 ms until stop is closed,
// and counts the tries and the failed ones. HTTP, because the netserver
// answers a connection that sends nothing only after waiting 3 s for a
// request.
// A try fails when it is not answered within 3 s: a lost SYN is sent again
// after 1 s, which on a busy 2-core node (a rollout's new Pods starting)
// is no outage, while a route gone fails every try. A try answered in the
// netserver's bare form reached a backend (bareAnswer): two rehearsals
// each counted one such try failed, with no write by mcs-syncer.
func traffic(ctx context.Context, dp *dataPlane, target string, stop <-chan struct{}) (done <-chan trafficCount) {
	out := make(chan trafficCount, 1)
	go func() {
		var c trafficCount
		for {
			select {
			case <-stop:
				out <- c
				return
			default:
			}
			// 100 tries (5 s) a command: kubectl exec starts between them.
			text, err := dp.probe(ctx, "-n", "100", "-interval", "50ms", "-timeout", "3s", "http", "http://"+target+"/")
			if strings.TrimSpace(text) == "" {
				c.execFailed++
				if len(c.failures) < 5 {
					c.failures = append(c.failures, fmt.Sprintf("kubectl exec printed nothing: %v", err))
				}
				continue
			}
			by, f := answeredBy(text)
			for _, n := range by {
				c.tries += n
			}
			c.tries += f
			c.failed += f
			for _, line := range strings.Split(text, "\n") {
				switch {
				case bareAnswer(line):
					c.failed--
					c.bare++
				case strings.HasPrefix(line, "error:") && len(c.failures) < 5:
					c.failures = append(c.failures, line)
				}
			}
		}
	}()
	return out
}

// upgradeUnderTraffic: with a few hundred imports and a client in north
// connecting to web's clusterset IP every 50 ms, north's mcs-syncer is
// upgraded to another version with `kubectl set image` (a rolling update
// of both replicas), then rolled back with `kubectl rollout undo`. No
// request fails, no ServiceImport's UID or IP changes, and no mcs-syncer
// writes anything but its Lease meanwhile (the API servers' audit logs):
// nothing changed, so a new leader has nothing to write.
func upgradeUnderTraffic(ctx context.Context, t *testing.T, kubeconfig, ns string, dp *dataPlane) {
	t.Helper()
	buildSecondVersion(ctx, t)
	many := ns + "-many"
	bed.Namespace(ctx, t, many)
	east := bed.ClientOf(t, "east")
	const services = 200
	for i := range services {
		name := fmt.Sprintf("svc-%03d", i)
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: many},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
		se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: many}}
		for _, obj := range []client.Object{svc, se} {
			if err := east.Create(ctx, obj); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range bed.Clusters {
		cl := bed.ClientOf(t, c.Name)
		eventually(ctx, t, fmt.Sprintf("%s to import the %d Services", c.Name, services), func() error {
			var list mcsv1beta1.ServiceImportList
			if err := cl.List(ctx, &list, client.InNamespace(many)); err != nil {
				return err
			}
			if len(list.Items) != services {
				return fmt.Errorf("%d imported", len(list.Items))
			}
			for _, si := range list.Items {
				if len(si.Spec.IPs) == 0 {
					return fmt.Errorf("%s has no clusterset IP yet", si.Name)
				}
			}
			return nil
		})
	}
	var logs []string
	for _, c := range bed.Clusters {
		logs = append(logs, c.AuditLogPath)
	}
	// The imports' last writes, and the events that follow them
	// asynchronously, must not fall into the window counted below: it
	// starts once mcs-syncer has written nothing for 5 s.
	// Each check reads the audit logs whole: once a second, not 4 times.
	var busy error
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(context.Context) (bool, error) {
		listed, err := audit.ListWrites(logs, time.Now().Add(-5*time.Second), time.Now())
		if err != nil {
			return false, err
		}
		if len(listed) > 0 {
			busy = fmt.Errorf("%d writes in the last 5 s, the last: %s", len(listed), listed[len(listed)-1])
		}
		return len(listed) == 0, nil
	}); err != nil {
		t.Fatalf("waiting for mcs-syncer to be done with the new imports (no write for 5 s): %v (last: %v)", err, busy)
	}
	before := importIDs(ctx, t, ns, many)
	target := importIP(ctx, t, ns, "web") + ":80"

	stop := make(chan struct{})
	counted := traffic(ctx, dp, target, stop)
	trafficStart := time.Now()
	leaders := watchLeaders(ctx, t)
	begin := time.Now()
	kubectlNorth(ctx, t, kubeconfig, "set", "image", "deployment/mcs-syncer", "mcs-syncer=mcs-syncer:"+secondVersion)
	kubectlNorth(ctx, t, kubeconfig, "rollout", "status", "deployment/mcs-syncer", "--timeout", "5m")
	upgraded := time.Since(begin)
	waitLeaderImage(ctx, t, "mcs-syncer:"+secondVersion)
	rollback := time.Now()
	kubectlNorth(ctx, t, kubeconfig, "rollout", "undo", "deployment/mcs-syncer")
	kubectlNorth(ctx, t, kubeconfig, "rollout", "status", "deployment/mcs-syncer", "--timeout", "5m")
	rolledBack := time.Since(rollback)
	waitLeaderImage(ctx, t, "mcs-syncer:v0.1.0")
	// The last leader's first sync, if it wrote, would write within
	// seconds: the imports stay as they were for 10 s.
	holds(ctx, t, "the imports after the rollback", 10*time.Second, func() error {
		for k, v := range importIDs(ctx, t, ns, many) {
			if before[k] != v {
				return fmt.Errorf("ServiceImport %s was %q, is %s", k, before[k], v)
			}
		}
		return nil
	})
	end := time.Now()
	close(stop)
	sent := <-counted
	trafficTime := time.Since(trafficStart)
	handovers := leaders()

	writes, err := audit.CountWrites(logs, begin, end)
	if err != nil {
		t.Fatal(err)
	}
	after := importIDs(ctx, t, ns, many)
	changed := 0
	for k, v := range before {
		if after[k] != v {
			changed++
			t.Errorf("ServiceImport %s was %s, is %q", k, v, after[k])
		}
	}
	fmt.Printf("installed, central: upgrade to %s under traffic (%d ServiceImports): rolled out in %s, rolled back in %s; %d leader handovers %v; "+
		"%d requests in %s (one each 50 ms, plus its own time), %d failed; %d ServiceImport UIDs or IPs changed; writes by mcs-syncer: %s\n",
		secondVersion, len(before), upgraded.Round(100*time.Millisecond), rolledBack.Round(100*time.Millisecond), len(handovers), handovers,
		sent.tries, trafficTime.Round(100*time.Millisecond), sent.failed, changed, writes)
	if sent.failed > 0 {
		t.Errorf("%d of %d requests failed during the upgrade and rollback: %q", sent.failed, sent.tries, sent.failures)
	} else if sent.execFailed > 0 {
		t.Logf("%d probe commands printed nothing (kubectl exec failed; no request made): %q", sent.execFailed, sent.failures)
	}
	if sent.bare > 0 {
		t.Logf("%d requests reached a backend more than 3 s after connecting (answered in the netserver's bare TCP form)", sent.bare)
	}
	if sent.tries < 100 {
		t.Errorf("only %d requests were sent", sent.tries)
	}
	if writes.Total() > 0 {
		listed, _ := audit.ListWrites(logs, begin, end)
		t.Errorf("mcs-syncer wrote during the upgrade and rollback, when nothing changed: %s:\n  %s\nits events since:\n%s",
			writes, strings.Join(listed, "\n  "), syncerEvents(ctx, t, begin))
	}
	if len(handovers) == 0 {
		t.Error("the leader never changed: the rolling update did not replace it")
	}
}

// syncerEvents lists, one line each, the events mcs-syncer recorded in any
// member since since: what a failed write count was.
func syncerEvents(ctx context.Context, t *testing.T, since time.Time) string {
	var b strings.Builder
	for _, c := range bed.Clusters {
		var list eventsv1.EventList
		if err := bed.ClientOf(t, c.Name).List(ctx, &list); err != nil {
			fmt.Fprintf(&b, "  %s: %v\n", c.Name, err)
			continue
		}
		for _, e := range list.Items {
			if e.CreationTimestamp.Time.Before(since.Truncate(time.Second)) || !strings.Contains(e.ReportingController+e.DeprecatedSource.Component, "mcs") {
				continue
			}
			fmt.Fprintf(&b, "  %s %s: %s %s %s/%s by %s/%s: %s\n", c.Name, e.CreationTimestamp.Format(time.RFC3339), e.Type, e.Reason,
				e.Regarding.Kind, e.Regarding.Name, e.ReportingController, e.ReportingInstance, e.Note)
		}
	}
	return b.String()
}

// watchLeaders records each change of north's Lease holder, with the time
// since it started, until the returned function is called.
func watchLeaders(ctx context.Context, t *testing.T) (stop func() []string) {
	var mu sync.Mutex
	var changes []string
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		start := time.Now()
		last, _ := leaseHolder(ctx, t)
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			holder, err := leaseHolder(ctx, t)
			if err != nil || holder == last || holder == "" {
				continue
			}
			mu.Lock()
			changes = append(changes, fmt.Sprintf("%s at %.1fs", holder, time.Since(start).Seconds()))
			mu.Unlock()
			last = holder
		}
	}()
	return func() []string {
		close(done)
		<-stopped
		mu.Lock()
		defer mu.Unlock()
		return changes
	}
}

// waitLeaderImage waits until the Pod that holds north's Lease runs image.
func waitLeaderImage(ctx context.Context, t *testing.T, image string) {
	t.Helper()
	north := bed.ClientOf(t, "north")
	eventually(ctx, t, "a leader that runs "+image, func() error {
		holder, err := leaseHolder(ctx, t)
		if err != nil {
			return err
		}
		var pod corev1.Pod
		if err := north.Get(ctx, types.NamespacedName{Namespace: installedNamespace, Name: holder}, &pod); err != nil {
			return err
		}
		if got := pod.Spec.Containers[0].Image; got != image {
			return fmt.Errorf("the leader %s runs %s", holder, got)
		}
		return nil
	})
}
