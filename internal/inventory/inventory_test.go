package inventory

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/clientcmd/api"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
)

// profile is a ClusterProfile as a cluster manager writes it: the
// cluster's ID property, a ControlPlaneHealthy condition and one access
// provider with a CA and the exec extension.
func profile(name, manager, id string) *unstructured.Unstructured {
	status := map[string]any{
		"conditions": []any{map[string]any{"type": ControlPlaneHealthy, "status": "False", "reason": "Unreachable",
			"message": "lease not renewed", "lastTransitionTime": "2026-11-28T04:00:00Z"}},
		"accessProviders": []any{map[string]any{"name": "token", "cluster": map[string]any{
			"server": "https://" + name + ".example:6443", "certificate-authority-data": "Q0EgREFUQQ==", // "CA DATA"
			"extensions": []any{map[string]any{"name": ExecExtension, "extension": map[string]any{"secret": "fleet/" + name}}},
		}}},
	}
	if id != "" {
		status["properties"] = []any{map[string]any{"name": ClusterIDProperty, "value": id}}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": GroupVersion.String(), "kind": "ClusterProfile",
		"metadata": map[string]any{"name": name, "namespace": "fleet", "labels": map[string]any{ClusterManagerLabel: manager}},
		"spec":     map[string]any{"clusterManager": map[string]any{"name": manager}},
		"status":   status,
	}}
}

// TestRead: the profiles of the namespace that the cluster manager and
// label selector select, sorted, converted with their access providers;
// a profile whose fields are of the wrong type is returned apart, named.
func TestRead(t *testing.T) {
	broken := profile("broken", "ocm", "broken")
	broken.Object["status"].(map[string]any)["properties"] = "not a list"
	other := profile("other", "fleet", "other")
	elsewhere := profile("elsewhere", "ocm", "elsewhere")
	elsewhere.SetNamespace("other")
	scheme := runtime.NewScheme()
	dc := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{Resource: "ClusterProfileList"},
		profile("west", "ocm", "west"), profile("east", "ocm", "east"), broken, other, elsewhere)
	profiles, bad, err := Read(t.Context(), dc, Selection{Namespace: "fleet", ClusterManager: "ocm"})
	if err != nil {
		t.Fatal(err)
	}
	if len(profiles) != 2 || profiles[0].Name != "east" || profiles[1].Name != "west" {
		t.Fatalf("profiles %+v", profiles)
	}
	if len(bad) != 1 || bad["broken"] == nil || !strings.Contains(bad["broken"].Error(), "ClusterProfile fleet/broken") {
		t.Errorf("bad %v", bad)
	}
	east := profiles[0]
	if id, err := east.ClusterID("set"); err != nil || id != "east" {
		t.Errorf("ClusterID %q, %v", id, err)
	}
	if c := east.ControlPlane(); c == nil || c.Status != metav1.ConditionFalse || c.Message != "lease not renewed" {
		t.Errorf("ControlPlane %+v", c)
	}
	if ap := east.Status.AccessProviders; len(ap) != 1 || string(ap[0].Cluster.CertificateAuthorityData) != "CA DATA" {
		t.Errorf("access providers %+v", ap)
	}
	if _, _, err := Read(t.Context(), dc, Selection{Namespace: "fleet", LabelSelector: "a in (b"}); err == nil {
		t.Error("a bad label selector was accepted")
	}
}

