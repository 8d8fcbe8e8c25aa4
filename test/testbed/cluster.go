package testbed

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/mcs-syncer/mcs-syncer/test/testbed/controlplane"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/coredns"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/realnode"
)

// Cluster is one member of a running testbed: its control plane (whose
// fields and methods it has: Name, CIDRs, kubeconfig, clients, API server
// stop and start), its CoreDNS and, with Options.RealNodes, its real node.
type Cluster struct {
	*controlplane.ControlPlane
	// DNSAddr is the host:port (UDP and TCP) of this cluster's CoreDNS.
	DNSAddr string
	// RealNode is the cluster's real node when Options.RealNodes is set.
	RealNode *realnode.Node `json:",omitempty"`

	bed *Clusterset
}

func newCluster(cs *Clusterset, index int, name string, network realnode.Network) *Cluster {
	advertise, nsAnnotations := "", map[string]string(nil)
	if cs.opts.RealNodes {
		// The real nodes' pods reach the API server on the host's bridge
		// address, in-cluster clients (mcs-syncer as a Pod) included.
		advertise = network.HostIP()
		nsAnnotations = realnode.NamespacePolicy
	}
	c := &Cluster{bed: cs, ControlPlane: controlplane.New(controlplane.Spec{
		AdvertiseAddress:           advertise,
		SystemNamespaceAnnotations: nsAnnotations,
		Name:                       name,
		Index:                      index,
		WorkDir:                    filepath.Join(cs.StateDir, "kwok"),
		KubeconfigPath:             filepath.Join(cs.StateDir, name+".kubeconfig"),
		BinDir:                     cs.BinDir,
		DualStack:                  cs.opts.DualStack,
		AuditPolicy:                cs.opts.AuditPolicy,
		Zones:                      cs.opts.Zones,
		NodesPerZone:               cs.opts.NodesPerZone,
		ZoneCPU:                    cs.opts.ZoneCPU,
		ControllerManagerFlags:     cs.opts.ControllerManagerFlags,
	})}
	if cs.opts.RealNodes {
		c.RealNode = realnode.New(cs.StateDir, network, name, index, cs.opts.DualStack)
		if node := cs.opts.RealNodeNames[name]; node != "" {
			c.RealNode.Name = node
		}
	}
	return c
}

func (c *Cluster) dnsDir() string { return filepath.Join(c.bed.StateDir, "coredns") }

// start brings the cluster's control plane up, then its CoreDNS, then its
// real node, whose pods ask that CoreDNS through the kube-dns Service.
func (c *Cluster) start(ctx context.Context) error {
	if err := c.Create(ctx); err != nil {
		return err
	}
	spec := coredns.Spec{Name: c.Name, Dir: c.dnsDir(), BinDir: c.bed.BinDir, KubeconfigPath: c.KubeconfigPath, Context: c.Context}
	if c.RealNode != nil {
		spec.Bind = []string{c.RealNode.HostIP}
	}
	dns, err := coredns.Start(ctx, spec)
	if err != nil {
		return err
	}
	c.DNSAddr = dns.Addr
	if c.RealNode == nil {
		return nil
	}
	kube, err := c.Kubernetes()
	if err != nil {
		return err
	}
	if err := coredns.CreateService(ctx, kube, c.DNSServiceIP(), c.RealNode.HostIP, dns.Port); err != nil {
		return err
	}
	// A pod is refused until kube-controller-manager has given its
	// namespace a default ServiceAccount; on a loaded machine that can come
	// after the node is Ready (seen in CI), so the cluster is up only once
	// the default namespace has one.
	if err := waitForDefaultServiceAccount(ctx, kube, metav1.NamespaceDefault); err != nil {
		return err
	}
	return c.RealNode.Start(ctx, realnode.Spec{
		Zone:           cmp.Or(c.bed.opts.RealNodeZones[c.Name], c.Zones[0]),
		Region:         c.Name,
		KubeconfigPath: c.KubeconfigPath,
		ClusterCIDRs:   host.JoinIPFamilies(c.PodCIDR, c.PodCIDRv6),
		DNSServiceIP:   c.DNSServiceIP(),
		BinDir:         c.bed.BinDir,
		Client:         kube,
	})
}

// Pids returns the process ids of this cluster's running processes, by
// component (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
// kwok-controller, coredns).
func (c *Cluster) Pids() (map[string]int, error) {
	pids, err := c.ControlPlane.Pids()
	if err != nil {
		return nil, err
	}
	pid, alive, err := host.ReadPidFile(coredns.PidPath(c.dnsDir(), c.Name))
	if err != nil {
		return nil, fmt.Errorf("testbed: %s: %w", c.Name, err)
	}
	if alive {
		pids["coredns"] = pid
	}
	return pids, nil
}

// ResidentBytes returns the resident memory (VmRSS) of each of this
// cluster's running processes, by component, as Pids names them.
func (c *Cluster) ResidentBytes() (map[string]int64, error) {
	pids, err := c.Pids()
	if err != nil {
		return nil, err
	}
	return controlplane.ResidentBytes(pids)
}

// Exec runs command in the first container of pod ns/name (through the API
// server and the node's kubelet, as `kubectl exec` does) and returns its
// standard output. A command that exits non-zero returns its output and an
// error that carries its standard error.
func (c *Cluster) Exec(ctx context.Context, ns, pod string, command ...string) (string, error) {
	args := append([]string{"--kubeconfig", c.KubeconfigPath, "--context", c.Context,
		"exec", "-n", ns, pod, "--"}, command...)
	cmd := exec.CommandContext(ctx, filepath.Join(c.bed.BinDir, "kubectl"), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("exec in %s %s/%s: %s: %w: %s", c.Name, ns, pod, strings.Join(command, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// WaitForPodsAllowed waits until namespace ns takes pods: until it has its
// default ServiceAccount, if the cluster's controller manager makes them
// (namespace default has one).
func WaitForPodsAllowed(ctx context.Context, kube kubernetes.Interface, ns string) error {
	_, err := kube.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("testbed: %w", err)
	}
	return waitForDefaultServiceAccount(ctx, kube, ns)
}

// waitForDefaultServiceAccount waits until namespace ns has its default
// ServiceAccount, which kube-controller-manager creates after the
// namespace: until then the API server refuses the namespace's pods.
func waitForDefaultServiceAccount(ctx context.Context, kube kubernetes.Interface, ns string) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("testbed: no default ServiceAccount in namespace %s: %w", ns, err)
	}
	return nil
}
