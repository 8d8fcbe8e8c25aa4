package membership

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/mcs-syncer/mcs-syncer/internal/inventory"
)

// TestParseInventoryConfig: a config may name an inventory instead of
// members, or beside them; its paths are made absolute against the
// config's folder; what it lacks or gets wrong is said.
func TestParseInventoryConfig(t *testing.T) {
	dir := t.TempDir()
	kubeconfig(t, dir, "fleet.kubeconfig", "https://127.0.0.1:6443")
	cfg, err := ParseConfig([]byte(configHeader+"clusterset: prod\ninventory:\n  kubeconfig: fleet.kubeconfig\n  namespace: fleet\n  clusterManager: ocm\n  labelSelector: env=prod\n  providerConfig: providers.json\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	inv := cfg.Inventory
	if inv == nil || inv.Kubeconfig != filepath.Join(dir, "fleet.kubeconfig") || inv.ProviderConfig != filepath.Join(dir, "providers.json") ||
		inv.Selection != (inventory.Selection{Namespace: "fleet", ClusterManager: "ocm", LabelSelector: "env=prod"}) {
		t.Fatalf("inventory %+v", inv)
	}
	if err := cfg.Usable(); err != nil {
		t.Errorf("a config whose members are all in the inventory: %v", err)
	}
	for _, tc := range []struct{ name, inventory, want string }{
		{"no namespace", "  kubeconfig: fleet.kubeconfig\n  providerConfig: p.json\n", "inventory: namespace is missing"},
		{"no provider config", "  kubeconfig: fleet.kubeconfig\n  namespace: fleet\n", "inventory: providerConfig is missing"},
		{"no connection", "  namespace: fleet\n  providerConfig: p.json\n", "inventory: kubeconfig is missing (or set inCluster: true)"},
		{"both", "  kubeconfig: fleet.kubeconfig\n  inCluster: true\n  namespace: fleet\n  providerConfig: p.json\n", "inventory: set kubeconfig or inCluster, not both"},
		{"bad namespace", "  inCluster: true\n  namespace: Fleet\n  providerConfig: p.json\n", `inventory: namespace "Fleet" is not a namespace name`},
		{"bad selector", "  inCluster: true\n  namespace: fleet\n  labelSelector: 'a in (b'\n  providerConfig: p.json\n", "inventory: labelSelector"},
		{"unknown field", "  inCluster: true\n  namespace: fleet\n  providerConfig: p.json\n  selector: x\n", `unknown field "selector"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(configHeader+"clusterset: prod\ninventory:\n"+tc.inventory), dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestInventoryMembers: each profile read becomes a member reached as its
// access provider says; a profile without an ID, with the ID of a member
// of the file or of an earlier profile, or without an access provider of
// the provider config is left out, with why; a profile whose control
// plane is not healthy is noted on its member.
func TestInventoryMembers(t *testing.T) {
	dir := t.TempDir()
	kubeconfig(t, dir, "east.kubeconfig", "https://127.0.0.1:6443")
	providers := filepath.Join(dir, "providers.json")
	if err := os.WriteFile(providers, []byte(`{"providers": [{"name": "token", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "plugin"}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(configHeader+"clusterset: prod\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\ninventory:\n  inCluster: true\n  namespace: fleet\n  providerConfig: providers.json\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	profile := func(name, id, provider string) inventory.ClusterProfile {
		p := inventory.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name}}
		if id != "" {
			p.Status.Properties = []inventory.Property{{Name: inventory.ClusterIDProperty, Value: id}}
		}
		p.Status.AccessProviders = []inventory.AccessProvider{{Name: provider}}
		p.Status.AccessProviders[0].Cluster.Server = "https://" + name + ":6443"
		return p
	}
	sick := profile("north", "north", "token")
	sick.Status.Conditions = []metav1.Condition{{Type: inventory.ControlPlaneHealthy, Status: metav1.ConditionFalse, Reason: "Unreachable", Message: "no lease"}}
	r := newInventoryReader()
	if line, ready := r.readiness(cfg); ready || !strings.Contains(line, "[-]inventory failed: ClusterProfiles of namespace fleet not read yet") {
		t.Errorf("before the first read: %v %q", ready, line)
	}
	pc, err := inventory.LoadProviderConfig(providers)
	if err != nil {
		t.Fatal(err)
	}
	r.tried, r.providers, r.settings = true, pc, *cfg.Inventory
	r.profiles = []inventory.ClusterProfile{profile("east-again", "east", "token"), profile("nameless", "", "token"), sick,
		profile("north-again", "north", "token"), profile("oidc-only", "south", "oidc"), profile("west", "west", "token")}
	expanded, left := r.expand(cfg)
	var ids []string
	for _, m := range expanded.Members {
		ids = append(ids, string(m.ID))
	}
	if strings.Join(ids, ",") != "east,north,west" {
		t.Fatalf("members %v", ids)
	}
	west := expanded.Member("west")
	rc, err := west.RESTConfig()
	if err != nil || rc.Host != "https://west:6443" || rc.ExecProvider == nil || rc.ExecProvider.Command != "plugin" || west.Access.Profile != "fleet/west" {
		t.Errorf("west: %+v, %v", rc, err)
	}
	if west.fingerprint() == expanded.Member("north").fingerprint() {
		t.Error("two profiles' members have one fingerprint")
	}
	wantLeft := map[string]string{
		"of ClusterProfile fleet/east-again":  `names it "east", which is the config's member already`,
		"of ClusterProfile fleet/nameless":    "has no property cluster.clusterset.k8s.io",
		"of ClusterProfile fleet/north-again": `names it "north", which is ClusterProfile fleet/north's already`,
		"of ClusterProfile fleet/oidc-only":   "none of its access providers [oidc] is in the provider config",
	}
	if len(left) != len(wantLeft) {
		t.Errorf("left out %+v", left)
	}
	for _, u := range left {
		if !u.profile || !strings.Contains(u.cause, wantLeft[u.name]) || !strings.HasPrefix(u.leftOut(), "left out: ") {
			t.Errorf("%s left out: %q, want %q", u.name, u.cause, wantLeft[u.name])
		}
		if line := u.profileLine(); !strings.HasPrefix(line, strings.TrimPrefix(u.name, "of ")+": ") || !strings.HasPrefix(line, "ClusterProfile fleet/") {
			t.Errorf("kubectl mcs's line of %s: %q", u.name, line)
		}
	}
	if note := r.note("north"); note != "its ClusterProfile fleet/north says ControlPlaneHealthy=False (Unreachable: no lease)" {
		t.Errorf("north's note %q", note)
	}
	if note := r.note("west"); note != "" {
		t.Errorf("west's note %q", note)
	}
}

// TestInventoryRefreshKeepsTheLastGoodRead: refresh (a one-off reader's
// LIST) reads the profiles from the inventory's API server into members;
// when the server then fails, a refresh keeps the members of the last
// good read, and /readyz says since when it cannot read and what stays.
func TestInventoryRefreshKeepsTheLastGoodRead(t *testing.T) {
	var failing atomic.Bool
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if failing.Load() {
			http.Error(w, "etcd is down", http.StatusServiceUnavailable)
			return
		}
		if req.URL.Path != "/apis/multicluster.x-k8s.io/v1alpha1/namespaces/fleet/clusterprofiles" {
			http.NotFound(w, req)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfileList", "metadata": {"resourceVersion": "7"}, "items": [`+
			inventoryProfileJSON("west")+`, `+inventoryProfileJSON("north")+`]}`)
	}))
	defer server.Close()
	dir := t.TempDir()
	kubeconfig(t, dir, "fleet.kubeconfig", server.URL)
	if err := os.WriteFile(filepath.Join(dir, "providers.json"), []byte(`{"providers": [{"name": "token", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "plugin"}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(configHeader+"clusterset: prod\ninventory:\n  kubeconfig: fleet.kubeconfig\n  namespace: fleet\n  providerConfig: providers.json\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	r := newInventoryReader()
	members := func() string {
		expanded, _ := r.expand(cfg)
		var ids []string
		for _, m := range expanded.Members {
			ids = append(ids, string(m.ID))
		}
		return strings.Join(ids, ",")
	}
	r.refresh(t.Context(), cfg)
	if got := members(); got != "north,west" {
		t.Fatalf("members after a good read: %q", got)
	}
	if line, ready := r.readiness(cfg); !ready || !strings.Contains(line, "2 read at") {
		t.Errorf("after a good read: %v %q", ready, line)
	}
	failing.Store(true)
	r.refresh(t.Context(), cfg)
	if got := members(); got != "north,west" {
		t.Errorf("members after a failed read: %q, want the last good read's", got)
	}
	if line, ready := r.readiness(cfg); !ready || !strings.Contains(line, "cannot be read since") || !strings.Contains(line, "unable to handle the request") || !strings.Contains(line, "the 2 read at") {
		t.Errorf("after a failed read: %v %q", ready, line)
	}
}

// inventoryProfileJSON is a ClusterProfile of namespace fleet named after
// its cluster, reached through the provider "token".
func inventoryProfileJSON(name string) string {
	return `{"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile", "metadata": {"namespace": "fleet", "name": "` + name + `"},
		"status": {"properties": [{"name": "` + inventory.ClusterIDProperty + `", "value": "` + name + `"}],
		"accessProviders": [{"name": "token", "cluster": {"server": "https://` + name + `:6443"}}]}}`
}

// TestInventoryFollowsProfiles: a Set's inventory is an informer: after
// one follow, a ClusterProfile created, changed or deleted reaches the
// reader (and its changed channel) by the watch's event, with no further
// follow or LIST; follow again with the same settings makes no new client;
// other settings make a new watch; a watch that cannot start is said on
// /readyz, and what was read stays.
func TestInventoryFollowsProfiles(t *testing.T) {
	dir := t.TempDir()
	providers := filepath.Join(dir, "providers.json")
	if err := os.WriteFile(providers, []byte(`{"providers": [{"name": "token", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "plugin"}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	parse := func(extra string) *Config {
		cfg, err := ParseConfig([]byte(configHeader+"clusterset: prod\ninventory:\n  inCluster: true\n  namespace: fleet\n  providerConfig: providers.json\n"+extra), dir)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	cfg := parse("")
	fake := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{inventory.Resource: "ClusterProfileList"})
	r := newInventoryReader()
	clients := 0
	var clientErr error
	r.clientFor = func(*Inventory) (dynamic.Interface, error) {
		clients++
		return fake, clientErr
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer r.stopWatch()
	// waitFor waits for a notice on r.changed after which the reader
	// holds want profiles.
	waitFor := func(what string, want int) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case <-r.changed:
				r.mu.Lock()
				n := len(r.profiles)
				r.mu.Unlock()
				if n == want {
					return
				}
			case <-deadline:
				t.Fatalf("%s: no notice with %d profiles within 30 s", what, want)
			}
		}
	}
	r.follow(ctx, cfg)
	waitFor("the first sync of an empty inventory", 0)
	if line, ready := r.readiness(cfg); !ready || !strings.Contains(line, "[+]inventory ok: ClusterProfiles of namespace fleet: 0 read at") {
		t.Errorf("after the first sync: %v %q", ready, line)
	}
	profiles := fake.Resource(inventory.Resource).Namespace("fleet")
	west := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": inventory.GroupVersion.String(), "kind": "ClusterProfile",
		"metadata": map[string]any{"name": "west", "namespace": "fleet"},
		"spec":     map[string]any{"clusterManager": map[string]any{"name": "ocm"}},
		"status": map[string]any{"properties": []any{map[string]any{"name": inventory.ClusterIDProperty, "value": "west"}},
			"accessProviders": []any{map[string]any{"name": "token", "cluster": map[string]any{"server": "https://west:6443"}}}},
	}}
	if _, err := profiles.Create(ctx, west, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("a profile created", 1)
	if expanded, _ := r.expand(cfg); expanded.Member("west") == nil {
		t.Errorf("west is no member after its profile's event: %+v", expanded.Members)
	}
	if err := profiles.Delete(ctx, "west", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("a profile deleted", 0)

	r.follow(ctx, cfg)
	if clients != 1 {
		t.Errorf("follow with the same settings made %d clients, want the first one only", clients)
	}
	clientErr = errors.New("no route to the inventory")
	r.follow(ctx, parse("  labelSelector: env=prod\n"))
	if clients != 2 {
		t.Errorf("follow with another selector made %d clients in all, want a second", clients)
	}
	if line, ready := r.readiness(cfg); !ready || !strings.Contains(line, "cannot be read since") || !strings.Contains(line, "no route to the inventory") {
		t.Errorf("a watch that cannot start: %v %q", ready, line)
	}
}
