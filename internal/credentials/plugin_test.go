package credentials

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// script writes an executable shell script of body into dir and returns
// its path.
func script(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plugin")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// tokenPlugin prints an ExecCredential with token, and appends a line to
// runs at each run.
func tokenPlugin(t *testing.T, token, runs string) string {
	return script(t, fmt.Sprintf(`echo run >> %s
echo "$KUBERNETES_EXEC_INFO" > %s.info
cat <<'END'
{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":%q}}
END`, runs, runs, token))
}

// server is an API server stand-in that answers /version to requests
// bearing token, and 401 to others; seen counts the refused.
func server(t *testing.T, token *atomic.Value, refused *atomic.Int32, clientAuth tls.ClientAuthType) *httptest.Server {
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		want, _ := token.Load().(string)
		if want != "" && r.Header.Get("Authorization") != "Bearer "+want {
			refused.Add(1)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		if clientAuth != tls.NoClientCert && len(r.TLS.PeerCertificates) == 0 {
			http.Error(w, "no client certificate", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"36","gitVersion":"v1.36.3"}`))
	}))
	s.TLS = &tls.Config{ClientAuth: clientAuth}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// configOf is a client config of s whose credentials come from plugin.
func configOf(s *httptest.Server, plugin string, clusterInfo bool) *rest.Config {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	return &rest.Config{Host: s.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		ExecProvider: &clientcmdapi.ExecConfig{Command: plugin, APIVersion: "client.authentication.k8s.io/v1",
			ProvideClusterInfo: clusterInfo, InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}
}

func serverVersion(ctx context.Context, t *testing.T, rc *rest.Config) error {
	t.Helper()
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.Discovery().RESTClient().Get().AbsPath("/version").DoRaw(ctx)
	return err
}

func lines(t *testing.T, path string) int {
	raw, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Count(string(raw), "\n")
}

// TestTokenFromThePlugin: a request carries the plugin's token, the
// plugin is run once for many requests, a 401 has it run again, and the
// cluster is passed to it when the config asks.
func TestTokenFromThePlugin(t *testing.T) {
	var token atomic.Value
	token.Store("one")
	var refused atomic.Int32
	s := server(t, &token, &refused, tls.NoClientCert)
	runs := filepath.Join(t.TempDir(), "runs")
	plugin := tokenPlugin(t, "one", runs)
	rc, err := (&Plugins{}).Configure(configOf(s, plugin, true))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := serverVersion(t.Context(), t, rc); err != nil {
			t.Fatal(err)
		}
	}
	if n := lines(t, runs); n != 1 {
		t.Errorf("the plugin ran %d times for three requests, want once", n)
	}
	info, err := os.ReadFile(runs + ".info")
	if err != nil {
		t.Fatal(err)
	}
	var ec struct {
		APIVersion string `json:"apiVersion"`
		Spec       struct {
			Interactive bool `json:"interactive"`
			Cluster     *struct {
				Server string `json:"server"`
			} `json:"cluster"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(info, &ec); err != nil || ec.APIVersion != "client.authentication.k8s.io/v1" || ec.Spec.Interactive ||
		ec.Spec.Cluster == nil || ec.Spec.Cluster.Server != s.URL {
		t.Errorf("KUBERNETES_EXEC_INFO %s (%v), want the v1 spec, not interactive, the cluster at %s", info, err, s.URL)
	}

	// The server now wants another token: the first request is refused,
	// and the plugin (now giving the new one) runs again.
	token.Store("two")
	if err := os.WriteFile(plugin, []byte("#!/bin/sh\necho run >> "+runs+"\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"two\"}}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := serverVersion(t.Context(), t, rc); err == nil {
		t.Error("a request with the refused token went through")
	}
	if err := serverVersion(t.Context(), t, rc); err != nil {
		t.Errorf("after a 401, the plugin's new token: %v", err)
	}
	if n := lines(t, runs); n != 2 || refused.Load() != 1 {
		t.Errorf("%d runs, %d refused, want 2 runs and 1 refused", n, refused.Load())
	}
}

// TestHungPluginIsStopped: a plugin that never returns holds no request
// past its context, is stopped at its timeout (its process killed), and
// the error says so; the next request runs it again.
func TestHungPluginIsStopped(t *testing.T) {
	var token atomic.Value
	var refused atomic.Int32
	s := server(t, &token, &refused, tls.NoClientCert)
	pidFile := filepath.Join(t.TempDir(), "pid")
	plugin := script(t, "echo working >&2\necho $$ > "+pidFile+"\nexec sleep 600")
	rc, err := (&Plugins{Timeout: 2 * time.Second}).Configure(configOf(s, plugin, false))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = serverVersion(ctx, t, rc)
	if err == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("a request with a 300 ms context over a hung plugin: %v after %s", err, time.Since(start))
	}
	// A request that waits: the run ends at the timeout.
	err = serverVersion(t.Context(), t, rc)
	var pe *Error
	if !errors.As(err, &pe) || !strings.Contains(pe.Cause, "did not return within 2s") || pe.Stderr != "working" {
		t.Fatalf("the run past its timeout: %v", err)
	}
	raw, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the plugin (pid %d) still runs after its timeout", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFailedPluginSaysWhy: a plugin that fails gives an error with its
// exit status and the end of its stderr; one that writes no
// ExecCredential, an error that says so.
func TestFailedPluginSaysWhy(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{"echo 'reading profile prod' >&2\necho 'error: no such profile' >&2\nexit 3", `exited with status 3: reading profile prod | error: no such profile`},
		{"echo '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"x\"}}'", "want ExecCredential of client.authentication.k8s.io/v1"},
		{"echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{}}'", "neither a token nor a certificate"},
		{"echo not json", "no ExecCredential"},
	} {
		p, err := NewPlugin(clientcmdapi.ExecConfig{Command: script(t, c.body), APIVersion: "client.authentication.k8s.io/v1"}, nil, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.get(t.Context())
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "credential plugin ") {
			t.Errorf("%q: %v, want %q", c.body, err, c.want)
		}
	}
	p, _ := NewPlugin(clientcmdapi.ExecConfig{Command: "/nonexistent/plugin", APIVersion: "client.authentication.k8s.io/v1"}, nil, time.Second)
	if _, err := p.get(t.Context()); err == nil || !strings.Contains(err.Error(), "/nonexistent/plugin") {
		t.Errorf("a plugin that is not there: %v", err)
	}
}

// TestClientCertificateFromThePlugin: a plugin that gives a certificate
// and key authenticates the TLS handshake with them.
func TestClientCertificateFromThePlugin(t *testing.T) {
	var token atomic.Value
	var refused atomic.Int32
	s := server(t, &token, &refused, tls.RequireAnyClientCert)
	certPEM, keyPEM := selfSigned(t)
	plugin := script(t, fmt.Sprintf(`cat <<'END'
{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientCertificateData":%q,"clientKeyData":%q}}
END`, certPEM, keyPEM))
	rc, err := (&Plugins{}).Configure(configOf(s, plugin, false))
	if err != nil {
		t.Fatal(err)
	}
	if err := serverVersion(t.Context(), t, rc); err != nil {
		t.Fatal(err)
	}
	without := configOf(s, script(t, `echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"x"}}'`), false)
	rc, err = (&Plugins{}).Configure(without)
	if err != nil {
		t.Fatal(err)
	}
	if err := serverVersion(t.Context(), t, rc); err == nil {
		t.Error("a handshake without a client certificate went through: the test proves nothing")
	}
}

func selfSigned(t *testing.T) (certPEM, keyPEM string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "member"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
}

// TestWithoutAPluginNothingChanges: a config without a plugin is returned
// as it is.
func TestWithoutAPluginNothingChanges(t *testing.T) {
	rc := &rest.Config{Host: "https://example.invalid", BearerToken: "t"}
	if got, err := (&Plugins{}).Configure(rc); err != nil || got != rc {
		t.Errorf("Configure: %p, %v; want the same config", got, err)
	}
}

// TestExpiryIsThePluginsExpirationTimestamp: Expiry runs the plugin and
// returns the expirationTimestamp of its ExecCredential, zero without
// one, and names the plugin when it fails.
func TestExpiryIsThePluginsExpirationTimestamp(t *testing.T) {
	rc := func(plugin string) *rest.Config {
		return &rest.Config{Host: "https://127.0.0.1:1", ExecProvider: &clientcmdapi.ExecConfig{Command: plugin,
			APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}
	}
	want := time.Now().Add(72 * time.Hour).UTC().Truncate(time.Second)
	expiring := script(t, `echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t","expirationTimestamp":"`+want.Format(time.RFC3339)+`"}}'`)
	got, err := (&Plugins{}).Expiry(t.Context(), rc(expiring))
	if err != nil || !got.Equal(want) {
		t.Errorf("Expiry %v (%v), want %v", got, err, want)
	}
	lasting := tokenPlugin(t, "t", filepath.Join(t.TempDir(), "runs"))
	if got, err := (&Plugins{}).Expiry(t.Context(), rc(lasting)); err != nil || !got.IsZero() {
		t.Errorf("Expiry of a credential without expirationTimestamp: %v (%v), want zero", got, err)
	}
	failing := script(t, "echo no >&2; exit 3")
	if _, err := (&Plugins{}).Expiry(t.Context(), rc(failing)); err == nil || !strings.Contains(err.Error(), failing) {
		t.Errorf("Expiry of a failing plugin: %v, want an error naming it", err)
	}
	if _, err := (&Plugins{}).Expiry(t.Context(), &rest.Config{Host: "https://127.0.0.1:1"}); err == nil {
		t.Error("Expiry of a config without a plugin: no error")
	}
}