// TestClusterID: the ID is the profile's property; a missing one, one that
// is not a cluster ID, or a clusterset property naming another clusterset
// refuses the profile, saying so.
func TestClusterID(t *testing.T) {
	for _, tc := range []struct {
		name       string
		properties []Property
		errHas     string
	}{
		{"id", []Property{{ClusterIDProperty, "east"}}, ""},
		{"id and this clusterset", []Property{{ClusterIDProperty, "east"}, {ClustersetProperty, "set"}}, ""},
		{"no id", []Property{{"region", "eu"}}, "has no property cluster.clusterset.k8s.io"},
		{"not an ID", []Property{{ClusterIDProperty, "East_1"}}, "property cluster.clusterset.k8s.io"},
		{"another clusterset", []Property{{ClusterIDProperty, "east"}, {ClustersetProperty, "other"}}, `clusterset.k8s.io is "other", but this is clusterset "set"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "p"}, Status: ClusterProfileStatus{Properties: tc.properties}}
			id, err := p.ClusterID("set")
			switch {
			case tc.errHas == "" && (err != nil || id != "east"):
				t.Errorf("%q, %v", id, err)
			case tc.errHas != "" && (err == nil || !strings.Contains(err.Error(), tc.errHas) || !strings.Contains(err.Error(), "fleet/p")):
				t.Errorf("error %v, want one with %q naming the profile", err, tc.errHas)
			}
		})
	}
}

// TestProviderConfig: a provider config is read strictly; a relative
// plugin path is made absolute against the file's folder; a profile is
// reached through its first access provider (in the config's order) that
// the config names, the exec extension reaching the plugin as its
// cluster config; a profile with none the config names is refused,
// naming what it offers.
func TestProviderConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(content string) string {
		path := filepath.Join(dir, "providers.json")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for content, errHas := range map[string]string{
		`{"providers": []}`: "no providers",
		`{"providers": [{"name": "token", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1"}}]}`:                                                 "execConfig.command is missing",
		`{"providers": [{"name": "token", "execConfig": {"command": "x"}}]}`:                                                                                  "apiVersion is missing",
		`{"providers": [{"name": "token", "exec": {}}]}`:                                                                                                      "unknown field",
		`{"providers": [{"name": "a", "execConfig": {"command": "x", "apiVersion": "v"}}, {"name": "a", "execConfig": {"command": "y", "apiVersion": "v"}}]}`: "appears twice",
	} {
		if _, err := LoadProviderConfig(write(content)); err == nil || !strings.Contains(err.Error(), errHas) {
			t.Errorf("%s: %v, want %q", content, err, errHas)
		}
	}
	cfg, err := LoadProviderConfig(write(`{"providers": [
		{"name": "oidc", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "kubelogin"}},
		{"name": "token", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "./bin/token-plugin",
		 "args": ["--from-secret"], "provideClusterInfo": true, "env": [{"name": "HUB", "value": "h"}]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Providers[0].ExecConfig.Command; got != "kubelogin" {
		t.Errorf("a command without a separator is looked up in PATH: %q", got)
	}
	if got, want := cfg.Providers[1].ExecConfig.Command, filepath.Join(dir, "bin/token-plugin"); got != want {
		t.Errorf("command %q, want %q", got, want)
	}
	var p ClusterProfile
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(profile("east", "ocm", "east").Object, &p); err != nil {
		t.Fatal(err)
	}
	access, err := cfg.AccessOf(&p)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := access.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	if rc.Host != "https://east.example:6443" || string(rc.CAData) != "CA DATA" || rc.ExecProvider == nil ||
		!rc.ExecProvider.ProvideClusterInfo || rc.ExecProvider.InteractiveMode != api.NeverExecInteractiveMode || rc.ExecProvider.Args[0] != "--from-secret" {
		t.Fatalf("rest config %+v, exec %+v", rc, rc.ExecProvider)
	}
	if raw, ok := rc.ExecProvider.Config.(*runtime.Unknown); !ok || string(raw.Raw) != `{"secret":"fleet/east"}` {
		t.Errorf("the plugin's cluster config %#v", rc.ExecProvider.Config)
	}
	// The profile offers token first and oidc second; the config names
	// oidc first: oidc it is.
	both := p
	both.Status.AccessProviders = append(slices.Clone(p.Status.AccessProviders), AccessProvider{Name: "oidc"})
	both.Status.AccessProviders[1].Cluster.Server = "https://east-oidc.example:6443"
	if access, err := cfg.AccessOf(&both); err != nil || access.Provider != "oidc" || access.Cluster.Server != "https://east-oidc.example:6443" {
		t.Errorf("a profile offering token and oidc: %+v, %v; want oidc, the provider config's first", access, err)
	}
	p.Status.AccessProviders[0].Name = "kubeconfig"
	p.Status.CredentialProviders = []AccessProvider{{Name: "spiffe"}}
	if _, err := cfg.AccessOf(&p); err == nil || !strings.Contains(err.Error(), "none of its access providers [kubeconfig spiffe] is in the provider config") {
		t.Errorf("no provider in common: %v", err)
	}
}

// TestExecExtensions: a profile's exec/additional-args and
// exec/additional-envs extensions (cluster-inventory-api v0.1.2) reach
// the plugin only as its provider's policies allow, on a copy of the
// provider's exec config; a policy the API does not have is refused when
// the provider config is loaded, and an extension that does not parse
// leaves the profile out with why.
func TestExecExtensions(t *testing.T) {
	withExtensions := func(args, envs string) *ClusterProfile {
		u := profile("east", "ocm", "east")
		var p ClusterProfile
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err != nil {
			t.Fatal(err)
		}
		c := &p.Status.AccessProviders[0].Cluster
		c.Extensions = append(c.Extensions,
			clientcmdv1.NamedExtension{Name: AdditionalArgsExtension, Extension: runtime.RawExtension{Raw: []byte(args)}},
			clientcmdv1.NamedExtension{Name: AdditionalEnvsExtension, Extension: runtime.RawExtension{Raw: []byte(envs)}})
		return &p
	}
	provider := func(argsPolicy, envsPolicy string) *ProviderConfig {
		return &ProviderConfig{Providers: []Provider{{Name: "token",
			ExecConfig: &api.ExecConfig{APIVersion: "client.authentication.k8s.io/v1", Command: "plugin", Args: []string{"--own"},
				Env: []api.ExecEnvVar{{Name: "REGION", Value: "own"}, {Name: "TOKEN_DIR", Value: "/own"}}},
			ProfileSourcedCLIArgsPolicy: argsPolicy, ProfileSourcedEnvVarsPolicy: envsPolicy}}}
	}
	p := withExtensions(`["--cluster", "east"]`, `{"REGION": "eu-1", "TENANT": "a"}`)
	for _, c := range []struct {
		argsPolicy, envsPolicy string
		args, env              string
	}{
		{"", "", "[--own]", "[REGION=own TOKEN_DIR=/own]"},
		{PolicyIgnore, PolicyIgnore, "[--own]", "[REGION=own TOKEN_DIR=/own]"},
		{PolicyAppend, PolicyAppendIfNotExists, "[--own --cluster east]", "[REGION=own TOKEN_DIR=/own TENANT=a]"},
		{PolicyAppend, PolicyReplace, "[--own --cluster east]", "[TOKEN_DIR=/own REGION=eu-1 TENANT=a]"},
	} {
		cfg := provider(c.argsPolicy, c.envsPolicy)
		access, err := cfg.AccessOf(p)
		if err != nil {
			t.Fatal(err)
		}
		var env []string
		for _, e := range access.Exec.Env {
			env = append(env, e.Name+"="+e.Value)
		}
		if got := fmt.Sprint(access.Exec.Args); got != c.args {
			t.Errorf("policies %q/%q: args %s, want %s", c.argsPolicy, c.envsPolicy, got, c.args)
		}
		if got := fmt.Sprint(env); got != c.env {
			t.Errorf("policies %q/%q: env %s, want %s", c.argsPolicy, c.envsPolicy, got, c.env)
		}
		if own := cfg.Providers[0].ExecConfig; len(own.Args) != 1 || len(own.Env) != 2 {
			t.Errorf("the provider's own exec config changed: %+v", own)
		}
	}
	if _, err := provider(PolicyAppend, PolicyReplace).AccessOf(withExtensions(`{"not": "a list"}`, `{}`)); err == nil ||
		!strings.Contains(err.Error(), "ClusterProfile fleet/east: access provider \"token\": extension "+AdditionalArgsExtension+": want a list") {
		t.Errorf("args that are no list: %v", err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "providers.json")
	for policies, want := range map[string]string{
		`"profileSourcedCLIArgsPolicy": "Prepend"`:   `profileSourcedCLIArgsPolicy "Prepend": want Append or Ignore`,
		`"profileSourcedEnvVarsPolicy": "Overwrite"`: `profileSourcedEnvVarsPolicy "Overwrite": want AppendIfNotExists, Replace or Ignore`,
	} {
		content := `{"providers": [{"name": "token", "execConfig": {"apiVersion": "v", "command": "x"}, ` + policies + `}]}`
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadProviderConfig(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", policies, err, want)
		}
	}
}
