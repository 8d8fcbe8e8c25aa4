//go:build tools

// Package tools pins krew, the kubectl plugin manager, for the test of
// kubectl-mcs's krew manifest (hack/krew/test.sh): krew itself installs
// the plugin from the manifest and archive that hack/krew/release.sh
// writes.
package tools

import (
	_ "sigs.k8s.io/krew/cmd/krew"
)
