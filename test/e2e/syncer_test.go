package e2e

import (
	"context"
	"os"
	"path/filepath"
	"sync"

	syncerproc "github.com/mcs-syncer/mcs-syncer/test/testbed/syncer"
)

// syncer is the running mcs-syncer.
var syncer *syncerProcess

// syncerProcess is a running mcs-syncer.
type syncerProcess struct {
	*syncerproc.Process
	stateDir string
	logPath  string
}

// syncerLogs is the folder of every mcs-syncer log of this run: it
// outlives the testbed's state folder, and run removes it unless a test
// failed (one folder per process made 1,458 folders in /tmp in a week).
var syncerLogs = sync.OnceValues(func() (string, error) { return os.MkdirTemp("", "mcs-e2e-syncer-") })

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

func (p *syncerProcess) stop() error { return p.Stop() }

func (p *syncerProcess) metric(ctx context.Context, sample string) (float64, error) {
	return p.Metric(ctx, sample)
}

// startSyncer builds mcs-syncer and runs it as a real process in central
// mode against the testbed, with a short unreachable grace so fault tests
// stay short. It returns once /readyz answers.
func startSyncer(ctx context.Context, stateDir string) (*syncerProcess, error) {
	return startSyncerWith(ctx, stateDir, "--clusterset-config", bed.ConfigPath, "--cluster-unreachable-grace", "20s")
}

// startSyncerWith builds mcs-syncer (once per state folder) and runs it
// with args, returning once /readyz answers.
func startSyncerWith(ctx context.Context, stateDir string, args ...string) (*syncerProcess, error) {
	// Named mcs-syncer, as in the image: client-go's user agent is the
	// binary's name, and the audit logs know mcs-syncer's writes by it
	// (test/testbed/audit).
	bin := filepath.Join(stateDir, "bin", "mcs-syncer")
	if _, err := os.Stat(bin); err != nil {
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			return nil, err
		}
		if err := syncerproc.Build(ctx, bin); err != nil {
			return nil, err
		}
	}
	logDir, err := syncerLogs()
	if err != nil {
		return nil, err
	}
	logFile, err := os.CreateTemp(logDir, "mcs-syncer-*.log")
	if err != nil {
		return nil, err
	}
	_ = logFile.Close()
	s, err := syncerproc.Start(ctx, bin, logFile.Name(), args...)
	if err != nil {
		return nil, err
	}
	return &syncerProcess{Process: s, stateDir: stateDir, logPath: s.LogPath}, nil
}
