package testbed

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/mcs-syncer/mcs-syncer/test/testbed/controlplane"
)

// KubeconfigPath is where Start writes WriteKubeconfig's file.
func (cs *Clusterset) KubeconfigPath() string { return filepath.Join(cs.StateDir, "kubeconfig") }

// WriteKubeconfig writes one kubeconfig of every member and the hub, as a
// user of several clusters has: a context named after each (east, west,
// north; hub), with its admin credentials and CA embedded. With real
// nodes, the servers are the API servers' addresses on the nodes' bridge,
// which the host and the real nodes' pods reach alike, so that a
// kubeconfig derived from it (hack/kubeconfig.sh) works in mcs-syncer's
// Pods.
func (cs *Clusterset) WriteKubeconfig(path string) error {
	return cs.WriteKubeconfigWithHub(path, cs.Hub)
}

// WriteKubeconfigWithHub is WriteKubeconfig with context hub naming hub
// (none if nil) instead of the testbed's: another hub of the testbed
// (StartBareHub).
func (cs *Clusterset) WriteKubeconfigWithHub(path string, hub *controlplane.ControlPlane) error {
	out := clientcmdapi.NewConfig()
	add := func(name, kubeconfigPath string) error {
		cfg, err := clientcmd.LoadFromFile(kubeconfigPath)
		if err != nil {
			return err
		}
		if err := clientcmdapi.FlattenConfig(cfg); err != nil {
			return err
		}
		ctx := cfg.Contexts[cfg.CurrentContext]
		if ctx == nil {
			return fmt.Errorf("testbed: %s: no current context", kubeconfigPath)
		}
		cluster, user := cfg.Clusters[ctx.Cluster], cfg.AuthInfos[ctx.AuthInfo]
		if cluster == nil || user == nil {
			return fmt.Errorf("testbed: %s: context %s names no cluster or user", kubeconfigPath, cfg.CurrentContext)
		}
		if cs.Clusters[0].RealNode != nil {
			u, err := url.Parse(cluster.Server)
			if err != nil {
				return fmt.Errorf("testbed: %s: %w", kubeconfigPath, err)
			}
			u.Host = net.JoinHostPort(cs.Clusters[0].RealNode.HostIP, u.Port())
			cluster.Server = u.String()
		}
		out.Clusters[name], out.AuthInfos[name+"-admin"] = cluster, user
		out.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name + "-admin"}
		return nil
	}
	for _, c := range cs.Clusters {
		if err := add(c.Name, c.KubeconfigPath); err != nil {
			return err
		}
	}
	if hub != nil {
		if err := add("hub", hub.KubeconfigPath); err != nil {
			return err
		}
	}
	out.CurrentContext = cs.Clusters[0].Name
	return clientcmd.WriteToFile(*out, path)
}
