package syncer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mcs-syncer/mcs-syncer/internal/membership"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
)

// Process is an mcs-syncer running as a real process.
type Process struct {
	// MetricsAddr and ProbeAddr are the host:port of its /metrics and of
	// its /healthz and /readyz.
	MetricsAddr, ProbeAddr string
	// LogPath holds what it printed.
	LogPath string

	cmd *exec.Cmd
	// done is closed when the process has exited, with exitErr.
	done    chan struct{}
	exitErr error
	// killed is set by Kill: the exit that follows is no failure.
	killed bool
}

// Build builds mcs-syncer from the repository into out.
func Build(ctx context.Context, out string) error {
	root, err := host.RepoRoot()
	if err != nil {
		return err
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/mcs-syncer")
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build mcs-syncer: %w\n%s", err, b)
	}
	return nil
}

// Start runs the mcs-syncer binary bin with args, on free metrics
// and probe ports of the loopback, its output in logPath, and returns once
// /readyz answers. The process is killed with the calling process
// (Pdeathsig) if that dies first.
func Start(ctx context.Context, bin, logPath string, args ...string) (*Process, error) {
	var addrs [2]string
	for i := range addrs {
		// Two distinct ports: FreePort may hand out the same free port
		// twice, and the process then failed at start with "health
		// probes: listen tcp …: bind: address already in use".
		for addrs[i] == "" || (i > 0 && addrs[i] == addrs[0]) {
			port, err := host.FreePort(false)
			if err != nil {
				return nil, fmt.Errorf("mcs-syncer: %w", err)
			}
			addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		}
	}
	metricsAddr, probeAddr := addrs[0], addrs[1]
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
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
	s := &Process{MetricsAddr: metricsAddr, ProbeAddr: probeAddr, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig comes when the OS thread that started the process
		// ends, not the calling process: this goroutine keeps its thread
		// (which the runtime never ends while it is locked and alive)
		// until the process exits.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := cmd.Start()
		started <- err
		if err != nil {
			logFile.Close()
			return
		}
		s.exitErr = cmd.Wait()
		logFile.Close()
		close(s.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	if err := s.waitReady(ctx, readyStall); err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("mcs-syncer not ready: %w", err)
	}
	return s, nil
}

// readyStall is how long Start waits for /readyz while the process makes
// no progress: a process that engages 1,000 members on a loaded machine
// takes minutes, and is not stuck while members keep coming in or it
// keeps working through what it lists (100,000 publications of a hub).
const readyStall = 2 * time.Minute

// busy is the CPU time the process must have used since the last progress
// to count as working; readyLimit bounds the wait all the same (a process
// that spins without ever getting ready is a finding, not slowness).
const (
	busy       = 500 * time.Millisecond
	readyLimit = 15 * time.Minute
)

// waitReady waits until /readyz answers 200, for as long as the process
// makes progress: more of the checks of /readyz pass (its "[+]" lines), or
// it used CPU time. It gives up after stall without either, naming what
// /readyz said last.
func (s *Process) waitReady(ctx context.Context, stall time.Duration) error {
	began := time.Now()
	best, improved, last := -1, began, ""
	var worked time.Duration
	for {
		select {
		case <-s.done:
			return fmt.Errorf("mcs-syncer exited: %v; log: %s", s.exitErr, s.LogPath)
		default:
		}
		if body, ready, err := s.readyz(ctx); err == nil {
			if ready {
				return nil
			}
			last = body
			if passing := strings.Count(body, "[+]"); passing > best {
				best, improved = passing, time.Now()
			}
		}
		if s.cmd != nil && s.cmd.Process != nil {
			if cpu, err := host.CPUTime(s.cmd.Process.Pid); err == nil && cpu-worked >= busy {
				worked, improved = cpu, time.Now()
			}
		}
		if time.Since(improved) > stall {
			return fmt.Errorf("no more of /readyz's checks passed, and the process did not work, for %s; it said: %s", stall, firstLines(last, 10))
		}
		if time.Since(began) > readyLimit {
			return fmt.Errorf("not ready after %s; /readyz said: %s", readyLimit, firstLines(last, 10))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// readyz returns /readyz?verbose's body and whether it says ready.
func (s *Process) readyz(ctx context.Context) (body string, ready bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.ProbeAddr+"/readyz?verbose", nil)
	if err != nil {
		return "", false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", false, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return string(raw), resp.StatusCode == http.StatusOK, err
}

// firstLines returns the first n lines of text, and how many more there
// were.
func firstLines(text string, n int) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) <= n {
		return strings.Join(lines, "; ")
	}
	return fmt.Sprintf("%s; … %d more lines", strings.Join(lines[:n], "; "), len(lines)-n)
}

// Exited returns the process's exit, or nil while it runs.
func (s *Process) Exited() error {
	select {
	case <-s.done:
		if s.exitErr == nil {
			return errors.New("mcs-syncer exited with status 0")
		}
		return fmt.Errorf("mcs-syncer exited: %w", s.exitErr)
	default:
		return nil
	}
}

// Kill kills the process with SIGKILL (a crash) and waits for it.
func (s *Process) Kill() {
	s.killed = true
	_ = s.cmd.Process.Kill()
	<-s.done
}

// Readyz returns the status code and body of /readyz?verbose.
func (s *Process) Readyz(ctx context.Context) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.ProbeAddr+"/readyz?verbose", nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// Members returns its /members view (what kubectl mcs status reads).
func (s *Process) Members(ctx context.Context) (membership.View, error) {
	var view membership.View
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.ProbeAddr+"/members", nil)
	if err != nil {
		return view, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return view, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&view); err != nil {
		return view, fmt.Errorf("/members: %w", err)
	}
	return view, nil
}

// Pid is the process ID.
func (s *Process) Pid() int { return s.cmd.Process.Pid }

// Stop stops the process with SIGTERM (a graceful shutdown) and waits for
// it; an exit other than 0, or none within a minute, is an error. Stopping
// a stopped process again reports how it ended.
func (s *Process) Stop() error {
	select {
	case <-s.done:
	default:
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-s.done:
		if s.exitErr != nil && !s.killed {
			return fmt.Errorf("mcs-syncer did not shut down cleanly on SIGTERM: %v; log: %s", s.exitErr, s.LogPath)
		}
		return nil
	case <-time.After(time.Minute):
		_ = s.cmd.Process.Kill()
		return fmt.Errorf("mcs-syncer did not stop within a minute of SIGTERM; log: %s", s.LogPath)
	}
}

// Metrics returns the text of its /metrics.
func (s *Process) Metrics(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.MetricsAddr+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}
