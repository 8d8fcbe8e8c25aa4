package syncer

import (
	"errors"
	"fmt"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/membership"
)

// checkMode checks that the config suits the mode: per-cluster mode names
// a member with connection settings of its own; a hub needs per-cluster
// mode (central mode reads every member itself).
func checkMode(cfg *membership.Config, local clusterset.ClusterID) error {
	if local == "" {
		if cfg.Hub != nil {
			return errors.New("hub mode needs per-cluster mode: run each member's own mcs-syncer with --local-cluster")
		}
		return nil
	}
	m := cfg.Member(local)
	switch {
	case m == nil:
		return fmt.Errorf("--local-cluster: %q is not a member of clusterset %s", local, cfg.Clusterset)
	case m.ThroughHub:
		return fmt.Errorf("--local-cluster: member %s has no kubeconfig (nor inCluster): its own cluster cannot be read through the hub", local)
	}
	return nil
}
