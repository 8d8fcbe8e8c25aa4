package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcs-syncer/mcs-syncer/internal/diagnose"
	"github.com/mcs-syncer/mcs-syncer/internal/status"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/workloads"
)

// TestKubectlMCSStatus: kubectl mcs, built as a user builds it, exports
// west's web (kubectl mcs export); status reads the testbed's clusterset
// from mcs-syncer's config: with web of east and west imported everywhere it exits 0 and reports each member's
// import with each source's endpoints, as many as the source holds; with
// west's API server hung, `--timeout 5s` returns within 7 s, exits 1 and
// names west; with it stopped, the same.
func TestKubectlMCSStatus(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns := "kubectl-mcs-status"
	bed.Namespace(ctx, t, ns)
	east, west, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "west"), bed.ClientOf(t, "north")
	workloads.CreateApp(ctx, t, east, ns, 2, 80, true, nil)
	workloads.CreateApp(ctx, t, west, ns, 1, 80, false, nil)
	bin := buildKubectlMCS(ctx, t)
	// West's web exported by kubectl mcs export, on its real API server.
	if out, err := exec.CommandContext(ctx, bin, "export", "web", "-n", ns, "--exported-labels", "tier=web",
		"--kubeconfig", bed.Cluster("west").KubeconfigPath).CombinedOutput(); err != nil || !strings.Contains(string(out), "created") {
		t.Fatalf("kubectl mcs export: %v\n%s", err, out)
	}
	eventually(ctx, t, "north to import web", readyImported(ctx, north, ns, map[string]int{"east": 2, "west": 1}))
	statusOf := func(args ...string) (status.Report, int, string) {
		var r status.Report
		code, stderr := runJSON(ctx, t, &r, bin, append([]string{"status", "--clusterset-config", bed.ConfigPath, "--syncer", syncer.ProbeAddr, "-o", "json"}, args...)...)
		return r, code, stderr
	}

	var r status.Report
	eventually(ctx, t, "kubectl mcs status to report web converged", func() error {
		var code int
		var stderr string
		r, code, stderr = statusOf(ns + "/web")
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, stderr)
		}
		return nil
	})
	if len(r.Services) != 1 || len(r.Services[0].Imports) != 3 || strings.Join(r.Services[0].ExportedBy, ",") != "east,west" {
		t.Fatalf("services %+v", r.Services)
	}
	for _, imp := range r.Services[0].Imports {
		got := fmt.Sprintf("%v %d %+v", imp.Imported, len(imp.IPs), imp.Endpoints)
		if want := "true 1 [{Source:east Imported:2 Exported:2 Unimportable:0} {Source:west Imported:1 Exported:1 Unimportable:0}]"; got != want {
			t.Errorf("%s's import: %s, want %s", imp.Consumer, got, want)
		}
	}
	// The central mcs-syncer's view (--syncer): every member up, at its
	// version.
	if len(r.Syncers) != 1 || !r.Syncers[0].Leading || r.Syncers[0].Cluster != "" {
		t.Errorf("mcs-syncers read: %+v", r.Syncers)
	}
	for _, m := range r.Members {
		if m.Health != "up" || m.Version != r.Syncers[0].Version || len(m.SeenBy) != 1 {
			t.Errorf("member %s: %+v", m.ID, m)
		}
	}
	wide, err := exec.CommandContext(ctx, bin, "status", ns+"/web", "--clusterset-config", bed.ConfigPath, "--syncer", syncer.ProbeAddr, "-o", "wide").CombinedOutput()
	if err != nil || !strings.Contains(string(wide), "SEEN BY") || !strings.Contains(string(wide), syncer.ProbeAddr+": up") || !strings.Contains(string(wide), "ClusterSetIP") {
		t.Errorf("-o wide: %v\n%s", err, wide)
	}

	westBed := bed.Cluster("west")
	// West's API server hung (frozen: connections accepted, never
	// answered): --timeout 5s is the whole wait, and west is named.
	if err := westBed.PauseAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = westBed.ResumeAPIServer() })
	start := time.Now()
	_, code, stderr := statusOf(ns+"/web", "--timeout", "5s")
	took := time.Since(start)
	if err := westBed.ResumeAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl mcs status --timeout 5s with west's API server hung: %v, exit %d", took, code)
	if code != 1 || !strings.Contains(stderr, "member west cannot be read") || took > 7*time.Second {
		t.Errorf("west hung, --timeout 5s: exit %d after %v (want 1 within 7 s), %s", code, took, stderr)
	}

	if err := westBed.StopAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = westBed.StartAPIServer(context.Background()) })
	// --timeout 10s: a stopped server's resets are retried by client-go
	// until the timeout, which by default is 30 s.
	r, code, stderr = statusOf(ns+"/web", "--timeout", "10s")
	if code != 1 || !strings.Contains(stderr, "member west cannot be read") {
		t.Errorf("west down: exit %d, %s", code, stderr)
	}
	for _, m := range r.Members {
		if m.ID == "west" && (m.Read || m.Error == "") {
			t.Errorf("west down, reported %+v", m)
		}
	}
	// mcs-syncer sees west down once its probe fails (within its health
	// interval), and status says so.
	eventually(ctx, t, "status to say west is down as mcs-syncer sees it", func() error {
		_, _, stderr := statusOf(ns+"/web", "--timeout", "10s")
		if !strings.Contains(stderr, "member west is down since") {
			return fmt.Errorf("%s", stderr)
		}
		return nil
	})
}

