package controlplane

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
)

// The port of an API server that StopAPIServer stopped is held until it is
// started again. kwokctl picks the ports of a new cluster by trying them
// from 32767 down, so another testbed on the host (a make e2e beside a
// make bench-e2e) that creates a cluster during the outage would take the
// stopped server's free port, and the restart would never answer (seen:
// bench-e2e's member return gave up after 3 minutes of "connection
// refused"). The holder resets every connection at once, as close to a
// crashed server's refusal as a listening socket comes.
var (
	heldMu sync.Mutex
	held   = map[int]net.Listener{}
)

// holdPort listens on port until releasePort, resetting every connection.
// The stopped server's socket is gone by then; a brief retry covers the
// kernel's release of it.
func holdPort(ctx context.Context, port int) error {
	var l net.Listener
	var lastErr error
	if err := host.PollUntil(ctx, 10*time.Second, func(context.Context) (bool, error) {
		l, lastErr = net.Listen("tcp", ":"+strconv.Itoa(port))
		return lastErr == nil, nil
	}); err != nil {
		return fmt.Errorf("testbed: hold port %d of the stopped API server: %w (%v)", port, err, lastErr)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return // released
			}
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // a reset, not an orderly close
			}
			_ = c.Close()
		}
	}()
	heldMu.Lock()
	defer heldMu.Unlock()
	held[port] = l
	return nil
}

// releasePort frees a port that holdPort holds, for its server to start;
// a port not held is left alone.
func releasePort(port int) {
	heldMu.Lock()
	l := held[port]
	delete(held, port)
	heldMu.Unlock()
	if l != nil {
		_ = l.Close()
	}
}

// apiServerPort is the port of the control plane's (single) API server.
func (cp *ControlPlane) apiServerPort() (int, error) {
	u, err := url.Parse(cp.restConfig.Host)
	if err != nil {
		return 0, fmt.Errorf("testbed: %s: API server address %q: %w", cp.Name, cp.restConfig.Host, err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return 0, fmt.Errorf("testbed: %s: API server address %q has no port", cp.Name, cp.restConfig.Host)
	}
	return port, nil
}
