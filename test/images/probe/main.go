// Command probe is the client of the testbed's data-plane tests, run inside
// a pod: it asks a netserver over TCP, UDP or HTTP, or asks DNS, with Go's
// own resolver (which reads the pod's /etc/resolv.conf, search list
// included). It prints one line per answer and exits 1 if any try failed.
//
//	probe [-n N] [-timeout D] [-interval D] [-stamp] tcp HOST:PORT
//	probe [-n N] [-timeout D] [-interval D] [-stamp] udp HOST:PORT
//	probe [-n N] [-timeout D] [-interval D] [-stamp] http URL
//	probe [-timeout D] dns A|AAAA|SRV NAME
//
// A failed try prints "error: ..." on its line, so the answers of -n tries
// stay in order and a test sees which ones failed. -interval waits between
// tries; -stamp starts each line with the time the try ended, in Unix
// nanoseconds (a pod shares the host's clock: a test can set it against
// its own).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"
)

func main() {
	tries := flag.Int("n", 1, "number of tries (new connection each)")
	timeout := flag.Duration("timeout", 2*time.Second, "timeout of each try")
	interval := flag.Duration("interval", 0, "wait between tries")
	stamp := flag.Bool("stamp", false, "start each line with the time the try ended (Unix nanoseconds)")
	flag.Parse()
	args := flag.Args()
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe [-n N] [-timeout D] [-interval D] [-stamp] tcp|udp HOST:PORT | http URL | dns A|AAAA|SRV NAME")
		os.Exit(2)
	}
	failed := false
	for i := range *tries {
		if i > 0 {
			time.Sleep(*interval)
		}
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		out, err := try(ctx, args)
		cancel()
		if *stamp {
			fmt.Printf("%d ", time.Now().UnixNano())
		}
		if err != nil {
			failed = true
			fmt.Printf("error: %v\n", err)
			continue
		}
		fmt.Println(strings.TrimRight(out, "\n"))
	}
	if failed {
		os.Exit(1)
	}
}

func try(ctx context.Context, args []string) (string, error) {
	switch args[0] {
	case "tcp", "udp":
		var d net.Dialer
		conn, err := d.DialContext(ctx, args[0], args[1])
		if err != nil {
			return "", err
		}
		defer conn.Close()
		deadline, _ := ctx.Deadline()
		_ = conn.SetDeadline(deadline)
		// A line of its own, over TCP too: the netserver answers a
		// client that sends nothing only after it gave up waiting for a
		// request line.
		if _, err := conn.Write([]byte("?\n")); err != nil {
			return "", err
		}
		buf := make([]byte, 2048)
		n, err := conn.Read(buf)
		if err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case "http":
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[1], nil)
		if err != nil {
			return "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return "", err
		}
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("%s: %s", resp.Status, body)
		}
		return string(body), nil
	case "dns":
		if len(args) != 3 {
			return "", fmt.Errorf("dns needs a type (A, AAAA or SRV) and a name")
		}
		return lookup(ctx, args[1], args[2])
	}
	return "", fmt.Errorf("unknown probe %q", args[0])
}

// lookup prints the answers sorted, one per line: addresses for A and
// AAAA, and "target port" for SRV.
func lookup(ctx context.Context, kind, name string) (string, error) {
	var lines []string
	switch kind := strings.ToUpper(kind); kind {
	case "A", "AAAA":
		network := map[string]string{"A": "ip4", "AAAA": "ip6"}[kind]
		ips, err := net.DefaultResolver.LookupIP(ctx, network, name)
		if err != nil {
			return "", err
		}
		for _, ip := range ips {
			lines = append(lines, ip.String())
		}
	case "SRV":
		_, srvs, err := net.DefaultResolver.LookupSRV(ctx, "", "", name)
		if err != nil {
			return "", err
		}
		for _, s := range srvs {
			lines = append(lines, fmt.Sprintf("%s %d", s.Target, s.Port))
		}
	default:
		return "", fmt.Errorf("dns type %q: want A, AAAA or SRV", kind)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n"), nil
}
