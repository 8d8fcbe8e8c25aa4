package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
)

// An HA control plane is what kind builds for a highly available control
// plane, on loopback: a three-member etcd cluster, two kube-apiservers
// over it, and haproxy in front of them on the address that the
// kubeconfig names. kwokctl starts one etcd and one API server; makeHA
// takes over from there (same certificates, service-account keys and
// flags), so that every client of the control plane keeps its address.

// etcdMembers and apiServers are the sizes of an HA control plane: the
// smallest etcd that survives the loss of a member, and the smallest
// number of API servers that survives the loss of one.
const (
	etcdMembers = 3
	apiServers  = 2
)

// HA describes the processes of an HA control plane.
type HA struct {
	// Address is haproxy's host:port, the API server address of the
	// kubeconfig.
	Address string
	// EtcdClientPorts and EtcdPeerPorts are each etcd member's loopback
	// ports, APIServerPorts each kube-apiserver's.
	EtcdClientPorts, EtcdPeerPorts, APIServerPorts []int

	apiServerArgs []string
	etcdArgs      []string
}

// haproxyBinary is where Debian's haproxy package installs it.
const haproxyBinary = "/usr/sbin/haproxy"

func (cp *ControlPlane) haDir() string { return filepath.Join(cp.clusterDir(), "ha") }

func (cp *ControlPlane) pidFile(name string) string {
	return filepath.Join(cp.clusterDir(), "pids", name+".pid")
}

// makeHA replaces the etcd and kube-apiserver that kwokctl started with an
// HA control plane: it reads the API server's flags, stops both, starts
// three etcd members, two API servers on ports of their own and haproxy on
// the API server's old address, and returns once the control plane
// answers through haproxy.
func (cp *ControlPlane) makeHA(ctx context.Context) error {
	if _, err := os.Stat(haproxyBinary); err != nil {
		return fmt.Errorf("%w: an HA control plane needs haproxy (apt-get install haproxy)", host.ErrNoBinaries)
	}
	pids, err := cp.Pids()
	if err != nil {
		return err
	}
	apiArgs, err := processArgs(pids["kube-apiserver"])
	if err != nil {
		return fmt.Errorf("testbed: %s: kube-apiserver's flags: %w", cp.Name, err)
	}
	etcdArgs, err := processArgs(pids["etcd"])
	if err != nil {
		return fmt.Errorf("testbed: %s: etcd's flags: %w", cp.Name, err)
	}
	u, err := url.Parse(cp.restConfig.Host)
	if err != nil {
		return err
	}
	ha := &HA{Address: u.Host}
	if err := cp.kwokctl(ctx, "stop", "cluster", "--name", cp.Name); err != nil {
		return err
	}
	ports, err := freePorts(2*etcdMembers + apiServers)
	if err != nil {
		return err
	}
	ha.EtcdClientPorts, ha.EtcdPeerPorts, ha.APIServerPorts = ports[:etcdMembers], ports[etcdMembers:2*etcdMembers], ports[2*etcdMembers:]
	ha.etcdArgs = etcdArgs
	var etcdServers []string
	for _, port := range ha.EtcdClientPorts {
		etcdServers = append(etcdServers, "http://127.0.0.1:"+strconv.Itoa(port))
	}
	ha.apiServerArgs = withFlag(apiArgs, "etcd-servers", strings.Join(etcdServers, ","))
	cp.HA = ha
	if err := os.MkdirAll(cp.haDir(), 0o755); err != nil {
		return err
	}
	for i := range etcdMembers {
		if err := cp.StartEtcdMember(i); err != nil {
			return err
		}
	}
	if err := cp.waitEtcd(ctx); err != nil {
		return err
	}
	for i := range apiServers {
		if err := cp.StartAPIServerReplica(ctx, i); err != nil {
			return err
		}
	}
	if err := cp.startHAProxy(); err != nil {
		return err
	}
	return cp.waitReady(ctx)
}