// runJSON runs bin with args and decodes its standard output into out;
// it returns the exit code and the standard error. An exit code of 2 (the
// command could not run) prints no report.
func runJSON(ctx context.Context, t *testing.T, out any, bin string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	code := 0
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatal(err)
		}
		code = exit.ExitCode()
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil && code != 2 {
		t.Fatalf("%v: exit %d, not JSON: %v\n%s\n%s", args, code, err, stdout.String(), stderr.String())
	}
	return code, stderr.String()
}

// buildKubectlMCS builds kubectl-mcs as a user does, into the test's
// folder.
func buildKubectlMCS(ctx context.Context, t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubectl-mcs")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../../cmd/kubectl-mcs").CombinedOutput(); err != nil {
		t.Fatalf("go build kubectl-mcs: %v\n%s", err, out)
	}
	return bin
}

// TestKubectlMCSDiagnose: kubectl mcs diagnose passes on the testbed (its
// DNS and mcs-syncer run outside the clusters: those checks are skipped),
// and on its hub (diagnoseHub),
// fails on a member whose CoreDNS (kube-system/coredns, as kubeadm and
// kind run it) has no multicluster plugin, and on a node of west whose pod
// CIDR is a range of east, naming both.
func TestKubectlMCSDiagnose(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := buildKubectlMCS(ctx, t)
	diagnoseOf := func() ([]diagnose.Check, int) {
		var checks []diagnose.Check
		code, _ := runJSON(ctx, t, &checks, bin, "diagnose", "--clusterset-config", bed.ConfigPath, "-o", "json")
		return checks, code
	}
	failed := func(checks []diagnose.Check) []string {
		var out []string
		for _, c := range checks {
			if c.Result == diagnose.Fail {
				out = append(out, c.Name+"/"+c.Member+": "+c.Detail)
			}
		}
		return out
	}
	checks, code := diagnoseOf()
	if code != 0 {
		t.Fatalf("the healthy testbed: exit %d, failed %q", code, failed(checks))
	}
	passed := map[string]int{}
	for _, c := range checks {
		if c.Result == diagnose.Pass {
			passed[c.Name]++
		}
	}
	if passed["MCS CRDs"] != 3 || passed["CRD stored versions"] != 3 || passed["pod and service CIDRs do not overlap between members"] != 1 || passed["members' clocks agree"] != 1 {
		t.Errorf("the healthy testbed: passed %v; want the CRDs and their stored versions of 3 members, the CIDRs and the clocks", passed)
	}
	diagnoseHub(ctx, t, bin)

	// West's credentials: a ServiceAccount token that expires in 3 days.
	var expiring []diagnose.Check
	code, stderr := runJSON(ctx, t, &expiring, bin, "diagnose", "--clusterset-config", expiringWestToken(ctx, t), "-o", "json")
	i := slices.IndexFunc(expiring, func(c diagnose.Check) bool { return c.Name == "credentials not about to expire" && c.Member == "west" })
	if code != 0 || i < 0 || expiring[i].Result != diagnose.Warn || !strings.Contains(expiring[i].Detail, "bearer token expires in") || expiring[i].Fix == "" {
		t.Errorf("west with a token for 3 days: exit %d (%s), checks %+v", code, stderr, expiring)
	}

	west := bed.ClientOf(t, "west")
	corefile := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns"},
		Data: map[string]string{"Corefile": ".:53 {\n    kubernetes cluster.local in-addr.arpa ip6.arpa\n    forward . /etc/resolv.conf\n}\n"}}
	if err := west.Create(ctx, corefile); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = west.Delete(context.Background(), corefile) })
	// A range of east's: a node's pod CIDR, or its service range.
	east := bed.ClientOf(t, "east")
	var eastRange string
	var nodes corev1.NodeList
	if err := east.List(ctx, &nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Items {
		if len(n.Spec.PodCIDRs) > 0 {
			eastRange = n.Spec.PodCIDRs[0]
			break
		}
	}
	if eastRange == "" {
		t.Fatal("no node of east has a pod CIDR")
	}
	overlap := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "overlaps-east"}, Spec: corev1.NodeSpec{PodCIDR: eastRange, PodCIDRs: []string{eastRange}}}
	if err := west.Create(ctx, overlap); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = west.Delete(context.Background(), overlap) })

	staleStoredVersion(ctx, t, west)

	checks, code = diagnoseOf()
	got := strings.Join(failed(checks), "\n")
	if code != 1 || !strings.Contains(got, "CoreDNS answers clusterset.local/west: the Corefile of kube-system/coredns has no multicluster plugin") ||
		!strings.Contains(got, "west's pod CIDR (node overlaps-east) "+eastRange) ||
		!strings.Contains(got, "CRD stored versions/west: diagnosetests.mcs-syncer.io stores v1, no longer served") {
		t.Errorf("exit %d, failed:\n%s", code, got)
	}
}

