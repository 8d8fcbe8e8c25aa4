package coredns

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
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

// Spec says which CoreDNS to start.
type Spec struct {
	// Name names the files of this CoreDNS in Dir: <Name>.Corefile,
	// <Name>.log and <Name>.pid.
	Name, Dir string
	// BinDir holds the coredns binary.
	BinDir string
	// KubeconfigPath and Context are what its kubernetes plugin reads the
	// cluster with.
	KubeconfigPath, Context string
	// Bind are addresses to listen on besides 127.0.0.1 (a real node's
	// pods reach it on the host's bridge address).
	Bind []string
}

// Server is a running CoreDNS.
type Server struct {
	// Addr is 127.0.0.1:<Port>, for UDP and TCP.
	Addr string
	Port int
}

// PidPath is the pid file of the CoreDNS of spec's Name in dir.
func PidPath(dir, name string) string { return filepath.Join(dir, name+".pid") }

// Start starts a CoreDNS in a session of its own (so it outlives `testbed
// up`) and waits until its ready plugin reports that the kubernetes plugin
// has synced.
func Start(ctx context.Context, spec Spec) (*Server, error) {
	dir := spec.Dir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	dnsPort, err := host.FreePort(true)
	if err != nil {
		return nil, err
	}
	readyPort, err := host.FreePort(false)
	if err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, spec.Name+".Corefile")
	bind := strings.Join(append([]string{"127.0.0.1"}, spec.Bind...), " ")
	if err := os.WriteFile(conf, fmt.Appendf(nil, corefile, dnsPort, bind, readyPort, spec.KubeconfigPath, spec.Context), 0o644); err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, spec.Name+".log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(filepath.Join(spec.BinDir, "coredns"), "-conf", conf)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start coredns: %w", err)
	}
	// Reap it when it exits, so it never lingers as a zombie of a test.
	go func() { _ = cmd.Wait() }()
	if err := os.WriteFile(PidPath(dir, spec.Name), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return nil, err
	}

	readyURL := fmt.Sprintf("http://127.0.0.1:%d/ready", readyPort)
	err = host.PollUntil(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		if !host.ProcessAlive(cmd.Process.Pid) {
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
		return nil, fmt.Errorf("coredns not ready: %w", err)
	}
	return &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(dnsPort)), Port: dnsPort}, nil
}

// CreateService makes a CoreDNS the pods' DNS as in a real cluster: a
// kube-dns Service in kube-system at serviceIP (the kubelets'
// clusterDNS), whose one endpoint is the CoreDNS listening on hostIP at
// port. kube-proxy on a real node routes the pods' queries to it.
func CreateService(ctx context.Context, cs kubernetes.Interface, serviceIP, hostIP string, port int) error {
	ports := []corev1.ServicePort{
		{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(int32(port))},
		{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(int32(port))},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-dns", Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{"k8s-app": "kube-dns"}},
		Spec: corev1.ServiceSpec{ClusterIP: serviceIP, Ports: ports},
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
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{hostIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       slicePorts,
	}
	if _, err := cs.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("kube-dns EndpointSlice: %w", err)
	}
	return nil
}