// freePorts returns n distinct free loopback ports (host.FreePort may
// hand out a port twice: each is free when it answers).
func freePorts(n int) ([]int, error) {
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		port, err := host.FreePort(false)
		if err != nil {
			return nil, err
		}
		if tries > 10*n {
			return nil, fmt.Errorf("no %d distinct free ports", n)
		}
		if !slices.Contains(ports, port) {
			ports = append(ports, port)
		}
	}
	return ports, nil
}

// processArgs returns the command-line arguments of process pid, less the
// program's name.
func processArgs(pid int) ([]string, error) {
	if pid == 0 {
		return nil, errors.New("not running")
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, err
	}
	args := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
	return args[1:], nil
}

// withFlag returns args with flag --name set to value: in place of its
// "--name=..." argument, or added.
func withFlag(args []string, name, value string) []string {
	out := make([]string, 0, len(args)+1)
	for _, a := range args {
		if !strings.HasPrefix(a, "--"+name+"=") {
			out = append(out, a)
		}
	}
	return append(out, "--"+name+"="+value)
}

// etcdName is the name of etcd member i, also its pid file's.
func etcdName(i int) string { return "etcd-" + strconv.Itoa(i) }

// apiServerName is the name of API server replica i, also its pid file's.
func apiServerName(i int) string { return "kube-apiserver-" + strconv.Itoa(i) }

// StartEtcdMember starts etcd member i of an HA control plane (again,
// after StopEtcdMember: it keeps its data and rejoins).
func (cp *ControlPlane) StartEtcdMember(i int) error {
	ha := cp.HA
	var cluster []string
	for j, port := range ha.EtcdPeerPorts {
		cluster = append(cluster, fmt.Sprintf("%s=http://127.0.0.1:%d", etcdName(j), port))
	}
	peer := "http://127.0.0.1:" + strconv.Itoa(ha.EtcdPeerPorts[i])
	client := "http://127.0.0.1:" + strconv.Itoa(ha.EtcdClientPorts[i])
	args := ha.etcdArgs
	for name, value := range map[string]string{
		"name":                        etcdName(i),
		"data-dir":                    filepath.Join(cp.haDir(), etcdName(i)),
		"initial-advertise-peer-urls": peer,
		"listen-peer-urls":            peer,
		"advertise-client-urls":       client,
		"listen-client-urls":          client,
		"initial-cluster":             strings.Join(cluster, ","),
		"initial-cluster-state":       "new",
		"initial-cluster-token":       cp.Name,
	} {
		args = withFlag(args, name, value)
	}
	return cp.startProcess(etcdName(i), filepath.Join(cp.binDir, "etcd"), args)
}

// StopEtcdMember kills etcd member i (SIGKILL, as in a crash) and waits
// until it is gone.
func (cp *ControlPlane) StopEtcdMember(ctx context.Context, i int) error {
	return cp.stopProcess(ctx, etcdName(i))
}

// StartAPIServerReplica starts API server replica i of an HA control
// plane and returns once it answers /readyz itself.
func (cp *ControlPlane) StartAPIServerReplica(ctx context.Context, i int) error {
	releasePort(cp.HA.APIServerPorts[i])
	args := withFlag(cp.HA.apiServerArgs, "secure-port", strconv.Itoa(cp.HA.APIServerPorts[i]))
	args = withFlag(args, "bind-address", "127.0.0.1")
	if err := cp.startProcess(apiServerName(i), filepath.Join(cp.binDir, "kube-apiserver"), args); err != nil {
		return err
	}
	rc := cp.RESTConfig()
	rc.Host = "https://127.0.0.1:" + strconv.Itoa(cp.HA.APIServerPorts[i])
	return waitReadyAt(ctx, rc)
}

// StopAPIServerReplica kills API server replica i (SIGKILL, as in a
// crash) and waits until it is gone; haproxy sends its clients to the
// other.
func (cp *ControlPlane) StopAPIServerReplica(ctx context.Context, i int) error {
	if err := cp.stopProcess(ctx, apiServerName(i)); err != nil {
		return err
	}
	return holdPort(ctx, cp.HA.APIServerPorts[i])
}

