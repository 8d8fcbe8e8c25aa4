package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/imports"
	"github.com/mcs-syncer/mcs-syncer/internal/status"
	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/controlplane"
)

// TestCRDVersionSkew (hub mode, heartbeat 2 s, grace 20 s): west's MCS
// CRDs serve v1alpha1 only, as mcs-api's before v0.5.0 did, while east's
// and north's serve v1beta1 too. West's mcs-syncer reads and writes
// v1alpha1 there: its v1alpha1 ServiceExport reaches north, east's export
// reaches west as a v1alpha1 ServiceImport that owns its derived Service
// in that version, and /readyz and kubectl mcs status say so. Then west's
// CRDs are upgraded in place (v1beta1 stored) and rolled back (v1beta1 no
// longer served) under the running mcs-syncer: each time it is engaged
// anew on the version served, with no restart, and exports made after
// each change still flow. Through both changes no ServiceImport is ever
// deleted in east or north, and north never loses west's endpoints. Last,
// west's MCS API is served in no version: its export side stops, and so
// does its heartbeat (north sees it silent) until it is served again.
func TestCRDVersionSkew(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	exclusive(t)
	const ns = "crd-version-skew"
	bed.Namespace(ctx, t, ns)
	westBed := bed.Cluster("west")
	if err := westBed.ServeMCSVersions(ctx, "v1alpha1", "v1alpha1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := westBed.ServeMCSVersions(context.Background(), "v1beta1", "v1alpha1", "v1beta1"); err != nil {
			t.Errorf("restore west's CRDs: %v", err)
		}
	})
	t.Cleanup(func() { clearHub(t) })
	procs := startHubModeWithHeartbeat(ctx, t)
	t.Cleanup(func() { stopAll(t, slices.Collect(maps.Values(procs))) })
	east, west, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "west"), bed.ClientOf(t, "north")

	westOnV1alpha1FlowsBothWays(ctx, t, ns)
	// onVersion waits for west to be engaged on version, since its CRDs
	// changed at changed (zero: at the start).
	var changed time.Time
	onVersion := func(version string) {
		t.Helper()
		eventually(ctx, t, "west engaged on "+version, readyzSays(ctx, procs["west"], "[+]member west ok: engaged since", "on multicluster.x-k8s.io/"+version))
		if !changed.IsZero() {
			t.Logf("west engaged on %s %s after its CRDs changed", version, time.Since(changed).Round(time.Millisecond))
		}
	}
	onVersion("v1alpha1")
	statusSays(ctx, t, "v1alpha1")

	deleted := watchDeletedImports(ctx, t, ns, "east", "north")
	before := importUIDs(ctx, t, ns, "east", "north")

	// Upgraded in place, as applying mcs-api v0.5's CRDs does.
	changed = time.Now()
	if err := westBed.ServeMCSVersions(ctx, "v1beta1", "v1alpha1", "v1beta1"); err != nil {
		t.Fatal(err)
	}
	onVersion("v1beta1")
	if err := manualExport(ctx, west, ns, "db", "10.102.1.2"); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "north: west's db, exported in v1beta1 after the upgrade", importedEndpoints(ctx, north, ns, "db", "west", 1))

	// Rolled back: v1beta1 no longer served (it stays in the CRD, as a
	// version objects were stored in).
	changed = time.Now()
	if err := westBed.ServeMCSVersions(ctx, "v1alpha1", "v1alpha1"); err != nil {
		t.Fatal(err)
	}
	onVersion("v1alpha1")
	if err := manualExport(ctx, east, ns, "cache", "10.102.2.2"); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "west: east's cache, after the rollback", importedEndpoints(ctx, west, ns, "cache", "east", 1))
	for _, name := range []string{"web", "db"} {
		eventually(ctx, t, "north: west's "+name+" still", importedEndpoints(ctx, north, ns, name, "west", 1))
	}
	if got := deleted(); len(got) > 0 {
		t.Errorf("ServiceImports deleted while west's CRDs changed: %v", got)
	}
	after := importUIDs(ctx, t, ns, "east", "north")
	for key, uid := range before {
		if after[key] != uid {
			t.Errorf("ServiceImport %s: UID %s before the CRD changes, %q after", key, uid, after[key])
		}
	}

	// West's MCS API served in no version: its export side stops, and its
	// marker is no longer renewed, so north sees it silent (and holds or
	// withdraws its exports by the rules of liveness), never a member
	// whose stale view is vouched for. Served again, it is renewed again.
	if err := westBed.ServeMCSVersions(ctx, "v1alpha1"); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "west missing its CRDs", readyzSays(ctx, procs["west"], "[+]member west ok: missing-crds since"))
	// A renewal under way when west stopped may land: the last is the one
	// older than a heartbeat (2 s), the publisher's own clock being this
	// machine's.
	var stopped time.Time
	eventually(ctx, t, "west's last renewal a heartbeat old", func() error {
		if stopped = westRenewal(ctx, t); time.Since(stopped) < 2500*time.Millisecond {
			return fmt.Errorf("renewed at %s", stopped)
		}
		return nil
	})
	holds(ctx, t, "west's marker not renewed for three heartbeats", 3*2*time.Second, func() error {
		if now := westRenewal(ctx, t); !now.Equal(stopped) {
			return fmt.Errorf("renewed at %s while west's export side does not run", now)
		}
		return nil
	})
	eventually(ctx, t, "north to see west silent", readyzSays(ctx, procs["north"], "[+]member west ok: silent since"))
	changed = time.Now()
	if err := westBed.ServeMCSVersions(ctx, "v1alpha1", "v1alpha1"); err != nil {
		t.Fatal(err)
	}
	onVersion("v1alpha1")
	eventually(ctx, t, "west's marker renewed again", func() error {
		if now := westRenewal(ctx, t); !now.After(stopped) {
			return fmt.Errorf("renewed last at %s", now)
		}
		return nil
	})
	for name, p := range procs {
		if err := p.Exited(); err != nil {
			t.Errorf("%s's mcs-syncer exited: %v", name, err)
		}
	}
}

