package testbed

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// ClustersetConfig is the clusterset config file the testbed writes: the
// format that pkg/clusterset reads (one member per cluster: its ID, the
// path of its kubeconfig and the context to use).
type ClustersetConfig struct {
	Clusterset string   `json:"clusterset"`
	Members    []Member `json:"members"`
}

// Member is one cluster of a ClustersetConfig.
type Member struct {
	ID         string `json:"id"`
	Kubeconfig string `json:"kubeconfig"`
	Context    string `json:"context,omitempty"`
}

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
