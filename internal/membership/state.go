package membership

import (
	"time"
)

// State is where a member is in its lifecycle.
type State string

const (
	// Connecting: not tried yet.
	Connecting State = "connecting"
	// BadConfig: its kubeconfig (or in-cluster config) cannot be read.
	BadConfig State = "config-error"
	// Unreachable: its API server does not answer.
	Unreachable State = "unreachable"
	// MissingCRDs: it answers but serves no version of the MCS API that
	// mcs-syncer speaks (or, for a member read through its publications,
	// not mcs-syncer's PublishedExports).
	MissingCRDs State = "missing-crds"
	// Forbidden: it refuses a list or watch mcs-syncer needs.
	Forbidden State = "forbidden"
	// WrongCluster: its ClusterProperties (KEP-2149) name another cluster
	// ID or another clusterset than the config: it is not engaged.
	WrongCluster State = "wrong-cluster"
	// Failed: mcs-syncer could not set up its controllers for it, or its
	// credential plugin gave no credentials (internal/credentials: it did
	// not return in time, or failed).
	Failed State = "failed"
	// Syncing: it answers; its cache is being built.
	Syncing State = "syncing"
	// Engaged: its cache is synced and its controllers run.
	Engaged State = "engaged"
)

// states are all States, for the one-hot state metric.
var states = []State{Connecting, BadConfig, Unreachable, MissingCRDs, Forbidden, WrongCluster, Failed, Syncing, Engaged}

// connected reports whether a member in state s answers.
func (s State) connected() bool { return s == Syncing || s == Engaged }

// Status is a member's state, since when it holds, and why (for the states
// that are problems).
type Status struct {
	State State
	Since time.Time
	Cause string
}
