package testbed

import (
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/mcs-syncer/mcs-syncer/internal/membership"
)

// TestClustersetConfigIsReadable: what the testbed writes is a clusterset
// config mcs-syncer reads, schema included.
func TestClustersetConfigIsReadable(t *testing.T) {
	raw, err := yaml.Marshal(ClustersetConfig{Clusterset: "testbed", Hub: &HubSettings{Kubeconfig: "hub.kubeconfig"}, Members: []Member{{ID: "east"}}})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := membership.ParseConfig(raw, t.TempDir())
	if err != nil {
		t.Fatalf("%v:\n%s", err, raw)
	}
	if cfg.Clusterset != "testbed" || cfg.Member("east") == nil || !cfg.Member("east").ThroughHub {
		t.Errorf("read %+v from:\n%s", cfg, raw)
	}
}
