package e2e

import (
	"context"
	"os"
	"path/filepath"

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
	bin := filepath.Join(stateDir, "mcs-syncer-bin")
	if _, err := os.Stat(bin); err != nil {
		if err := syncerproc.Build(ctx, bin); err != nil {
			return nil, err
		}
	}
	// The log outlives the testbed's state folder, for a failure's post-mortem.
	logDir, err := os.MkdirTemp("", "mcs-e2e-syncer-")
	if err != nil {
		return nil, err
	}
	s, err := syncerproc.Start(ctx, bin, filepath.Join(logDir, "mcs-syncer.log"), args...)
	if err != nil {
		return nil, err
	}
	return &syncerProcess{Process: s, stateDir: stateDir, logPath: s.LogPath}, nil
}
