//go:build !linux

package credentials

import "os/exec"

// ownProcessGroup: elsewhere than Linux, the plugin alone is killed when
// it is stopped (exec.CommandContext's default).
func ownProcessGroup(*exec.Cmd) {}