// expiringWestToken writes a clusterset config whose west authenticates
// with a ServiceAccount token that expires in 3 days (bound to
// cluster-admin, so that every other check passes), and returns its path.
func expiringWestToken(ctx context.Context, t *testing.T) string {
	t.Helper()
	west := bed.Cluster("west")
	c := bed.ClientOf(t, "west")
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "diagnose-expiring"}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "diagnose-expiring"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: sa.Namespace, Name: sa.Name}}}
	for _, obj := range []client.Object{sa, binding} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
	}
	kube, err := west.Kubernetes()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := kube.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3 * 24 * 3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeTokenKubeconfig(t, west, tr.Status.Token, filepath.Join(dir, "west.kubeconfig"))
	return configWithWestOf(t, dir)
}

// staleStoredVersion gives west a CRD of mcs-syncer's group that no longer
// serves v1 while its status.storedVersions still lists it, as after an
// upgrade that stopped serving a version before its objects were
// migrated. (The API server refuses a stored version missing from
// spec.versions altogether, so v1 stays there, not served.) A CRD of its
// own, not the MCS CRDs, which the syncers and the other tests use.
func staleStoredVersion(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	schema := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "diagnosetests.mcs-syncer.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "mcs-syncer.io", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "diagnosetests", Singular: "diagnosetest", Kind: "DiagnoseTest", ListKind: "DiagnoseTestList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: false, Storage: false, Schema: schema},
				{Name: "v2", Served: true, Storage: true, Schema: schema},
			}}}
	if err := c.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), crd) })
	patch := client.RawPatch(types.MergePatchType, []byte(`{"status":{"storedVersions":["v1","v2"]}}`))
	if err := c.Status().Patch(ctx, crd, patch); err != nil {
		t.Fatalf("stored versions of %s: %v", crd.Name, err)
	}
}