// westRenewal returns when west's marker in the hub was last renewed.
func westRenewal(ctx context.Context, t *testing.T) time.Time {
	t.Helper()
	marker := &v1alpha1.PublishedExport{}
	if err := hubClient(t, "").Get(ctx, types.NamespacedName{Namespace: testbed.HubNamespace, Name: "west"}, marker); err != nil {
		t.Fatal(err)
	}
	if marker.Spec.RenewTime == nil {
		t.Fatal("west's marker has no renewTime")
	}
	return marker.Spec.RenewTime.Time
}

// statusSays: kubectl mcs status, given west's hub-mode config (west read
// directly, the others through the hub), reads west's v1alpha1
// ServiceExport and names the version west serves.
func statusSays(ctx context.Context, t *testing.T, version string) {
	t.Helper()
	bin := buildKubectlMCS(ctx, t)
	var r status.Report
	eventually(ctx, t, "kubectl mcs status to read west in "+version, func() error {
		if code, stderr := runJSON(ctx, t, &r, bin, "status", "--clusterset-config", bed.HubConfigPath("west"), "-o", "json"); code != 0 && r.Members == nil {
			return fmt.Errorf("exit %d: %s", code, stderr)
		}
		for _, m := range r.Members {
			if m.ID == "west" && m.Read && m.MCSAPI == "multicluster.x-k8s.io/"+version && m.ServiceExports == 1 {
				return nil
			}
		}
		return fmt.Errorf("members %+v", r.Members)
	})
}

// watchDeletedImports watches the ServiceImports of ns in members and
// returns what tells the deletions seen so far ("member: name").
func watchDeletedImports(ctx context.Context, t *testing.T, ns string, members ...string) func() []string {
	t.Helper()
	var mu sync.Mutex
	var deleted []string
	for _, member := range members {
		cl, err := client.NewWithWatch(bed.Cluster(member).RESTConfig(), client.Options{Scheme: controlplane.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		w, err := cl.Watch(ctx, &mcsv1beta1.ServiceImportList{}, client.InNamespace(ns))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		go func() {
			for ev := range w.ResultChan() {
				if si, ok := ev.Object.(*mcsv1beta1.ServiceImport); ok && ev.Type == watch.Deleted {
					mu.Lock()
					deleted = append(deleted, member+": "+si.Name)
					mu.Unlock()
				}
			}
		}()
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(deleted)
	}
}

// importUIDs returns the UIDs of the ServiceImports of ns in members, by
// "member/name".
func importUIDs(ctx context.Context, t *testing.T, ns string, members ...string) map[string]types.UID {
	t.Helper()
	uids := map[string]types.UID{}
	for _, member := range members {
		var list mcsv1beta1.ServiceImportList
		if err := bed.ClientOf(t, member).List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, si := range list.Items {
			uids[member+"/"+si.Name] = si.UID
		}
	}
	if !slices.ContainsFunc(slices.Collect(maps.Keys(uids)), func(k string) bool { return strings.HasSuffix(k, "/web") }) {
		t.Fatalf("no import of west's web among %v", uids)
	}
	return uids
}

// westOnV1alpha1FlowsBothWays exports web from west (a v1alpha1
// ServiceExport) and api from east into ns, and waits for north to import
// west's web, and for west to import east's api as a v1alpha1
// ServiceImport that owns its derived Service (as v1alpha1) and holds its
// clusterset IP.
func westOnV1alpha1FlowsBothWays(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	east, west, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "west"), bed.ClientOf(t, "north")
	if err := manualExportOf(ctx, west, &mcsv1alpha1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}}, "10.102.1.1"); err != nil {
		t.Fatalf("west's v1alpha1 ServiceExport: %v", err)
	}
	if err := manualExport(ctx, east, ns, "api", "10.102.2.1"); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "north: west's web, exported in v1alpha1", importedEndpoints(ctx, north, ns, "web", "west", 1))
	eventually(ctx, t, "west: east's api", importedEndpoints(ctx, west, ns, "api", "east", 1))
	eventually(ctx, t, "west's ServiceImport api in v1alpha1, owning its derived Service in v1alpha1 and holding its IP",
		ownsDerivedService(ctx, west, types.NamespacedName{Namespace: ns, Name: "api"}))
}

// ownsDerivedService returns a check that consumer holds the v1alpha1
// ServiceImport key, which owns its derived Service (as v1alpha1) and
// holds its clusterset IP.
func ownsDerivedService(ctx context.Context, consumer client.Client, key types.NamespacedName) func() error {
	return func() error {
		si := &mcsv1alpha1.ServiceImport{}
		if err := consumer.Get(ctx, key, si); err != nil {
			return err
		}
		svc := &corev1.Service{}
		if err := consumer.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: imports.DerivedServiceName(key)}, svc); err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(svc); ref == nil || ref.APIVersion != mcsv1alpha1.SchemeGroupVersion.String() || ref.UID != si.UID {
			return fmt.Errorf("derived Service's owner %+v, the ServiceImport's UID %s", ref, si.UID)
		}
		if len(si.Spec.IPs) != 1 || si.Spec.IPs[0] != svc.Spec.ClusterIP {
			return fmt.Errorf("ServiceImport's ips %v, derived Service's %s", si.Spec.IPs, svc.Spec.ClusterIP)
		}
		return nil
	}
}