// waitEtcd waits until every etcd member says it is healthy (a member is
// healthy once the cluster has a leader). If they do not within 3 minutes
// (one minute was not enough beside two e2e testbeds on two cores),
// the error names each member that is not, whether its process has exited,
// and the last lines of its log.
func (cp *ControlPlane) waitEtcd(ctx context.Context) error {
	var unhealthy []int
	err := host.PollUntil(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
		unhealthy = unhealthy[:0]
		for i, port := range cp.HA.EtcdClientPorts {
			if !etcdHealthy(ctx, port) {
				unhealthy = append(unhealthy, i)
			}
		}
		return len(unhealthy) == 0, nil
	})
	if err == nil {
		return nil
	}
	var seen []string
	for _, i := range unhealthy {
		state := "running"
		if cmd, ok := cp.procs[etcdName(i)]; !ok || !host.ProcessAlive(cmd.Process.Pid) {
			state = "exited"
		}
		seen = append(seen, fmt.Sprintf("%s (%s; last lines of its log:\n%s)", etcdName(i), state,
			lastLines(filepath.Join(cp.LogDir(), etcdName(i)+".log"), 5)))
	}
	return fmt.Errorf("testbed: %s: etcd not healthy: %w; not healthy: %s", cp.Name, err, strings.Join(seen, ", "))
}

// etcdHealthy reports whether the etcd member serving clients on port
// answers its /health with "health":"true".
func etcdHealthy(ctx context.Context, port int) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/health", port), nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return strings.Contains(string(body), `"health":"true"`)
}

// lastLines returns the last n lines of the file at path, or why it
// cannot.
func lastLines(path string, n int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// haproxyConfig is haproxy's configuration for an HA control plane, as
// kind's load balancer has it: TCP passed through (TLS ends at the API
// servers), a server checked by its /readyz every second and taken out
// after two failures, and a connection refused by one server retried on
// the other. Watches are long-lived: the client and server timeouts are
// longer than any test.
const haproxyConfig = `global
  maxconn 4096
defaults
  mode tcp
  timeout connect 1s
  timeout client 1h
  timeout server 1h
  retries 3
  option redispatch
frontend control-plane
  bind %s
  default_backend kube-apiservers
backend kube-apiservers
  option httpchk GET /readyz
  http-check expect status 200
  default-server inter 1s fall 2 rise 1 check check-ssl verify none
%s`

// startHAProxy starts haproxy on the control plane's address. Its binary
// is copied into the control plane's folder first: the testbed's teardown
// stops only processes that run its own binaries.
func (cp *ControlPlane) startHAProxy() error {
	var servers strings.Builder
	for i, port := range cp.HA.APIServerPorts {
		fmt.Fprintf(&servers, "  server %s 127.0.0.1:%d\n", apiServerName(i), port)
	}
	cfg := filepath.Join(cp.haDir(), "haproxy.cfg")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, haproxyConfig, cp.HA.Address, servers.String()), 0o644); err != nil {
		return err
	}
	bin := filepath.Join(cp.haDir(), "haproxy")
	raw, err := os.ReadFile(haproxyBinary)
	if err != nil {
		return err
	}
	if err := os.WriteFile(bin, raw, 0o755); err != nil {
		return err
	}
	if err := cp.startProcess("haproxy", bin, []string{"-db", "-f", cfg}); err != nil {
		return err
	}
	// haproxy listens once it has read its configuration.
	return host.PollUntil(context.Background(), 30*time.Second, func(context.Context) (bool, error) {
		conn, err := net.Dial("tcp", cp.HA.Address)
		if err == nil {
			conn.Close()
		}
		return err == nil, nil
	})
}

