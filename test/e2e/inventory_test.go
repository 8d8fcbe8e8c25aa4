package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/inventory"
	"github.com/mcs-syncer/mcs-syncer/internal/status"
)

// TestMembersFromClusterProfiles (central mode): the clusterset config
// names no member, only an inventory: the ClusterProfiles of namespace
// fleet in the testbed's hub, of cluster manager testbed, reached through
// their access provider testbed-token, whose exec plugin (the testbed's
// tokenplugin) reads each cluster's token from a Secret of the hub that
// the profile's exec extension names. East's and north's profiles make
// them members, and east's export reaches north, every request carrying a
// token the plugin gave, the plugin run with the arguments each profile's
// exec/additional-args extension adds (the provider config's policy
// Append). West joins when its profile is created, and its
// export reaches north; a ControlPlaneHealthy=False on its profile shows
// on its /readyz line; a profile without a cluster ID, or of another
// cluster manager, makes no member (the first is named with why). When
// west's profile is deleted, west leaves as a member removed from the
// file does: its export leaves north at once, and what mcs-syncer wrote
// into west is removed once the departure has settled.
func TestMembersFromClusterProfiles(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	exclusive(t)
	const ns = "members-from-profiles"
	bed.Namespace(ctx, t, ns)
	inv := newTestInventory(ctx, t)
	for _, member := range []string{"east", "north"} {
		inv.apply(ctx, t, member, member, member, inventoryManager, metav1.ConditionTrue)
	}
	s := ownSyncer(ctx, t, inv.configPath)
	east, west, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "west"), bed.ClientOf(t, "north")
	if err := manualExport(ctx, east, ns, "api", "10.103.1.1"); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "north: east's api, both read through their ClusterProfiles", importedEndpoints(ctx, north, ns, "api", "east", 1))
	eventually(ctx, t, "/readyz to name the inventory and both members", readyzSays(ctx, s,
		"[+]inventory ok: ClusterProfiles of namespace fleet with x-k8s.io/cluster-manager=testbed: 2 read at",
		"[+]member east ok: engaged since", "[+]member north ok: engaged since"))
	for _, member := range []string{"east", "north"} {
		if used := inv.pluginUsedFor(t, member); !used {
			t.Errorf("the exec plugin was never run for %s", member)
		}
	}

	// West joins through its profile; one without an ID and one of
	// another cluster manager do not.
	inv.apply(ctx, t, "west", "west", "west", inventoryManager, metav1.ConditionTrue)
	created := time.Now()
	eventually(ctx, t, "west to be a member (on /readyz), its profile's watch event applied at once", func() error {
		if _, body, err := s.Readyz(ctx); err != nil || !strings.Contains(body, "member west ") {
			return fmt.Errorf("/readyz names no member west (%v)", err)
		}
		return nil
	})
	// Printed, not asserted: a time on a shared machine is no test. The
	// config's poll (2 s) plays no part: TestInventoryFollowsProfiles
	// shows the event alone brings a profile in.
	fmt.Printf("inventory: west a member %s after its ClusterProfile was written (a watch event; the config poll is 2 s)\n",
		time.Since(created).Round(time.Millisecond))
	inv.apply(ctx, t, "nameless", "east", "", inventoryManager, metav1.ConditionTrue)
	inv.apply(ctx, t, "other-manager", "east", "south", "elsewhere", metav1.ConditionTrue)
	if err := manualExport(ctx, west, ns, "web", "10.103.2.1"); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "north: west's web, west having joined through its profile", importedEndpoints(ctx, north, ns, "web", "west", 1))
	eventually(ctx, t, "west: east's api", importedEndpoints(ctx, west, ns, "api", "east", 1))
	eventually(ctx, t, "/readyz to name the profile without an ID", readyzSays(ctx, s,
		"[+]member of ClusterProfile fleet/nameless ok: left out: ClusterProfile fleet/nameless has no property cluster.clusterset.k8s.io"))
	if _, body, err := s.Readyz(ctx); err != nil || strings.Contains(body, "other-manager") || strings.Contains(body, "member south") {
		t.Errorf("the profile of another cluster manager is in /readyz (%v):\n%s", err, body)
	}

	// kubectl mcs reads the same config, its inventory included.
	bin := buildKubectlMCS(ctx, t)
	eventually(ctx, t, "kubectl mcs status to read the three members of the inventory, and name the profile left out", func() error {
		var r status.Report
		code, stderr := runJSON(ctx, t, &r, bin, "status", "--clusterset-config", inv.configPath, "-o", "json")
		if r.Members == nil {
			return fmt.Errorf("exit %d: %s", code, stderr)
		}
		if !strings.Contains(stderr, "kubectl mcs status: inventory: left out ClusterProfile fleet/nameless: ") {
			return fmt.Errorf("stderr does not name the profile without an ID: %s", stderr)
		}
		var read []string
		for _, m := range r.Members {
			if m.Read {
				read = append(read, m.ID)
			}
		}
		if strings.Join(read, ",") != "east,north,west" {
			return fmt.Errorf("members read %v: %+v", read, r.Members)
		}
		return nil
	})

	// Its cluster manager finds west's control plane unhealthy.
	inv.apply(ctx, t, "west", "west", "west", inventoryManager, metav1.ConditionFalse)
	eventually(ctx, t, "west's line to say what its profile says", readyzSays(ctx, s,
		"[+]member west ok: engaged since", "its ClusterProfile fleet/west says ControlPlaneHealthy=False (LeaseExpired: the cluster manager lost its lease)"))

	// West's profile is deleted: west leaves.
	if err := inv.profiles.Delete(ctx, "west", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	left := time.Now()
	eventually(ctx, t, "north: west's web withdrawn", importedEndpoints(ctx, north, ns, "web", "west", 0))
	t.Logf("west's export left north %s after its profile was deleted", time.Since(left).Round(time.Millisecond))
	eventually(ctx, t, "west: what mcs-syncer wrote there removed once its departure settled", func() error {
		err := west.Get(ctx, types.NamespacedName{Namespace: ns, Name: "api"}, &mcsv1beta1.ServiceImport{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("west's ServiceImport api: %v", err)
	})
	eventually(ctx, t, "north: east's api still", importedEndpoints(ctx, north, ns, "api", "east", 1))
	if err := s.Exited(); err != nil {
		t.Fatal(err)
	}
}

// testInventory is an inventory in the testbed's hub: the ClusterProfile
// CRD, namespace fleet with a token Secret per member, the exec plugin,
// its provider config, and a clusterset config that names the inventory
// and no member.
type testInventory struct {
	profiles   dynamic.ResourceInterface
	configPath string
	pluginLog  string
}

const (
	inventoryNamespace = "fleet"
	inventoryManager   = "testbed"
	inventoryProvider  = "testbed-token"
)

func newTestInventory(ctx context.Context, t *testing.T) *testInventory {
	t.Helper()
	if err := bed.Hub.InstallClusterProfileCRD(ctx); err != nil {
		t.Fatal(err)
	}
	hub := hubClient(t, "")
	fleet := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: inventoryNamespace}}
	if err := hub.Create(ctx, fleet); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	dir := t.TempDir()
	inv := &testInventory{configPath: filepath.Join(dir, "clusterset.yaml"), pluginLog: filepath.Join(dir, "plugin.log")}
	dc, err := dynamic.NewForConfig(bed.Hub.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	inv.profiles = dc.Resource(inventory.Resource).Namespace(inventoryNamespace)
	t.Cleanup(func() {
		_ = inv.profiles.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{})
	})
	for _, c := range bed.Clusters {
		token := memberToken(ctx, t, c.Name)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: c.Name + "-token", Namespace: inventoryNamespace}}
		if _, err := controllerutil.CreateOrUpdate(ctx, hub, secret, func() error {
			secret.Data = map[string][]byte{"token": []byte(token)}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	plugin := filepath.Join(dir, "bin", "tokenplugin")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", plugin, "../testbed/tokenplugin").CombinedOutput(); err != nil {
		t.Fatalf("go build tokenplugin: %v\n%s", err, out)
	}
	providers := map[string]any{"providers": []any{map[string]any{"name": inventoryProvider, "execConfig": map[string]any{
		"apiVersion": "client.authentication.k8s.io/v1", "command": "./bin/tokenplugin", "provideClusterInfo": true,
		"env": []any{map[string]any{"name": "TOKENPLUGIN_KUBECONFIG", "value": bed.Hub.KubeconfigPath}, map[string]any{"name": "TOKENPLUGIN_LOG", "value": inv.pluginLog}},
	}, "profileSourcedCLIArgsPolicy": inventory.PolicyAppend}}}
	raw, err := json.Marshal(providers)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "providers.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(configHeader+"clusterset: testbed\ninventory:\n  kubeconfig: %s\n  namespace: %s\n  clusterManager: %s\n  providerConfig: providers.json\n",
		bed.Hub.KubeconfigPath, inventoryNamespace, inventoryManager)
	if err := os.WriteFile(inv.configPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return inv
}

