package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/test/testbed"
)

// TestMarkerAheadIsRenewedAnyway (hub mode, heartbeat 2 s, grace 20 s):
// east's marker's renewTime is set an hour ahead with east's own hub
// identity (the hub's admission allows it; so would a replica whose clock
// ran ahead, or a clock step). East's publisher renews it within an
// interval with its own time, and north keeps east's endpoints through
// three silence intervals and the grace, with no restart (before, east
// stopped renewing for the hour and every reader withdrew it 46 s later).
func TestMarkerAheadIsRenewedAnyway(t *testing.T) {
	ns := "hub-marker-ahead"
	ctx, procs := hubFailureTest(t, ns, 4*time.Minute)
	east, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "north")
	if err := manualExport(ctx, east, ns, "web", "10.100.9.7"); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "north: east's web", importedEndpoints(ctx, north, ns, "web", "east", 1))

	hubEast := hubClient(t, "east")
	ahead := time.Now().Add(time.Hour)
	eventually(ctx, t, "east's marker set an hour ahead", func() error {
		marker := &v1alpha1.PublishedExport{}
		if err := hubEast.Get(ctx, types.NamespacedName{Namespace: testbed.HubNamespace, Name: "east"}, marker); err != nil {
			return err
		}
		at := metav1.NewMicroTime(ahead)
		marker.Spec.RenewTime = &at
		return hubEast.Update(ctx, marker) // a conflict with a renewal: again
	})
	set := time.Now()
	eventually(ctx, t, "east to renew its marker with its own time", func() error {
		marker := &v1alpha1.PublishedExport{}
		if err := hubEast.Get(ctx, types.NamespacedName{Namespace: testbed.HubNamespace, Name: "east"}, marker); err != nil {
			return err
		}
		if marker.Spec.RenewTime == nil || marker.Spec.RenewTime.After(time.Now().Add(time.Minute)) {
			return fmt.Errorf("renewTime %v", marker.Spec.RenewTime)
		}
		return nil
	})
	renewedAfter := time.Since(set)
	t.Logf("east renewed its marker %s after it was set an hour ahead (heartbeat 2 s)", renewedAfter.Round(time.Millisecond))
	if renewedAfter > 10*time.Second {
		t.Errorf("renewed %s after it was set ahead, want within an interval (2 s) and a poll", renewedAfter)
	}
	// Three intervals of silence make a member silent; the grace (20 s)
	// then withdraws it: 35 s covers both, with margin.
	holds(ctx, t, "north to keep east's web", 35*time.Second, importedEndpoints(ctx, north, ns, "web", "east", 1))
	if err := procs["east"].Exited(); err != nil {
		t.Fatalf("east's mcs-syncer exited: %v", err)
	}
}

// TestForbiddenAfterSyncHoldsOnlyItsOwn (central mode, grace 20 s): west
// is read with a token that may read everything; once north imports
// east's first and second and west's own, west's kubeconfig is replaced
// by a token that may list nothing, so west cycles forbidden. East then
// ends its exports: each is withdrawn from north and east within seconds
// (before: after west's grace, 26.7 s and 16.9 s). West's own export,
// whose last complete view is known, stays imported for its grace, and is
// withdrawn once it has run out.
func TestForbiddenAfterSyncHoldsOnlyItsOwn(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	exclusive(t)
	const ns = "forbidden-after-sync"
	bed.Namespace(ctx, t, ns)

	westAdmin := bed.ClientOf(t, "west")
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-forbidden-after-sync"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "mcs-system", Name: "e2e-reads-all"}},
	}
	if err := westAdmin.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = westAdmin.Delete(context.Background(), binding) })
	dir := t.TempDir()
	westKubeconfig := filepath.Join(dir, "west.kubeconfig")
	serviceAccountKubeconfig(ctx, t, "west", "e2e-reads-all", westKubeconfig)
	path := filepath.Join(dir, "clusterset.yaml")
	eastBed, northBed := bed.Cluster("east"), bed.Cluster("north")
	writeMembers(t, path,
		testbed.Member{ID: "east", Kubeconfig: eastBed.KubeconfigPath, Context: eastBed.Context},
		testbed.Member{ID: "north", Kubeconfig: northBed.KubeconfigPath, Context: northBed.Context},
		testbed.Member{ID: "west", Kubeconfig: westKubeconfig})
	east, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "north")
	for _, name := range []string{"first", "second"} {
		if err := manualExport(ctx, east, ns, name, "10.100.9.7"); err != nil {
			t.Fatal(err)
		}
	}
	if err := manualExport(ctx, westAdmin, ns, "own", "10.101.9.7"); err != nil {
		t.Fatal(err)
	}
	s := ownSyncer(ctx, t, path)
	for _, name := range []string{"first", "second"} {
		eventually(ctx, t, "north: east's "+name, importedEndpoints(ctx, north, ns, name, "east", 1))
	}
	eventually(ctx, t, "north: west's own", importedEndpoints(ctx, north, ns, "own", "west", 1))

	// The token replaced, as a rotated Secret is: written aside, renamed.
	noRights := westKubeconfig + ".new"
	serviceAccountKubeconfig(ctx, t, "west", "no-rights", noRights)
	if err := os.Rename(noRights, westKubeconfig); err != nil {
		t.Fatal(err)
	}
	replaced := time.Now()
	eventually(ctx, t, "/readyz to say west is forbidden", readyzSays(ctx, s, "[+]member west ok: forbidden since"))

	for _, name := range []string{"first", "second"} {
		if err := east.Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
		ended := time.Now()
		for consumer, cl := range map[string]client.Client{"north": north, "east": east} {
			eventually(ctx, t, consumer+" to withdraw "+name, func() error {
				if _, err := identityOf(ctx, cl, ns, name); !apierrors.IsNotFound(err) {
					return fmt.Errorf("ServiceImport %s still imported (%v)", name, err)
				}
				return nil
			})
		}
		took := time.Since(ended)
		t.Logf("%s withdrawn everywhere %s after its export ended, %s after west's token was replaced", name, took.Round(time.Millisecond), time.Since(replaced).Round(time.Millisecond))
		if took > 10*time.Second {
			t.Errorf("%s withdrawn %s after its export ended: held back by west", name, took)
		}
	}
	if since := time.Since(replaced); since < 15*time.Second {
		if err := importedEndpoints(ctx, north, ns, "own", "west", 1)(); err != nil {
			t.Errorf("west's own export %s after west turned forbidden, within its grace: %v", since.Round(time.Millisecond), err)
		}
	}
	eventually(ctx, t, "north to withdraw west's own once west's grace has run out", func() error {
		if _, err := identityOf(ctx, north, ns, "own"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("ServiceImport own still imported (%v)", err)
		}
		return nil
	})
	if since := time.Since(replaced); since < 15*time.Second {
		t.Errorf("west's own withdrawn %s after west turned forbidden, within its grace (20 s)", since)
	}
	t.Logf("west's own withdrawn %s after west's token was replaced (grace 20 s)", time.Since(replaced).Round(time.Millisecond))
}
