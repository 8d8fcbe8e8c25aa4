package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/mcs-syncer/mcs-syncer/test/testbed"
)

// syncer is the running mcs-syncer.
var syncer *syncerProcess

// syncerProcess is a running mcs-syncer.
type syncerProcess struct {
	// metricsAddr is the host:port of its /metrics.
	metricsAddr string
	stateDir    string
	logPath     string
	stop        func() error
}

// restart stops the syncer gracefully and starts a new one.
func (p *syncerProcess) restart(ctx context.Context) error {
	if err := p.stop(); err != nil {
		return err
	}
	next, err := startSyncer(ctx, p.stateDir)
	if err != nil {
		return err
	}
	*p = *next
	return nil
}

// metric returns the value of the sample of the running syncer's /metrics
// whose name and labels (as written in the exposition format, e.g.
// `controller_runtime_reconcile_total{controller="import-north",result="success"}`)
// are given, or 0 when there is none.
func (p *syncerProcess) metric(ctx context.Context, sample string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.metricsAddr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, sample+" "); ok {
			var v float64
			_, err := fmt.Sscan(rest, &v)
			return v, err
		}
	}
	return 0, nil
}

// startSyncer builds mcs-syncer and runs it as a real process in central
// mode against the testbed, with a short unreachable grace so fault tests
// stay short. It returns once /readyz answers, and a function that stops it
// with SIGTERM (a graceful shutdown) and waits for it. The process is
// killed with the test binary (Pdeathsig) if that dies first.
func startSyncer(ctx context.Context, stateDir string) (*syncerProcess, error) {
	return startSyncerWith(ctx, stateDir, "--clusterset-config", bed.ConfigPath, "--cluster-unreachable-grace", "20s")
}

// startSyncerWith builds mcs-syncer (once per state folder) and runs it
// with args (plus free metrics and probe ports), returning once /readyz
// answers.
func startSyncerWith(ctx context.Context, stateDir string, args ...string) (*syncerProcess, error) {
	root, err := testbed.RepoRoot()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(stateDir, "mcs-syncer-bin")
	if _, err := os.Stat(bin); err != nil {
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/mcs-syncer")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build mcs-syncer: %w\n%s", err, out)
		}
	}
	metricsAddr, probeAddr, err := freeAddr(), freeAddr(), nil
	if metricsAddr == "" || probeAddr == "" {
		return nil, errors.New("no free port")
	}
	// The log outlives the testbed's state folder, for a failure's post-mortem.
	logDir, err := os.MkdirTemp("", "mcs-e2e-syncer-")
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(logDir, "mcs-syncer.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append([]string{
		"--metrics-bind-address", metricsAddr,
		"--health-probe-bind-address", probeAddr,
		"--zap-log-level", "info"}, args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); logFile.Close() }()
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		select {
		case err := <-exited:
			return false, fmt.Errorf("mcs-syncer exited: %v; log: %s", err, logPath)
		default:
		}
		resp, err := http.Get("http://" + probeAddr + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("mcs-syncer not ready: %w", err)
	}
	return &syncerProcess{metricsAddr: metricsAddr, stateDir: stateDir, logPath: logPath, stop: func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				return fmt.Errorf("mcs-syncer did not shut down cleanly on SIGTERM: %v; log: %s", err, logPath)
			}
			return nil
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			return fmt.Errorf("mcs-syncer did not stop within a minute of SIGTERM; log: %s", logPath)
		}
	}}, nil
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return ""
	}
	defer l.Close()
	return l.Addr().String()
}
