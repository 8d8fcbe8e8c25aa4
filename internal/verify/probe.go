package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"time"
)

// Probe runs checks one after the other, each try within timeout, and
// writes each one's Result to w as a line of JSON: what `mcs-syncer probe`
// does in the client Pod. Lookups use Go's own resolver, which reads the
// Pod's /etc/resolv.conf as any client in it would.
func Probe(ctx context.Context, checks []Check, timeout time.Duration, w io.Writer) error {
	enc := json.NewEncoder(w)
	for _, c := range checks {
		res := Result{ID: c.ID}
		for range max(c.Tries, 1) {
			tryCtx, cancel := context.WithTimeout(ctx, timeout)
			addrs, err := try(tryCtx, c)
			cancel()
			if err != nil {
				res.Failed++
				res.Error = err.Error()
				continue
			}
			res.Answered++
			res.Addresses = addrs
		}
		if err := enc.Encode(res); err != nil {
			return err
		}
	}
	return nil
}

// try runs one try of c: a lookup's addresses, sorted, or a connection
// accepted and closed.
func try(ctx context.Context, c Check) ([]string, error) {
	if c.Lookup != "" {
		ips, err := net.DefaultResolver.LookupIPAddr(ctx, c.Lookup)
		if err != nil {
			return nil, err
		}
		var addrs []string
		for _, ip := range ips {
			addrs = append(addrs, ip.IP.String())
		}
		slices.Sort(addrs)
		return addrs, nil
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", c.Dial)
	if err != nil {
		return nil, err
	}
	return nil, conn.Close()
}

// ReadResults reads Probe's output: its results by check ID. A line that
// is no result (the Pod's runtime may add some) is skipped.
func ReadResults(out []byte) map[string]Result {
	results := map[string]Result{}
	for line := range bytes.Lines(out) {
		var r Result
		if json.Unmarshal(line, &r) == nil && r.ID != "" {
			results[r.ID] = r
		}
	}
	return results
}

// ProbeCommand is the name of mcs-syncer's subcommand that runs Probe
// (`mcs-syncer probe -checks JSON [-timeout D]`): the client Pod runs
// mcs-syncer's own image, which every member that runs mcs-syncer has.
const ProbeCommand = "probe"

// RunProbe runs the probe subcommand with args and returns its exit
// code: 0 when every check ran (whatever it found: Evaluate judges), 2
// for bad arguments.
func RunProbe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mcs-syncer "+ProbeCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	checksJSON := fs.String("checks", "", "the checks, a JSON array of {id, lookup | dial, tries}")
	timeout := fs.Duration("timeout", 3*time.Second, "how long one try may take")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var checks []Check
	if err := json.Unmarshal([]byte(*checksJSON), &checks); err != nil || len(checks) == 0 {
		fmt.Fprintf(stderr, "mcs-syncer %s: -checks: want a JSON array of checks (%v)\n", ProbeCommand, err)
		return 2
	}
	if err := Probe(ctx, checks, *timeout, stdout); err != nil {
		fmt.Fprintf(stderr, "mcs-syncer %s: %v\n", ProbeCommand, err)
		return 1
	}
	return 0
}
