package credentials

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup starts the plugin in a process group of its own, which
// is killed when the plugin is stopped (a plugin that is a shell script
// leaves no child behind), and kills the plugin if mcs-syncer dies first.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
