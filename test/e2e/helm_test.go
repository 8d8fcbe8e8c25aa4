package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcs-syncer/mcs-syncer/test/testbed/controlplane"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/realnode"
)

// TestInstalledWithHelm installs mcs-syncer with a real helm (make tools
// builds it) from the chart that `make chart` packages, as the user
// guide's "Install with Helm" says: its blocks are run as written. Central
// mode: traffic through the clusterset name answered by both exporters,
// then `helm upgrade` to another version under traffic, with no request
// lost. Hub mode, with the hub's objects and the members' identities from
// the chart on a hub of its own: traffic answered by both exporters, and
// north's release upgraded under traffic likewise.
// kubectl mcs verify in central mode (verifiedWithTraffic). Each
// time `helm uninstall` leaves no object of the chart behind but the CRDs.
//
// The testbed's clusters hold the CRDs from their start, and config/'s
// roles once TestInstalledFromTheDocs has run: the helm the blocks run
// (hack/lib/adopting-helm) adds to each install what the user guide says
// for such clusters (--take-ownership).
func TestInstalledWithHelm(t *testing.T) {
	exclusive(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	buildAndLoadImage(ctx, t)
	buildSecondVersion(ctx, t)
	charts := buildCharts(ctx, t, "v0.1.0", secondVersion)
	contexts := []string{"east", "west", "north"}

	t.Run("central", func(t *testing.T) {
		dir, kubeconfig, helm := helmFolder(t, charts, nil)
		t.Cleanup(func() { helm.run(context.Background(), t, dir, kubeconfig, "helm-uninstall") })
		helm.run(ctx, t, dir, kubeconfig, "helm-central")
		ns := "helm-central"
		dp := checkTraffic(ctx, t, ns)
		verifiedWithTraffic(ctx, t, kubeconfig, ns)
		helmUpgradeUnderTraffic(ctx, t, helm, dir, kubeconfig, ns, dp, "central")
		unexport(ctx, t, ns)
		helm.run(ctx, t, dir, kubeconfig, "helm-uninstall")
		nothingLeft(ctx, t, contexts...)
	})

	t.Run("hub", func(t *testing.T) {
		hub, err := bed.StartBareHub(ctx, "helm-hub")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := hub.Destroy(context.Background()); err != nil {
				t.Error(err)
			}
		})
		dir, kubeconfig, helm := helmFolder(t, charts, hub)
		t.Cleanup(func() { helm.run(context.Background(), t, dir, kubeconfig, "helm-uninstall") })
		helm.run(ctx, t, dir, kubeconfig, "helm-hub")
		ns := "helm-hub"
		dp := checkTraffic(ctx, t, ns)
		helmUpgradeUnderTraffic(ctx, t, helm, dir, kubeconfig, ns, dp, "hub")
		unexport(ctx, t, ns)
		helm.run(ctx, t, dir, kubeconfig, "helm-uninstall")
		nothingLeft(ctx, t, contexts...)
		hubClient, err := hub.Client()
		if err != nil {
			t.Fatal(err)
		}
		nothingLeftIn(ctx, t, "the hub", hubClient)
	})
}

// buildCharts runs the user guide's build-chart block in the checkout, and
// `make chart` for the other versions, and returns the folder of the
// packages.
func buildCharts(ctx context.Context, t *testing.T, first string, more ...string) string {
	t.Helper()
	root, err := host.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(docBlock(t, "build-chart"), "VERSION="+first) {
		t.Fatalf("the user guide's build-chart block builds no chart of %s", first)
	}
	runDoc(ctx, t, root, "", "build-chart")
	for _, v := range more {
		cmd := exec.CommandContext(ctx, "make", "chart", "VERSION="+v)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make chart VERSION=%s: %v\n%s", v, err, out)
		}
	}
	return filepath.Join(root, "bin")
}

