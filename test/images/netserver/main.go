// Command netserver is the testbed's echo server: every TCP connection,
// HTTP request and UDP datagram gets one line that says who answered:
//
//	<cluster> <pod> <pod IP> <protocol>/<port>
//
// so a test (or the demo) sees which cluster's pod a request reached.
//
// Usage: netserver [-keep-serving-on-term] tcp:8080 udp:8080 ...
// The cluster, pod name and IP come from $CLUSTER, $POD_NAME and $POD_IP
// (the downward API). With -keep-serving-on-term it ignores SIGTERM and goes
// on serving until SIGKILL, which keeps a deleted pod terminating but
// serving for its whole grace period (KEP-1672 tests).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	keepServing := flag.Bool("keep-serving-on-term", false, "ignore SIGTERM: serve until SIGKILL")
	flag.Parse()
	if flag.NArg() == 0 {
		log.Fatal("usage: netserver [-keep-serving-on-term] tcp:PORT|udp:PORT ...")
	}
	who := fmt.Sprintf("%s %s %s", env("CLUSTER"), env("POD_NAME"), env("POD_IP"))
	for _, spec := range flag.Args() {
		proto, port, ok := strings.Cut(spec, ":")
		if !ok || (proto != "tcp" && proto != "udp") {
			log.Fatalf("netserver: %q is not tcp:PORT or udp:PORT", spec)
		}
		reply := fmt.Sprintf("%s %s/%s\n", who, proto, port)
		if proto == "tcp" {
			l, err := net.Listen("tcp", ":"+port)
			if err != nil {
				log.Fatal(err)
			}
			go serveTCP(l, reply)
		} else {
			pc, err := net.ListenPacket("udp", ":"+port)
			if err != nil {
				log.Fatal(err)
			}
			go serveUDP(pc, reply)
		}
		log.Printf("serving %s", spec)
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	for sig := range signals {
		if sig == syscall.SIGTERM && *keepServing {
			log.Print("SIGTERM: serving on until SIGKILL")
			continue
		}
		return
	}
}

func env(name string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return "unknown-" + strings.ToLower(name)
}

// serveTCP answers each connection once: an HTTP request (a first line that
// a GET or HEAD starts) gets an HTTP/1.0 response, any other line the bare
// line, and a client that sends nothing (nc) the bare line after
// requestWait.
func serveTCP(l net.Listener, reply string) {
	for {
		conn, err := l.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go func() {
			defer conn.Close()
			_ = conn.SetReadDeadline(time.Now().Add(requestWait))
			line, _ := bufio.NewReader(conn).ReadString('\n')
			_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if strings.HasPrefix(line, "GET ") || strings.HasPrefix(line, "HEAD ") {
				fmt.Fprintf(conn, "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(reply), reply)
				return
			}
			_, _ = conn.Write([]byte(reply))
		}()
	}
}

// requestWait is how long a connection's first line is waited for. It
// was 300 ms: on a loaded 2-core CI machine an HTTP client's request line
// came later, got the bare line and a closed connection, and counted as a
// failed request (TestInstalledFromTheDocs: "readLoopPeekFailLocked",
// "malformed HTTP status code"). The testbed's probe sends a line of its
// own over TCP, so it never waits this long.
const requestWait = 3 * time.Second

func serveUDP(pc net.PacketConn, reply string) {
	buf := make([]byte, 2048)
	for {
		_, from, err := pc.ReadFrom(buf)
		if err != nil {
			log.Fatal(err)
		}
		_, _ = pc.WriteTo([]byte(reply), from)
	}
}
