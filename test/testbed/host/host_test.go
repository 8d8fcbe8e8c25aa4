package host

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFreePort: the port is outside the kernel's ephemeral range (where
// outgoing connections would take it) and free for TCP, and for UDP when
// asked.
func TestFreePort(t *testing.T) {
	for _, udp := range []bool{false, true} {
		port, err := FreePort(udp)
		if err != nil {
			t.Fatal(err)
		}
		if port < freePortMin || port >= freePortMax {
			t.Errorf("port %d outside %d..%d", port, freePortMin, freePortMax-1)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("port %d is not free for TCP: %v", port, err)
		}
		l.Close()
		if udp {
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				t.Fatalf("port %d is not free for UDP: %v", port, err)
			}
			pc.Close()
		}
	}
}

// TestProcessAliveWhileMainThreadIsAZombie: a process whose main thread has
// exited (state Z) while another thread runs is alive, as a killed etcd is
// while its other threads still close its sockets; once its last thread
// is gone and it is reaped, it is not.
func TestProcessAliveWhileMainThreadIsAZombie(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("needs a C compiler to build testdata/zombieleader.c")
	}
	bin := filepath.Join(t.TempDir(), "zombieleader")
	if out, err := exec.Command(cc, "-o", bin, "testdata/zombieleader.c", "-lpthread").CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	stat := fmt.Sprintf("/proc/%d/stat", pid)
	if err := PollUntil(context.Background(), 30*time.Second, func(context.Context) (bool, error) {
		raw, err := os.ReadFile(stat)
		return err == nil && strings.Contains(string(raw), ") Z "), err
	}); err != nil {
		t.Fatalf("its main thread never showed state Z: %v", err)
	}
	if !ProcessAlive(pid) {
		t.Fatal("ProcessAlive = false while its second thread runs")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	if ProcessAlive(pid) {
		t.Fatal("ProcessAlive = true once it was killed and reaped")
	}
}