// startProcess starts one process of the control plane (HA, generic), logging to
// <logs>/<name>.log, with its pid in <pids>/<name>.pid (where Pids and
// the testbed's teardown find it). A goroutine waits for it, so that a
// killed process does not stay a zombie.
func (cp *ControlPlane) startProcess(name, bin string, args []string) error {
	if err := os.MkdirAll(cp.LogDir(), 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(filepath.Join(cp.LogDir(), name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close() // the child has its own copy
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	// A process group of its own: a Ctrl-C meant for the test does not
	// take the control plane down with it (the teardown does).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("testbed: %s: start %s: %w", cp.Name, name, err)
	}
	go cmd.Wait()        //nolint:errcheck // reaps it; its exit is seen through its pid
	if cp.procs == nil { // read back by Load
		cp.procs = map[string]*exec.Cmd{}
	}
	cp.procs[name] = cmd
	return os.WriteFile(cp.pidFile(name), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
}

// stopProcess kills the process name that startProcess started and waits
// until it has exited.
func (cp *ControlPlane) stopProcess(ctx context.Context, name string) error {
	cmd, ok := cp.procs[name]
	if !ok {
		return fmt.Errorf("testbed: %s: no process %s", cp.Name, name)
	}
	pid := cmd.Process.Pid
	if err := cmd.Process.Kill(); err != nil {
		return fmt.Errorf("testbed: %s: stop %s: %w", cp.Name, name, err)
	}
	delete(cp.procs, name)
	if err := host.PollUntil(ctx, time.Minute, func(context.Context) (bool, error) {
		return !host.ProcessAlive(pid), nil
	}); err != nil {
		return fmt.Errorf("testbed: %s: %s did not exit: %w", cp.Name, name, err)
	}
	return os.Remove(cp.pidFile(name))
}

// Wipe empties the etcd of an HA control plane, as a hub rebuilt from
// nothing is: every API server and etcd member is killed, the etcd data
// removed, and the control plane started again with what Create installs
// (the MCS CRDs and the system namespace) and nothing else. It returns once
// the control plane answers through haproxy again.
func (cp *ControlPlane) Wipe(ctx context.Context) error {
	for i := range cp.HA.APIServerPorts {
		if err := cp.StopAPIServerReplica(ctx, i); err != nil {
			return err
		}
	}
	for i := range cp.HA.EtcdClientPorts {
		if err := cp.StopEtcdMember(ctx, i); err != nil {
			return err
		}
		if err := os.RemoveAll(filepath.Join(cp.haDir(), etcdName(i))); err != nil {
			return err
		}
	}
	for i := range cp.HA.EtcdClientPorts {
		if err := cp.StartEtcdMember(i); err != nil {
			return err
		}
	}
	if err := cp.waitEtcd(ctx); err != nil {
		return err
	}
	if err := cp.StartAPIServer(ctx); err != nil {
		return err
	}
	if err := cp.InstallCRDs(ctx); err != nil {
		return err
	}
	return cp.createNamespace(ctx, SystemNamespace)
}

// EtcdLeader returns the index of the etcd member that leads the cluster
// now, as the members' status (etcd's v3 JSON gateway) says.
func (cp *ControlPlane) EtcdLeader(ctx context.Context) (int, error) {
	var lastErr error
	ids := map[string]int{}
	leader := ""
	for i, port := range cp.HA.EtcdClientPorts {
		var status struct {
			Header struct {
				MemberID string `json:"member_id"`
			} `json:"header"`
			Leader string `json:"leader"`
		}
		if err := postJSON(ctx, fmt.Sprintf("http://127.0.0.1:%d/v3/maintenance/status", port), &status); err != nil {
			lastErr = err
			continue
		}
		ids[status.Header.MemberID] = i
		if status.Leader != "" && status.Leader != "0" {
			leader = status.Leader
		}
	}
	if i, ok := ids[leader]; ok {
		return i, nil
	}
	return 0, fmt.Errorf("testbed: %s: no etcd member names a leader among %v (last error: %v)", cp.Name, ids, lastErr)
}

// postJSON posts an empty JSON object to address and decodes the answer into
// out.
func postJSON(ctx context.Context, address string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, address, strings.NewReader("{}"))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", address, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
