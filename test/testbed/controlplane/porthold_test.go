package controlplane

import (
	"net"
	"strconv"
	"testing"
	"time"
)

// TestHeldPortIsNotFree: while held, the port of a stopped API server
// cannot be taken (kwokctl's test for a free port, net.Listen on the
// loopback and on every address, fails), and a client that connects is
// cut off at once; released, it is free for the server again.
func TestHeldPortIsNotFree(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	if err := holdPort(t.Context(), port); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releasePort(port) })
	for _, addr := range []string{"127.0.0.1:", ":"} {
		if l, err := net.Listen("tcp", addr+strconv.Itoa(port)); err == nil {
			l.Close()
			t.Errorf("listen on %s%d while it is held: no error", addr, port)
		}
	}
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 5*time.Second)
	if err == nil {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, readErr := c.Read(make([]byte, 1))
		c.Close()
		if n != 0 || readErr == nil {
			t.Errorf("a connection to the held port read %d bytes, %v; want it cut off", n, readErr)
		} else if ne, ok := readErr.(net.Error); ok && ne.Timeout() {
			t.Errorf("a connection to the held port was left open: %v", readErr)
		}
	}
	releasePort(port)
	l, err = net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("listen on the released port: %v", err)
	}
	l.Close()
}
