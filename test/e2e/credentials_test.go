package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestHungCredentialPlugin (issue 55): west reached through a kubeconfig
// whose exec credential plugin never returns. West is failed within the
// plugin's timeout, its cause saying so; /readyz answers 200 (a member
// that cannot be engaged does not fail it); east's export still reaches
// north; and mcs-syncer stops within 15 s of SIGTERM, the plugin still
// running.
func TestHungCredentialPlugin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	exclusive(t)
	const ns = "hung-plugin"
	bed.Namespace(ctx, t, ns)
	dir := t.TempDir()
	plugin := filepath.Join(dir, "hang")
	if err := os.WriteFile(plugin, []byte("#!/bin/sh\necho 'asking the identity provider' >&2\nexec sleep 3600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	west := bed.Cluster("west").RESTConfig()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: west.Host, CertificateAuthorityData: west.CAData, CertificateAuthority: west.CAFile, InsecureSkipTLSVerify: west.Insecure}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: plugin, APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}
	kc.Contexts["ctx"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "ctx"
	if err := clientcmd.WriteToFile(*kc, filepath.Join(dir, "west.kubeconfig")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s := ownSyncer(ctx, t, configWithWestOf(t, dir), "--credential-plugin-timeout", "3s")
	eventually(ctx, t, "west failed for its plugin, the others engaged, /readyz 200", readyzSays(ctx, s,
		"[+]member west ok: failed since", "credential plugin "+plugin+": did not return within 3s", "asking the identity provider",
		"[+]member east ok: engaged", "[+]member north ok: engaged"))
	t.Logf("west failed for its hung plugin %s after mcs-syncer's start (plugin timeout 3s)", time.Since(start).Round(100*time.Millisecond))
	east, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "north")
	if err := manualExport(ctx, east, ns, "db", "10.101.3.3"); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "north to import east's export beside the failed west", importedEndpoints(ctx, north, ns, "db", "east", 1))
	stopping := time.Now()
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(stopping); took > 15*time.Second {
		t.Errorf("mcs-syncer took %s to stop on SIGTERM with west's plugin hung", took)
	}
}

// configWithWestOf writes into dir a clusterset config of the testbed's
// members whose west is reached through dir/west.kubeconfig (written by the
// caller), east and north as the testbed's own, and returns its path.
func configWithWestOf(t *testing.T, dir string) string {
	t.Helper()
	raw := fmt.Sprintf(configHeader+"clusterset: testbed\nmembers:\n- id: east\n  kubeconfig: %s\n  context: %s\n- id: west\n  kubeconfig: west.kubeconfig\n- id: north\n  kubeconfig: %s\n  context: %s\n",
		bed.Cluster("east").KubeconfigPath, bed.Cluster("east").Context, bed.Cluster("north").KubeconfigPath, bed.Cluster("north").Context)
	path := filepath.Join(dir, "clusterset.yaml")
	if err := os.WriteFile(path, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
