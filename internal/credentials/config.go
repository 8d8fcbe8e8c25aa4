package credentials

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// Plugins hands out the Plugin of each distinct plugin configuration (its
// exec config and cluster), so that a member connected again keeps its
// credentials and a run under way, rather than starting another.
type Plugins struct {
	// Timeout bounds each run (0: DefaultTimeout).
	Timeout time.Duration

	mu sync.Mutex
	m  map[string]*Plugin
}

// Configure returns rc with its exec plugin, if it has one, replaced by a
// Plugin (see the package doc); rc itself is not changed. A config
// without a plugin is returned as it is. A nil Plugins runs the plugin
// with DefaultTimeout and keeps nothing between calls.
func (ps *Plugins) Configure(rc *rest.Config) (*rest.Config, error) {
	if rc.ExecProvider == nil {
		return rc, nil
	}
	if ps == nil {
		ps = &Plugins{}
	}
	p, err := ps.pluginOf(rc)
	if err != nil {
		return nil, err
	}
	out := rest.CopyConfig(rc)
	out.ExecProvider = nil
	tlsConfig, err := rest.TLSConfigFor(out)
	if err != nil {
		return nil, err
	}
	if tlsConfig == nil {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	static := tlsConfig.Certificates
	tlsConfig.GetClientCertificate = func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
		c, err := p.get(cri.Context())
		switch {
		case err != nil:
			return nil, err
		case c.cert != nil:
			return c.cert, nil
		case len(static) > 0:
			return &static[0], nil
		}
		return &tls.Certificate{}, nil // none: the token authenticates
	}
	proxy := out.Proxy
	if proxy == nil {
		proxy = http.ProxyFromEnvironment
	}
	// As client-go's own transport, with the TLS config above: a
	// rest.Config has no other way to give a client certificate per
	// handshake.
	out.Transport = utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               proxy,
		TLSClientConfig:     tlsConfig,
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 25,
		DisableCompression:  out.DisableCompression,
	})
	out.TLSClientConfig, out.Proxy = rest.TLSClientConfig{}, nil
	out.WrapTransport = transport.Wrappers(func(rt http.RoundTripper) http.RoundTripper {
		return &withToken{plugin: p, next: rt}
	}, rc.WrapTransport)
	return out, nil
}

// pluginOf returns the Plugin of rc's exec config and cluster, made once.
func (ps *Plugins) pluginOf(rc *rest.Config) (*Plugin, error) {
	cluster, err := execCluster(rc)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(struct {
		Exec    any
		Cluster *clientauthv1.Cluster
	}{rc.ExecProvider, cluster})
	if err != nil {
		return nil, fmt.Errorf("credential plugin %s: %w", rc.ExecProvider.Command, err)
	}
	key := string(raw)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p := ps.m[key]; p != nil {
		return p, nil
	}
	p, err := NewPlugin(*rc.ExecProvider, cluster, ps.Timeout)
	if err != nil {
		return nil, err
	}
	if ps.m == nil {
		ps.m = map[string]*Plugin{}
	}
	ps.m[key] = p
	return p, nil
}

// execCluster is the cluster a plugin is told of (provideClusterInfo), as
// client-go tells it.
func execCluster(rc *rest.Config) (*clientauthv1.Cluster, error) {
	c, err := rest.ConfigToExecCluster(rc)
	if err != nil {
		return nil, err
	}
	out := &clientauthv1.Cluster{
		Server: c.Server, TLSServerName: c.TLSServerName, InsecureSkipTLSVerify: c.InsecureSkipTLSVerify,
		CertificateAuthorityData: c.CertificateAuthorityData, ProxyURL: c.ProxyURL, DisableCompression: c.DisableCompression,
	}
	if c.Config != nil {
		raw, err := json.Marshal(c.Config)
		if err != nil {
			return nil, fmt.Errorf("the exec extension of %s: %w", rc.Host, err)
		}
		out.Config.Raw = raw
	}
	return out, nil
}

// withToken gives each request the plugin's bearer token (unless it has
// an Authorization of its own), and forgets a credential the server
// refuses.
type withToken struct {
	plugin *Plugin
	next   http.RoundTripper
}

func (w *withToken) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Authorization") != "" {
		return w.next.RoundTrip(req)
	}
	c, err := w.plugin.get(req.Context())
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req = utilnet.CloneRequest(req)
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := w.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		w.plugin.refused(c)
	}
	return resp, err
}

// WrappedRoundTripper is what a wrapping round tripper wraps (client-go's
// debugging and CancelRequest look through it).
func (w *withToken) WrappedRoundTripper() http.RoundTripper { return w.next }

// Expiry returns when the credential of rc's exec plugin expires: the
// expirationTimestamp of the ExecCredential it writes, zero when it writes
// none. It runs the plugin (within the Plugins' timeout) unless a
// credential that has not expired is held. For kubectl mcs diagnose.
func (ps *Plugins) Expiry(ctx context.Context, rc *rest.Config) (time.Time, error) {
	if rc.ExecProvider == nil {
		return time.Time{}, fmt.Errorf("the client config has no exec plugin")
	}
	if ps == nil {
		ps = &Plugins{}
	}
	p, err := ps.pluginOf(rc)
	if err != nil {
		return time.Time{}, err
	}
	c, err := p.get(ctx)
	if err != nil {
		return time.Time{}, err
	}
	return c.expires, nil
}