// helmFolder is installFolder with the chart packages of charts in its
// bin/, a kubeconfig whose context hub is hub (if not nil), and how to run
// the blocks: hack/lib/adopting-helm first in PATH, which adds
// --take-ownership to `helm install` (the testbed's clusters have the
// CRDs; see TestInstalledWithHelm) and runs the testbed's helm, then the
// testbed's kubectl.
func helmFolder(t *testing.T, charts string, hub *controlplane.ControlPlane) (dir, kubeconfig string, helm helmRun) {
	t.Helper()
	dir, kubeconfig = installFolder(t)
	if hub != nil {
		if err := bed.WriteKubeconfigWithHub(kubeconfig, hub); err != nil {
			t.Fatal(err)
		}
	}
	packages, err := filepath.Glob(filepath.Join(charts, "mcs-syncer-*.tgz"))
	if err != nil || len(packages) == 0 {
		t.Fatalf("no chart package in %s (%v)", charts, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range packages {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "bin", filepath.Base(p)), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := host.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return dir, kubeconfig, helmRun{path: filepath.Join(root, "hack", "lib", "adopting-helm") + string(os.PathListSeparator) + bed.BinDir,
		env: []string{"HELM=" + filepath.Join(bed.BinDir, "helm")}}
}

// helmRun is how the user guide's Helm blocks are run on the testbed:
// PATH and environment (helmFolder).
type helmRun struct {
	path string
	env  []string
}

// run runs the user guide's block tag in dir with kubeconfig.
func (h helmRun) run(ctx context.Context, t *testing.T, dir, kubeconfig, tag string) {
	t.Helper()
	runDocWithPath(ctx, t, dir, kubeconfig, tag, h.path, h.env...)
}

// helmUpgradeUnderTraffic: with a client in north connecting to web's
// clusterset IP every 50 ms, north's release (of mode: central, or hub
// for per-cluster mode through a hub) is upgraded to the chart of
// secondVersion with the user guide's helm-upgrade block (a rolling
// update of both replicas to its image). No request fails, and the new
// leader runs the new image.
func helmUpgradeUnderTraffic(ctx context.Context, t *testing.T, helm helmRun, dir, kubeconfig, ns string, dp *dataPlane, mode string) {
	t.Helper()
	target := importIP(ctx, t, ns, "web") + ":80"
	stop := make(chan struct{})
	counted := traffic(ctx, dp, target, stop)
	begin := time.Now()
	helm.run(ctx, t, dir, kubeconfig, "helm-upgrade")
	waitLeaderImage(ctx, t, "mcs-syncer:"+secondVersion)
	upgraded := time.Since(begin)
	// The new leader's first sync, if it wrote, would take traffic away
	// within seconds: the requests go on for 10 s more.
	holds(ctx, t, "the import of web after the upgrade", 10*time.Second, func() error {
		_, err := getImport(ctx, bed.ClientOf(t, "north"), ns)
		return err
	})
	close(stop)
	sent := <-counted
	fmt.Printf("installed with helm, %s: helm upgrade to %s under traffic: rolled out in %s; %d requests, %d failed\n",
		mode, secondVersion, upgraded.Round(100*time.Millisecond), sent.tries, sent.failed)
	if sent.failed > 0 {
		t.Errorf("%d of %d requests failed during helm upgrade: %q", sent.failed, sent.tries, sent.failures)
	}
	if sent.tries < 100 {
		t.Errorf("only %d requests were sent", sent.tries)
	}
}

// verifiedWithTraffic runs kubectl mcs verify from north, whose client
// Pod runs the image of north's mcs-syncer Pods (found, not named): it
// reports web answered by east and west (exit 0); then, with west's
// Deployment scaled to 0 and its endpoints gone from north, it exits 1
// naming west; and it leaves no client Pod behind. The real node's
// selector and toleration are given with --overrides, as a user gives a
// node selector.
func verifiedWithTraffic(ctx context.Context, t *testing.T, kubeconfig, ns string) {
	t.Helper()
	bin := buildKubectlMCS(ctx, t)
	overrides := fmt.Sprintf(`{"spec":{"nodeSelector":{%q:"true"},"tolerations":[{"key":%q,"operator":"Exists","effect":%q}]}}`,
		realnode.Label, realnode.Taint.Key, realnode.Taint.Effect)
	verifyWeb := func() (verifyOutput, int, string) {
		var out verifyOutput
		code, stderr := runJSON(ctx, t, &out, bin, "verify", ns+"/web", "--kubeconfig", kubeconfig, "--contexts", "east,west,north",
			"--from", "north", "--overrides", overrides, "-o", "json")
		return out, code, stderr
	}
	out, code, stderr := verifyWeb()
	if code != 0 || len(out.Reports) != 1 || strings.Join(out.Reports[0].Answered, ",") != "east,west" {
		t.Fatalf("kubectl mcs verify: exit %d, %+v, stderr %s; want exit 0, answered by east and west", code, out, stderr)
	}
	fmt.Printf("kubectl mcs verify from north: %s answered (exported by %s)\n",
		strings.Join(out.Reports[0].Answered, ", "), strings.Join(out.Reports[0].Exporters, ", "))

	west := bed.ClientOf(t, "west")
	scale := func(replicas int32) {
		var d appsv1.Deployment
		if err := west.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &d); err != nil {
			t.Fatal(err)
		}
		d.Spec.Replicas = &replicas
		if err := west.Update(ctx, &d); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, fmt.Sprintf("north to import %d of west's endpoints", replicas),
			readyImported(ctx, bed.ClientOf(t, "north"), ns, map[string]int{"east": 1, "west": int(replicas)}))
	}
	scale(0)
	out, code, stderr = verifyWeb()
	if code != 1 || len(out.Problems) == 0 || !strings.Contains(strings.Join(out.Problems, "; "), "west exports "+ns+"/web") ||
		strings.Join(out.Reports[0].Answered, ",") != "east" {
		t.Errorf("kubectl mcs verify with west scaled to 0: exit %d, %+v, stderr %s; want exit 1 naming west, answered by east", code, out, stderr)
	}
	scale(1)
	var pods corev1.PodList
	if err := bed.ClientOf(t, "north").List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": "mcs-verify"}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) > 0 {
		t.Errorf("kubectl mcs verify left %d client Pods in north", len(pods.Items))
	}
}

