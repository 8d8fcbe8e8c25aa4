package credentials

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// DefaultTimeout bounds one run of a credential plugin unless set
// otherwise (--credential-plugin-timeout): cloud plugins that fetch a
// token take a few seconds; one that has not answered in 30 will not.
const DefaultTimeout = 30 * time.Second

// Error is a plugin run that gave no credentials: it did not return in
// time, could not be started, failed, or wrote what is not an
// ExecCredential. Its message names the plugin and ends with the end of
// what the plugin wrote to stderr, if anything.
type Error struct {
	Command string
	// Cause says what went wrong, the exit status or the timeout included.
	Cause string
	// Stderr is the end of the plugin's stderr, trimmed.
	Stderr string
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("credential plugin %s: %s", e.Command, e.Cause)
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

// credential is what one run gave.
type credential struct {
	token   string
	cert    *tls.Certificate
	expires time.Time // zero: until a 401
}

func (c *credential) expired(now time.Time) bool {
	return !c.expires.IsZero() && !now.Before(c.expires)
}

// run is one run of the plugin; done is closed when it has ended, and
// then cred or err is set.
type run struct {
	done chan struct{}
	cred *credential
	err  error
}

// Plugin gets credentials from one exec plugin, as a client config names
// it (its command, arguments, environment and API version) for one
// cluster.
type Plugin struct {
	config clientcmdapi.ExecConfig
	// execInfo is the KUBERNETES_EXEC_INFO the plugin is given.
	execInfo []byte
	timeout  time.Duration

	mu      sync.Mutex
	cred    *credential // the last good one, until it expires or is refused
	running *run        // the run under way, if any
}

// NewPlugin returns the Plugin of config; cluster, given when the config
// asks for it (provideClusterInfo), is passed to the plugin. A timeout of
// 0 is DefaultTimeout.
func NewPlugin(config clientcmdapi.ExecConfig, cluster *clientauthv1.Cluster, timeout time.Duration) (*Plugin, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	info := clientauthv1.ExecCredential{Spec: clientauthv1.ExecCredentialSpec{Interactive: false}}
	info.APIVersion, info.Kind = config.APIVersion, "ExecCredential"
	if config.ProvideClusterInfo {
		info.Spec.Cluster = cluster
	}
	raw, err := json.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("credential plugin %s: %w", config.Command, err)
	}
	return &Plugin{config: config, execInfo: raw, timeout: timeout}, nil
}

// get returns the credential held, or the one a run gives (a run under way
// is joined, not started again). It waits no longer than ctx allows; the
// run goes on for its own timeout, for the next request.
func (p *Plugin) get(ctx context.Context) (*credential, error) {
	p.mu.Lock()
	if p.cred != nil && !p.cred.expired(time.Now()) {
		c := p.cred
		p.mu.Unlock()
		return c, nil
	}
	r := p.running
	if r == nil {
		r = &run{done: make(chan struct{})}
		p.running = r
		go p.run(r)
	}
	p.mu.Unlock()
	select {
	case <-r.done:
		return r.cred, r.err
	case <-ctx.Done():
		return nil, &Error{Command: p.config.Command, Cause: fmt.Sprintf("no credentials yet, the plugin still running (%v)", ctx.Err())}
	}
}

// refused forgets c, which a server refused (401): the next request runs
// the plugin again.
func (p *Plugin) refused(c *credential) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cred == c {
		p.cred = nil
	}
}

// run runs the plugin once, within the timeout, and ends r.
func (p *Plugin) run(r *run) {
	r.cred, r.err = p.exec()
	p.mu.Lock()
	if r.err == nil {
		p.cred = r.cred
	}
	p.running = nil
	p.mu.Unlock()
	close(r.done)
}

// exec runs the plugin and reads its ExecCredential.
func (p *Plugin) exec() (*credential, error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.config.Command, p.config.Args...)
	cmd.Env = os.Environ()
	for _, e := range p.config.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	cmd.Env = append(cmd.Env, "KUBERNETES_EXEC_INFO="+string(p.execInfo))
	var stdout bytes.Buffer
	stderr := &tail{max: 4096}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	ownProcessGroup(cmd)
	// Children of the plugin that keep its stdout open are not waited for.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	fail := func(cause string) error {
		return &Error{Command: p.config.Command, Cause: cause, Stderr: stderr.trimmed()}
	}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return nil, fail(fmt.Sprintf("did not return within %s, stopped (--credential-plugin-timeout)", p.timeout))
	case errors.As(err, &exit):
		return nil, fail(fmt.Sprintf("exited with status %d", exit.ExitCode()))
	case err != nil:
		return nil, fail(err.Error())
	}
	c, err := p.decode(stdout.Bytes())
	if err != nil {
		return nil, fail(err.Error())
	}
	return c, nil
}

// decode reads the ExecCredential the plugin wrote, as client-go checks
// it.
func (p *Plugin) decode(out []byte) (*credential, error) {
	var ec clientauthv1.ExecCredential
	if err := json.Unmarshal(out, &ec); err != nil {
		return nil, fmt.Errorf("its output is no ExecCredential: %v", err)
	}
	if ec.APIVersion != p.config.APIVersion || ec.Kind != "ExecCredential" {
		return nil, fmt.Errorf("it wrote %s %s, want ExecCredential of %s", ec.APIVersion, ec.Kind, p.config.APIVersion)
	}
	s := ec.Status
	switch {
	case s == nil:
		return nil, errors.New("its ExecCredential has no status")
	case s.Token == "" && s.ClientCertificateData == "" && s.ClientKeyData == "":
		return nil, errors.New("its ExecCredential has neither a token nor a certificate and key")
	case (s.ClientCertificateData == "") != (s.ClientKeyData == ""):
		return nil, errors.New("its ExecCredential has a certificate or a key, not both")
	}
	c := &credential{token: s.Token}
	if s.ExpirationTimestamp != nil {
		c.expires = s.ExpirationTimestamp.Time
	}
	if s.ClientCertificateData != "" {
		cert, err := tls.X509KeyPair([]byte(s.ClientCertificateData), []byte(s.ClientKeyData))
		if err != nil {
			return nil, fmt.Errorf("its certificate and key: %v", err)
		}
		c.cert = &cert
	}
	return c, nil
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = t.b[over:]
	}
	return len(p), nil
}

// maxStderr is the most of a plugin's stderr an error carries: its last
// lines, which say why it failed.
const maxStderr = 300

// trimmed is the end of what was written, at most maxStderr bytes, its
// lines joined by " | ".
func (t *tail) trimmed() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.b))
	if len(s) > maxStderr {
		s = "…" + strings.ToValidUTF8(s[len(s)-maxStderr:], "")
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " | ")), " ")
}
