package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/mcs-syncer/mcs-syncer/test/testbed"
)

// TestForbiddenMemberHoldsOthersForTheGraceOnly (central mode, grace 20 s):
// north's credentials answer the probe (/readyz and discovery are open to
// every identity) but may list nothing, so north cycles forbidden,
// syncing, forbidden, ... for good. An export east ends is withdrawn from
// west once north's grace, counted from the start, has run out (before,
// the cycle restarted north's clock and the import stayed for as long as
// north flapped); one ended after that is withdrawn at once. /readyz names
// north's state and since when it is down.
func TestForbiddenMemberHoldsOthersForTheGraceOnly(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	exclusive(t)
	ns := "stuck-member"
	bed.Namespace(ctx, t, ns)

	dir := t.TempDir()
	northKubeconfig := filepath.Join(dir, "north-no-rights.kubeconfig")
	serviceAccountKubeconfig(ctx, t, "north", "no-rights", northKubeconfig)
	path := filepath.Join(dir, "clusterset.yaml")
	east, west := bed.Cluster("east"), bed.Cluster("west")
	writeMembers(t, path,
		testbed.Member{ID: "east", Kubeconfig: east.KubeconfigPath, Context: east.Context},
		testbed.Member{ID: "west", Kubeconfig: west.KubeconfigPath, Context: west.Context},
		testbed.Member{ID: "north", Kubeconfig: northKubeconfig})
	eastClient, westClient := bed.ClientOf(t, "east"), bed.ClientOf(t, "west")
	for _, name := range []string{"first", "second"} {
		if err := manualExport(ctx, eastClient, ns, name, "10.100.9.7"); err != nil {
			t.Fatal(err)
		}
	}
	started := time.Now()
	s := ownSyncer(ctx, t, path)
	for _, name := range []string{"first", "second"} {
		eventually(ctx, t, "west: east's "+name, importedEndpoints(ctx, westClient, ns, name, "east", 1))
	}
	eventually(ctx, t, "/readyz to name north's refusal and since when it is down", readyzSays(ctx, s, "[+]member north ok: forbidden since", "; down since"))

	heldForTheGraceOnly(ctx, t, eastClient, westClient, ns, started)
}

// serviceAccountKubeconfig writes to path a kubeconfig of member that
// authenticates as ServiceAccount mcs-system/sa, created (with its
// namespace) if missing; what it may do is the caller's to grant.
func serviceAccountKubeconfig(ctx context.Context, t *testing.T, member, sa, path string) {
	t.Helper()
	admin := bed.ClientOf(t, member)
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mcs-system"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: "mcs-system"}},
	} {
		if err := admin.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	c := bed.Cluster(member)
	writeTokenKubeconfig(t, c, serviceAccountToken(ctx, t, c, "mcs-system", sa), path)
}

// heldForTheGraceOnly ends the exports "first" and "second" of ns in
// exporter, one after the other, while a member that cannot be read holds
// consumer's withdrawals: first is withdrawn from consumer once the grace
// (20 s) counted from started has run out, not before; second at once.
func heldForTheGraceOnly(ctx context.Context, t *testing.T, exporter, consumer client.Client, ns string, started time.Time) {
	t.Helper()
	unexport := func(name string) {
		t.Helper()
		if err := exporter.Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	withdrawn := func(name string) func() error {
		return func() error {
			if _, err := identityOf(ctx, consumer, ns, name); !apierrors.IsNotFound(err) {
				return fmt.Errorf("ServiceImport %s still imported (%v)", name, err)
			}
			return nil
		}
	}
	unexport("first")
	eventually(ctx, t, "first to be withdrawn once the grace has run out", withdrawn("first"))
	t.Logf("first withdrawn %s after the start (grace 20s)", time.Since(started).Round(time.Millisecond))
	if since := time.Since(started); since < 15*time.Second {
		t.Errorf("first withdrawn %s after the start, within the grace", since)
	}
	unexport("second")
	ended := time.Now()
	eventually(ctx, t, "second to be withdrawn at once", withdrawn("second"))
	if took := time.Since(ended); took > 10*time.Second {
		t.Errorf("second withdrawn %s after its export ended, past the grace", took)
	}
	t.Logf("second withdrawn %s after its export ended", time.Since(ended).Round(time.Millisecond))
}

// TestNeverMarkedMemberHoldsOthersForTheGraceOnly (hub mode, grace 20 s):
// north's config names a member, ghost, whose mcs-syncer is not deployed
// yet (as in a rollout): engaged through the hub, it never publishes its
// marker, so its exports are never known. An export east ends is
// withdrawn from north once ghost's grace, counted from north's start, has
// run out (before, ghost froze every withdrawal for as long as it was
// named); one ended after that is withdrawn at once.
func TestNeverMarkedMemberHoldsOthersForTheGraceOnly(t *testing.T) {
	ns := "hub-never-marked"
	ctx, procs := hubFailureTest(t, ns, 4*time.Minute)
	east, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "north")
	for _, name := range []string{"first", "second"} {
		if err := manualExport(ctx, east, ns, name, "10.100.9.7"); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, "north: east's "+name, importedEndpoints(ctx, north, ns, name, "east", 1))
	}

	conf := bed.HubConfig("north", filepath.Join(bed.StateDir, "hub", "north.kubeconfig"))
	conf.Members = append(conf.Members, testbed.Member{ID: "ghost"})
	raw, err := yaml.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "north-with-ghost.yaml")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := procs["north"].stop(); err != nil {
		t.Fatal(err)
	}
	p, err := startHubMemberWith(ctx, "north", path)
	if err != nil {
		t.Fatal(err)
	}
	procs["north"] = p
	started := time.Now()
	eventually(ctx, t, "north's /readyz to name ghost", readyzSays(ctx, p, "[+]member ghost ok"))
	heldForTheGraceOnly(ctx, t, east, north, ns, started)
}
