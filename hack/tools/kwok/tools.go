//go:build tools

// Package tools pins kwok (fake nodes and pods) and kwokctl (starts the
// control planes of the testbed with its binary runtime).
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
	_ "sigs.k8s.io/kwok/cmd/kwokctl"
)
