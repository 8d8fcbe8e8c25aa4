package host

import (
	"net"
	"strconv"
	"testing"
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