// diagnoseHub: with north's hub-mode config, diagnose checks the hub as
// north's member identity: the admission policy refuses its publication as
// another cluster (a dry run), and north may do what RBAC should allow;
// the others' identities it may not review (skipped). With the hub's
// administrator (--hub-kubeconfig), every member's identity is reviewed.
func diagnoseHub(ctx context.Context, t *testing.T, bin string) {
	t.Helper()
	results := func(args ...string) map[string]string {
		var checks []diagnose.Check
		code, stderr := runJSON(ctx, t, &checks, bin, append([]string{"diagnose", "--clusterset-config", bed.HubConfigPath("north"), "-o", "json"}, args...)...)
		got := map[string]string{}
		for _, c := range checks {
			if strings.HasPrefix(c.Name, "hub ") {
				got[c.Name+"/"+c.Member] = string(c.Result) + ": " + c.Detail
			}
		}
		if code != 0 {
			t.Errorf("diagnose %v: exit %d, %s; hub checks %v", args, code, stderr, got)
		}
		return got
	}
	const admission, access = "hub admission: members publish only as themselves/", "hub identity allowed what RBAC should allow/"
	asNorth := results()
	if !strings.HasPrefix(asNorth[admission], "pass: member north's publication as cluster mcs-diagnose-other is refused") ||
		!strings.HasPrefix(asNorth[access+"north"], "pass") || !strings.HasPrefix(asNorth[access+"east"], "skip") || len(asNorth) != 4 {
		t.Errorf("as north: %v", asNorth)
	}
	asAdmin := results("--hub-kubeconfig", bed.Hub.KubeconfigPath)
	for _, id := range []string{"east", "west", "north"} {
		if !strings.HasPrefix(asAdmin[access+id], "pass") {
			t.Errorf("as the hub's administrator, %s: %v", id, asAdmin)
		}
	}
	if !strings.HasPrefix(asAdmin[admission], "pass: mcs-syncer-publish-as-yourself present and bound with Deny") {
		t.Errorf("as the hub's administrator: %v", asAdmin)
	}
}

// TestKubectlCompletesThePlugin: kubectl itself (1.26 and later) completes
// kubectl mcs through kubectl_complete-mcs on the PATH: its commands, and
// export's Service names as west's API server holds them in the
// namespace of -n.
func TestKubectlCompletesThePlugin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := buildKubectlMCS(ctx, t)
	dir := filepath.Dir(bin)
	script, err := os.ReadFile("../../cmd/kubectl-mcs/kubectl_complete-mcs")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kubectl_complete-mcs"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	west := bed.Cluster("west")
	ns := createNamespace(ctx, t, west)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web-completed", Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if err := bed.ClientOf(t, "west").Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, filepath.Join(bed.BinDir, "kubectl"), append([]string{"__complete", "mcs"}, words...)...)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kubectl __complete mcs %q: %v", words, err)
		}
		return string(out)
	}
	if out := complete("st"); !strings.Contains(out, "status") {
		t.Errorf("kubectl __complete mcs st: %q, want status", out)
	}
	if out := complete("export", "--kubeconfig", west.KubeconfigPath, "-n", ns, ""); !strings.Contains(out, "web-completed\n") {
		t.Errorf("kubectl __complete mcs export -n %s: %q, want web-completed", ns, out)
	}
}