// verifyOutput is kubectl mcs verify -o json's output, as far as read.
type verifyOutput struct {
	Reports []struct {
		Answered  []string `json:"answered"`
		Exporters []string `json:"exporters"`
	} `json:"reports"`
	Problems []string `json:"problems"`
}

// nothingLeft checks that no object of the chart is left in the clusters
// named (nothingLeftIn).
func nothingLeft(ctx context.Context, t *testing.T, clusters ...string) {
	t.Helper()
	for _, c := range clusters {
		nothingLeftIn(ctx, t, c, bed.ClientOf(t, c))
	}
}

// nothingLeftIn checks that cl holds no object labelled as the release's
// (app.kubernetes.io/instance=mcs-syncer, managed by Helm) of any kind the
// chart renders, no release record of Helm's, and no mcs-syncer Pod; and
// that the CRDs, which the chart keeps, are still served.
func nothingLeftIn(ctx context.Context, t *testing.T, name string, cl client.Client) {
	t.Helper()
	release := client.MatchingLabels{"app.kubernetes.io/instance": "mcs-syncer", "app.kubernetes.io/managed-by": "Helm"}
	lists := map[string]client.ObjectList{
		"Deployments": &appsv1.DeploymentList{}, "Services": &corev1.ServiceList{}, "Secrets": &corev1.SecretList{},
		"ConfigMaps": &corev1.ConfigMapList{}, "ServiceAccounts": &corev1.ServiceAccountList{},
		"Roles": &rbacv1.RoleList{}, "RoleBindings": &rbacv1.RoleBindingList{},
		"ClusterRoles": &rbacv1.ClusterRoleList{}, "ClusterRoleBindings": &rbacv1.ClusterRoleBindingList{},
		"ValidatingAdmissionPolicies":            &admissionregistrationv1.ValidatingAdmissionPolicyList{},
		"ValidatingAdmissionPolicyBindings":      &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{},
		"Namespaces":                             &corev1.NamespaceList{},
		"the release's records (Helm's Secrets)": &corev1.SecretList{},
		"mcs-syncer Pods":                        &corev1.PodList{},
	}
	selectors := map[string]client.ListOption{
		"the release's records (Helm's Secrets)": client.MatchingLabels{"owner": "helm", "name": "mcs-syncer"},
		"mcs-syncer Pods":                        client.MatchingLabels{"app.kubernetes.io/name": "mcs-syncer"},
	}
	for kind, list := range lists {
		selector, ok := selectors[kind]
		if !ok {
			selector = release
		}
		eventually(ctx, t, fmt.Sprintf("%s to hold no %s of the release", name, kind), func() error {
			if err := cl.List(ctx, list, selector); err != nil {
				return err
			}
			if n := meta.LenList(list); n > 0 {
				return fmt.Errorf("%d left", n)
			}
			return nil
		})
	}
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := cl.List(ctx, &crds, release); err != nil {
		t.Fatal(err)
	}
	if len(crds.Items) != 3 {
		t.Errorf("%s: %d CRDs of the release left, want its 3 kept (helm.sh/resource-policy: keep)", name, len(crds.Items))
	}
}