// memberToken returns a token of a service account of member bound to
// cluster-admin, as central mode's mcs-syncer needs.
func memberToken(ctx context.Context, t *testing.T, member string) string {
	t.Helper()
	c := bed.Cluster(member)
	cl := bed.ClientOf(t, member)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "inventory-member", Namespace: "kube-system"}}
	if err := cl.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "inventory-member"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}}}
	if err := cl.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return serviceAccountToken(ctx, t, c, sa.Namespace, sa.Name)
}

// apply writes ClusterProfile name of cluster manager manager for the
// testbed's cluster member, with the cluster ID id ("" for none) and the
// control plane's health.
func (inv *testInventory) apply(ctx context.Context, t *testing.T, name, member, id, manager string, healthy metav1.ConditionStatus) {
	t.Helper()
	rc := bed.Cluster(member).RESTConfig()
	condition := map[string]any{"type": inventory.ControlPlaneHealthy, "status": string(healthy), "reason": "Healthy", "message": "",
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}
	if healthy != metav1.ConditionTrue {
		condition["reason"], condition["message"] = "LeaseExpired", "the cluster manager lost its lease"
	}
	status := map[string]any{
		"conditions": []any{condition},
		"accessProviders": []any{map[string]any{"name": inventoryProvider, "cluster": map[string]any{
			"server": rc.Host, "certificate-authority-data": rc.CAData,
			"extensions": []any{
				map[string]any{"name": inventory.ExecExtension, "extension": map[string]any{"secret": inventoryNamespace + "/" + member + "-token"}},
				// Arguments of its own for the plugin (KEP-4322; the
				// provider config appends them).
				map[string]any{"name": inventory.AdditionalArgsExtension, "extension": []any{"--cluster-name", name}},
			},
		}}},
	}
	if id != "" {
		status["properties"] = []any{map[string]any{"name": inventory.ClusterIDProperty, "value": id}}
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": inventory.GroupVersion.String(), "kind": "ClusterProfile",
		"metadata": map[string]any{"name": name, "namespace": inventoryNamespace, "labels": map[string]any{inventory.ClusterManagerLabel: manager}},
		"spec":     map[string]any{"clusterManager": map[string]any{"name": manager}},
	}}
	// The status is written as a cluster manager writes it: through the
	// status subresource of the profile it created.
	eventually(ctx, t, "ClusterProfile "+name+" written", func() error {
		current, err := inv.profiles.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			current, err = inv.profiles.Create(ctx, obj, metav1.CreateOptions{})
		}
		if err != nil {
			return err
		}
		current.Object["status"] = jsonRoundTrip(t, status)
		_, err = inv.profiles.UpdateStatus(ctx, current, metav1.UpdateOptions{})
		return err
	})
}

// jsonRoundTrip returns v as JSON decodes it: what an unstructured object
// holds ([]byte as base64 strings, numbers as int64 or float64).
func jsonRoundTrip(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// pluginUsedFor reports whether the exec plugin gave a token for member's
// cluster, run with the arguments its profile's exec/additional-args
// extension adds (apply: --cluster-name <profile>).
func (inv *testInventory) pluginUsedFor(t *testing.T, member string) bool {
	t.Helper()
	raw, err := os.ReadFile(inv.pluginLog)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Contains(string(raw), " "+inventoryNamespace+"/"+member+"-token args=--cluster-name,"+member+"\n")
}
