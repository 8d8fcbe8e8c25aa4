package host

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// RepoRoot returns the root of the mcs-syncer repository that holds the
// working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(mod, []byte("module github.com/mcs-syncer/mcs-syncer\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the mcs-syncer repository; set Options.StateDir and MCS_TOOLS_DIR")
		}
		dir = parent
	}
}

// FreePort returns a loopback port that is free for TCP (and for UDP too
// when udp is set), chosen at random in [freePortMin, freePortMax).
//
// Not a port the kernel hands out for :0: those come from the ephemeral
// range (32768-60999 on Linux), where every outgoing connection also
// takes its local port, so a port picked there and bound a moment later
// by a child process was sometimes taken by a connection meanwhile (seen
// in CI: an mcs-syncer of bench-scale exited with "bind: address already
// in use"). The range is also below the ports kwokctl counts down from
// 32767 for its components (about five per cluster).
//
// A port is handed out once per process: two picks of the same free port
// before either is bound (the pprof port of one mcs-syncer and the probe
// port of the next, in bench-scale) made the second process exit with
// "bind: address already in use" (seen in CI).
func FreePort(udp bool) (int, error) {
	for range 100 {
		port := freePortMin + rand.IntN(freePortMax-freePortMin)
		if !handOut(port) {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
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
	return 0, fmt.Errorf("no free loopback port for TCP%s in %d..%d", map[bool]string{true: " and UDP"}[udp], freePortMin, freePortMax-1)
}

// handedOut are the ports FreePort returned or tried in this process.
var handedOut struct {
	mu    sync.Mutex
	ports map[int]bool
}

// handOut reports whether port was never handed out (or tried) before,
// and marks it.
func handOut(port int) bool {
	handedOut.mu.Lock()
	defer handedOut.mu.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	if handedOut.ports[port] {
		return false
	}
	handedOut.ports[port] = true
	return true
}

// The range FreePort picks from.
const freePortMin, freePortMax = 20000, 30000
