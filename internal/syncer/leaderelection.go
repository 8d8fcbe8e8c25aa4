package syncer

import (
	"errors"
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/membership"
)

// leaderElectionConfig returns the REST config of the cluster that holds
// the Lease, or nil without leader election: the cluster mcs-syncer runs
// in, or one the user names; never implicitly a member, whose outage would
// leave the clusterset without a leader.
func leaderElectionConfig(s Settings, cfg *membership.Config) (*rest.Config, error) {
	switch {
	case !s.LeaderElect:
		return nil, nil
	case s.LeaderElectKubeconfig != "":
		rc, err := clientcmd.BuildConfigFromFlags("", s.LeaderElectKubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--leader-election-kubeconfig: %w", err)
		}
		return rc, nil
	case s.LeaderElectCluster != "":
		m := cfg.Member(clusterset.ClusterID(s.LeaderElectCluster))
		if m == nil {
			return nil, fmt.Errorf("--leader-election-cluster: %q is not a member of clusterset %s", s.LeaderElectCluster, cfg.Clusterset)
		}
		rc, err := m.RESTConfig()
		if err != nil {
			return nil, fmt.Errorf("--leader-election-cluster: %w", err)
		}
		return rc, nil
	}
	if rc, err := rest.InClusterConfig(); err == nil {
		return rc, nil
	}
	if s.LocalCluster != "" {
		rc, err := cfg.Member(clusterset.ClusterID(s.LocalCluster)).RESTConfig()
		if err != nil {
			return nil, fmt.Errorf("--leader-elect: the Lease lives in --local-cluster: %w", err)
		}
		return rc, nil
	}
	return nil, errors.New("--leader-elect: outside a cluster in central mode, name where the Lease lives with --leader-election-kubeconfig or --leader-election-cluster")
}
