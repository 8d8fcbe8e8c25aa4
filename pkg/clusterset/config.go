package clusterset

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// Config is the clusterset membership file:
//
//	clusterset: prod            # the clusterset's name (DNS-1123 label)
//	members:
//	- id: east                  # cluster ID (DNS-1123 label), unique
//	  kubeconfig: east.kubeconfig   # relative to this file, or absolute
//	  context: admin@east       # optional; default: the kubeconfig's current context
//	- id: west
//	  inCluster: true           # the cluster mcs-syncer runs in (no kubeconfig)
//
// Unknown fields, duplicate IDs, two members reaching the same API server
// and missing kubeconfig files are errors.
type Config struct {
	Clusterset string   `json:"clusterset"`
	Members    []Member `json:"members"`
}

// Member is one cluster of the clusterset.
type Member struct {
	ID ClusterID `json:"id"`
	// Kubeconfig is the path of a kubeconfig file, relative to the config
	// file's folder unless absolute.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Context selects a context of Kubeconfig; empty means its current one.
	Context string `json:"context,omitempty"`
	// InCluster uses the service account mcs-syncer runs as, instead of a
	// kubeconfig.
	InCluster bool `json:"inCluster,omitempty"`

	restConfig *rest.Config
}

// LoadConfig reads and validates a clusterset config file. It reads every
// member's kubeconfig (not the in-cluster one), so that a bad one fails
// here with its member's name rather than later.
func LoadConfig(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("clusterset config: %w", err)
	}
	cfg, err := ParseConfig(raw, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("clusterset config %s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig parses and validates a clusterset config; relative kubeconfig
// paths are taken relative to dir.
func ParseConfig(raw []byte, dir string) (*Config, error) {
	var cfg Config
	if err := yaml.UnmarshalStrict(raw, &cfg); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if cfg.Clusterset == "" {
		return nil, errors.New("clusterset: name is missing")
	}
	if errs := validation.IsDNS1123Label(cfg.Clusterset); len(errs) > 0 {
		return nil, fmt.Errorf("clusterset: name %q is not a DNS-1123 label: %v", cfg.Clusterset, errs)
	}
	if len(cfg.Members) == 0 {
		return nil, errors.New("members: no member clusters")
	}
	byID := map[ClusterID]bool{}
	byServer := map[string]ClusterID{}
	for i := range cfg.Members {
		m := &cfg.Members[i]
		if _, err := ParseClusterID(string(m.ID)); err != nil {
			return nil, fmt.Errorf("members[%d]: %w", i, err)
		}
		if byID[m.ID] {
			return nil, fmt.Errorf("members[%d]: cluster ID %q appears twice", i, m.ID)
		}
		byID[m.ID] = true
		switch {
		case m.InCluster && m.Kubeconfig != "":
			return nil, fmt.Errorf("member %s: set kubeconfig or inCluster, not both", m.ID)
		case m.InCluster:
			if m.Context != "" {
				return nil, fmt.Errorf("member %s: context needs a kubeconfig", m.ID)
			}
			if other, ok := byServer["in-cluster"]; ok {
				return nil, fmt.Errorf("member %s: inCluster is already member %s", m.ID, other)
			}
			byServer["in-cluster"] = m.ID
			continue
		case m.Kubeconfig == "":
			return nil, fmt.Errorf("member %s: kubeconfig is missing (or set inCluster: true)", m.ID)
		}
		if !filepath.IsAbs(m.Kubeconfig) {
			m.Kubeconfig = filepath.Join(dir, m.Kubeconfig)
		}
		if _, err := os.Stat(m.Kubeconfig); err != nil {
			return nil, fmt.Errorf("member %s: kubeconfig %s: %w", m.ID, m.Kubeconfig, err)
		}
		rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: m.Kubeconfig},
			&clientcmd.ConfigOverrides{CurrentContext: m.Context},
		).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("member %s: kubeconfig %s (context %q): %w", m.ID, m.Kubeconfig, m.Context, err)
		}
		if other, ok := byServer[rc.Host]; ok {
			return nil, fmt.Errorf("member %s: reaches the same API server (%s) as member %s", m.ID, rc.Host, other)
		}
		byServer[rc.Host] = m.ID
		m.restConfig = rc
	}
	return &cfg, nil
}

// RESTConfig returns a new rest.Config for the member.
func (m *Member) RESTConfig() (*rest.Config, error) {
	if m.InCluster {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("member %s: in-cluster config: %w", m.ID, err)
		}
		return rc, nil
	}
	if m.restConfig == nil {
		return nil, fmt.Errorf("member %s: config was not loaded with LoadConfig", m.ID)
	}
	return rest.CopyConfig(m.restConfig), nil
}

// Member returns the member with the given ID, or nil.
func (c *Config) Member(id ClusterID) *Member {
	for i := range c.Members {
		if c.Members[i].ID == id {
			return &c.Members[i]
		}
	}
	return nil
}
