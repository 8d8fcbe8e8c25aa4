package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
)

// ClustersetConfig is the clusterset config file the testbed writes, the
// API type itself (it marshals with its apiVersion and kind); Member is one
// of its clusters (without Kubeconfig, read through the hub), HubSettings
// how it reaches the hub.
type (
	ClustersetConfig = v1alpha1.ClusterSetConfiguration
	Member           = v1alpha1.ClusterSetMember
	HubSettings      = v1alpha1.HubConnection
)

func writeClustersetConfig(cs *Clusterset) error {
	conf := ClustersetConfig{Clusterset: "testbed"}
	for _, c := range cs.Clusters {
		conf.Members = append(conf.Members, Member{ID: c.Name, Kubeconfig: c.KubeconfigPath, Context: c.Context})
	}
	raw, err := yaml.Marshal(conf)
	if err != nil {
		return fmt.Errorf("testbed: clusterset config: %w", err)
	}
	if err := os.WriteFile(cs.ConfigPath, raw, 0o644); err != nil {
		return fmt.Errorf("testbed: clusterset config: %w", err)
	}
	return nil
}

// stateFile records a running testbed in its state folder, so that Attach
// (and `testbed status`) can find it again from another process.
const stateFile = "testbed.json"

func writeState(cs *Clusterset) error {
	raw, err := json.MarshalIndent(cs.Clusters, "", "  ")
	if err != nil {
		return fmt.Errorf("testbed: state: %w", err)
	}
	if err := os.WriteFile(filepath.Join(cs.StateDir, stateFile), raw, 0o644); err != nil {
		return fmt.Errorf("testbed: state: %w", err)
	}
	return nil
}

// Attach returns the testbed that a Start in another process (such as
// `testbed up`) left running in stateDir, with binaries in binDir. Stop on
// the result tears it down.
func Attach(ctx context.Context, stateDir, binDir string) (*Clusterset, error) {
	raw, err := os.ReadFile(filepath.Join(stateDir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("testbed: no running testbed in %s: %w", stateDir, err)
	}
	cs := &Clusterset{StateDir: stateDir, ConfigPath: filepath.Join(stateDir, "clusterset.yaml"), BinDir: binDir}
	cs.opts.StateDir, cs.opts.BinDir = stateDir, binDir
	if err := json.Unmarshal(raw, &cs.Clusters); err != nil {
		return nil, fmt.Errorf("testbed: state %s: %w", filepath.Join(stateDir, stateFile), err)
	}
	for _, c := range cs.Clusters {
		c.bed = cs
		if c.ControlPlane == nil {
			return nil, fmt.Errorf("testbed: state %s: a cluster without its control plane", filepath.Join(stateDir, stateFile))
		}
		if err := c.Load(binDir); err != nil {
			return nil, err
		}
	}
	if err := cs.loadHub(); err != nil {
		return nil, err
	}
	return cs, nil
}
