package testbed

import (
	"context"

	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
)

// corefile makes CoreDNS answer cluster.local from the cluster's Services
// and clusterset.local from its ServiceImports. The kubernetes block must be
// authoritative for clusterset.local as well, or CoreDNS refuses the
// multicluster zone at start-up.
const corefile = `.:%d {
    bind %s
    errors
    ready 127.0.0.1:%d
    kubernetes cluster.local clusterset.local {
        kubeconfig %s %s
        multicluster clusterset.local
    }
}
`

func (c *Cluster) coreDNSPidPath() string {
	return filepath.Join(c.bed.StateDir, "coredns", c.Name+".pid")
}

// startCoreDNS starts this cluster's CoreDNS in a session of its own (so it
// outlives `testbed up`) and waits until its ready plugin reports that the
// kubernetes plugin has synced.
func (c *Cluster) startCoreDNS(ctx context.Context) error {
	dir := filepath.Join(c.bed.StateDir, "coredns")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	dnsPort, err := host.FreePort(true)
	if err != nil {
		return err
	}
	readyPort, err := host.FreePort(false)
	if err != nil {
		return err
	}
	conf := filepath.Join(dir, c.Name+".Corefile")
	bind := "127.0.0.1"
	if c.RealNode != nil {
		// Pods reach it on the nodes' bridge, through the kube-dns Service.
		bind += " " + hostNodeIP
	}
	if err := os.WriteFile(conf, fmt.Appendf(nil, corefile, dnsPort, bind, readyPort, c.KubeconfigPath, c.Context), 0o644); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(dir, c.Name+".log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(filepath.Join(c.bed.BinDir, "coredns"), "-conf", conf)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start coredns: %w", err)
	}
	// Reap it when it exits, so it never lingers as a zombie of a test.
	go func() { _ = cmd.Wait() }()
	if err := os.WriteFile(c.coreDNSPidPath(), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	c.DNSAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(dnsPort))
	c.dnsPort = dnsPort

	readyURL := fmt.Sprintf("http://127.0.0.1:%d/ready", readyPort)
	err = pollUntil(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		if !processAlive(cmd.Process.Pid) {
			return false, fmt.Errorf("coredns exited; see %s", logFile.Name())
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, readyURL, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("coredns not ready: %w", err)
	}
	return nil
}

// createDNSService makes CoreDNS the pods' DNS as in a real cluster: a
// kube-dns Service in kube-system at DNSServiceIP (the kubelet's
// clusterDNS), whose one endpoint is the CoreDNS on the host's bridge
// address. kube-proxy on the real node routes the pods' queries to it.
func (c *Cluster) createDNSService(ctx context.Context) error {
	cs, err := c.Kubernetes()
	if err != nil {
		return err
	}
	ports := []corev1.ServicePort{
		{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(int32(c.dnsPort))},
		{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(int32(c.dnsPort))},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{"k8s-app": "kube-dns"}},
		Spec: corev1.ServiceSpec{ClusterIP: c.DNSServiceIP(), Ports: ports},
	}
	if _, err := cs.CoreV1().Services(metav1.NamespaceSystem).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kube-dns Service: %w", err)
	}
	var slicePorts []discoveryv1.EndpointPort
	for _, p := range ports {
		slicePorts = append(slicePorts, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Protocol: ptr.To(p.Protocol), Port: ptr.To(p.TargetPort.IntVal)})
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns-host", Namespace: metav1.NamespaceSystem, Labels: map[string]string{
			discoveryv1.LabelServiceName: "kube-dns",
			discoveryv1.LabelManagedBy:   "testbed.mcs-syncer.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{hostNodeIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       slicePorts,
	}
	if _, err := cs.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kube-dns EndpointSlice: %w", err)
	}
	return nil
}
