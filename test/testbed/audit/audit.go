package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Policy logs, at the Metadata level, every write to the kinds
// mcs-syncer writes, Leases included (with --leader-elect, its renewals are
// writes); nothing else (the nodes' heartbeat Leases would only make the
// logs long).
const Policy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  namespaces: ["kube-node-lease"]
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
  resources:
  - group: ""
    resources: ["services", "events", "namespaces"]
  - group: "discovery.k8s.io"
    resources: ["endpointslices"]
  - group: "events.k8s.io"
    resources: ["events"]
  - group: "multicluster.x-k8s.io"
    resources: ["serviceimports", "serviceimports/status", "serviceexports", "serviceexports/status"]
  - group: "coordination.k8s.io"
    resources: ["leases"]
  - group: "mcs-syncer.io"
    resources: ["publishedexports"]
- level: None
`

// syncerUserAgent starts the user agent of every request mcs-syncer makes
// (client-go's default agent starts with the binary's name).
const syncerUserAgent = "mcs-syncer/"

func WritePolicy(dir string) (string, error) {
	path := filepath.Join(dir, "audit-policy.yaml")
	return path, os.WriteFile(path, []byte(Policy), 0o644)
}

// event is the part of an audit.k8s.io/v1 Event the bench reads.
type event struct {
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	Received time.Time `json:"requestReceivedTimestamp"`
	// Response is the API server's answer: a write it refused (a 409 for
	// a stale resourceVersion, a 403 for a quota) is a try all the same.
	Response *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// Writes are writes by kind ("endpointslices create",
// "serviceimports/status update", ...).
type Writes map[string]int

// isLease tells the renewals, which are reported apart: the leader
// election's Lease writes (the price of having a standby) and the
// markers' heartbeats (the price of telling a stopped member from an
// unreachable hub), not the work.
func isLease(kind string) bool {
	return strings.HasPrefix(kind, "leases ") || strings.HasPrefix(kind, heartbeatKind) || strings.HasPrefix(kind, leaderEventKind)
}

// leaderEventKind is the kind counted for the event the leader election
// records on its Lease when a replica becomes leader (named
// "<Lease>.<suffix>", and mcs-syncer's Lease is mcs-syncer-<clusterset>):
// part of a handover, like the Lease's own writes.
const leaderEventKind = "leader election events "

// heartbeatKind is the kind counted for a marker's renewal: an update of
// a PublishedExport named after its cluster (a publication's name has
// dots: <cluster>.<namespace>.<name>).
const heartbeatKind = "heartbeats "

// total counts the writes, Leases apart.
func (w Writes) Total() int {
	n := 0
	for k, c := range w {
		if !isLease(k) {
			n += c
		}
	}
	return n
}

// leases counts the Lease writes.
func (w Writes) Leases() int {
	n := 0
	for k, c := range w {
		if isLease(k) {
			n += c
		}
	}
	return n
}

// String lists the kinds, most written first, then the Lease writes apart.
func (w Writes) String() string {
	if w.Total() == 0 && w.Leases() == 0 {
		return "none"
	}
	keys := make([]string, 0, len(w))
	for k := range w {
		if !isLease(k) {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return w[keys[i]] > w[keys[j]] || (w[keys[i]] == w[keys[j]] && keys[i] < keys[j]) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", w[k], k)
	}
	text := strings.Join(parts, ", ")
	if text == "" {
		text = "none"
	}
	if n := w.Leases(); n > 0 {
		text += fmt.Sprintf("; besides, %d renewals (leader election's Leases and events, markers' heartbeats)", n)
	}
	return text
}

// CountWrites counts the writes mcs-syncer's user agent made, received in
// [from, to), in the audit logs given.
func CountWrites(logs []string, from, to time.Time) (Writes, error) {
	counts := Writes{}
	err := eachWrite(logs, from, to, func(kind string, _ event) { counts[kind]++ })
	return counts, err
}

// ListWrites lists the writes CountWrites counts, renewals apart, one
// "<kind> <verb> <namespace>/<name> at <time> (<code>)" each, <code> the
// HTTP status of the API server's answer: what a count that should be 0
// was.
func ListWrites(logs []string, from, to time.Time) ([]string, error) {
	var list []string
	err := eachWrite(logs, from, to, func(kind string, e event) {
		if !isLease(kind) {
			code := 0
			if e.Response != nil {
				code = e.Response.Code
			}
			list = append(list, fmt.Sprintf("%s %s/%s at %s (%d)", kind, e.ObjectRef.Namespace, e.ObjectRef.Name, e.Received.Format(time.RFC3339Nano), code))
		}
	})
	return list, err
}

// eachWrite calls write with the kind ("<resource>[/<subresource>]
// <verb>", or a renewal's kind) of every write mcs-syncer's user agent
// made, received in [from, to), in the audit logs given.
func eachWrite(logs []string, from, to time.Time, write func(kind string, e event)) error {
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if !strings.Contains(string(line), syncerUserAgent) {
				continue
			}
			var e event
			if err := json.Unmarshal(line, &e); err != nil {
				f.Close()
				return fmt.Errorf("%s: %w", path, err)
			}
			if !strings.HasPrefix(e.UserAgent, syncerUserAgent) || e.ObjectRef == nil || e.Received.Before(from) || !e.Received.Before(to) {
				continue
			}
			kind := e.ObjectRef.Resource
			if e.ObjectRef.Subresource != "" {
				kind += "/" + e.ObjectRef.Subresource
			}
			if kind == "publishedexports" && e.Verb == "update" && !strings.Contains(e.ObjectRef.Name, ".") {
				kind = strings.TrimSpace(heartbeatKind)
			}
			if kind == "events" && strings.HasPrefix(e.ObjectRef.Name, "mcs-syncer-") {
				kind = strings.TrimSpace(leaderEventKind)
			}
			write(kind+" "+e.Verb, e)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return nil
}
