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
)

// corefile makes CoreDNS answer cluster.local from the cluster's Services
// and clusterset.local from its ServiceImports. The kubernetes block must be
// authoritative for clusterset.local as well, or CoreDNS refuses the
// multicluster zone at start-up.
const corefile = `.:%d {
    bind 127.0.0.1
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
	dnsPort, err := freePort(true)
	if err != nil {
		return err
	}
	readyPort, err := freePort(false)
	if err != nil {
		return err
	}
	conf := filepath.Join(dir, c.Name+".Corefile")
	if err := os.WriteFile(conf, fmt.Appendf(nil, corefile, dnsPort, readyPort, c.KubeconfigPath, c.Context), 0o644); err != nil {
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

// freePort returns a loopback port that is free for TCP (and for UDP too
// when udp is set). Another process may take it before it is used; the
// window is small enough for a testbed.
func freePort(udp bool) (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !udp {
			return port, nil
		}
		pc, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		pc.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no free loopback port for TCP and UDP")
}
