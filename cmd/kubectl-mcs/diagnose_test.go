package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/mcs-syncer/mcs-syncer/internal/diagnose"
)

// TestCredentialsOfReadsWhatTheConfigNames: the credentials check gets the
// client certificate and token a client config holds inline or names by
// file, and the config's exec plugin, run only when the check asks; a
// file that cannot be read is an error naming what it is.
func TestCredentialsOfReadsWhatTheConfigNames(t *testing.T) {
	dir := t.TempDir()
	cert, token := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "token")
	if err := os.WriteFile(cert, []byte("PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(token, []byte("a.b.c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cr, err := credentialsOf(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CertFile: cert}, BearerTokenFile: token}, time.Second)
	if err != nil || string(cr.Certificate) != "PEM" || cr.Token != "a.b.c" || cr.Plugin != nil {
		t.Errorf("from files: %+v, %v", cr, err)
	}
	cr, err = credentialsOf(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CertData: []byte("inline")}, BearerToken: "t"}, time.Second)
	if err != nil || string(cr.Certificate) != "inline" || cr.Token != "t" {
		t.Errorf("inline: %+v, %v", cr, err)
	}
	if _, err := credentialsOf(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CertFile: filepath.Join(dir, "gone.crt")}}, time.Second); err == nil || !strings.Contains(err.Error(), "client certificate") {
		t.Errorf("a certificate file that is gone: %v", err)
	}
	plugin := filepath.Join(dir, "plugin")
	if err := os.WriteFile(plugin, []byte("#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t\",\"expirationTimestamp\":\"2030-01-02T03:04:05Z\"}}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cr, err = credentialsOf(&rest.Config{Host: "https://127.0.0.1:1", ExecProvider: &clientcmdapi.ExecConfig{Command: plugin, APIVersion: "client.authentication.k8s.io/v1",
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}, 10*time.Second)
	if err != nil || cr.Plugin == nil {
		t.Fatalf("with a plugin: %+v, %v", cr, err)
	}
	if at, err := cr.Plugin(context.Background()); err != nil || !at.Equal(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Errorf("the plugin's expiry: %v, %v", at, err)
	}
}

// TestLeftOutProfilesAreSaid: each ClusterProfile the inventory left out
// is a warning of diagnose (it does not fail it), with why and what to
// do, and a line on stderr of status and gather.
func TestLeftOutProfilesAreSaid(t *testing.T) {
	leftOut := []string{"ClusterProfile fleet/east: has no property cluster.clusterset.k8s.io", "ClusterProfile fleet/west: none of its access providers [oidc] is in the provider config"}
	checks := leftOutChecks(leftOut)
	if len(checks) != 2 || diagnose.Failed(checks) {
		t.Fatalf("%+v", checks)
	}
	for i, c := range checks {
		if c.Result != diagnose.Warn || !strings.Contains(c.Detail, leftOut[i]) || c.Fix == "" {
			t.Errorf("check %d: %+v", i, c)
		}
	}
	var stderr strings.Builder
	sayLeftOut(&stderr, "status", leftOut)
	if want := "kubectl mcs status: inventory: left out ClusterProfile fleet/east: has no property cluster.clusterset.k8s.io\n" +
		"kubectl mcs status: inventory: left out ClusterProfile fleet/west: none of its access providers [oidc] is in the provider config\n"; stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
}
