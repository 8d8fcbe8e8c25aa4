package verify

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Check is one thing the client Pod does: resolve Lookup (its A and AAAA
// answers), or connect to Dial (host:port, TCP) Tries times, a new
// connection each.
type Check struct {
	ID     string `json:"id"`
	Lookup string `json:"lookup,omitempty"`
	Dial   string `json:"dial,omitempty"`
	Tries  int    `json:"tries,omitempty"`
}

// Result is what a Check found: how many tries were answered (a lookup
// with addresses, a connection accepted) and failed, the addresses a
// lookup returned, and the last failure.
type Result struct {
	ID        string   `json:"id"`
	Answered  int      `json:"answered"`
	Failed    int      `json:"failed"`
	Addresses []string `json:"addresses,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// Target is an imported Service as one consumer cluster holds it.
type Target struct {
	// Consumer is the cluster the client Pod runs in.
	Consumer  string
	Namespace string
	Name      string
	Headless  bool
	// IPs are the ServiceImport's clusterset IPs (none when headless).
	IPs []string
	// Ports are its TCP ports.
	Ports []int32
	// Exporters are the clusters the ServiceImport's status lists.
	Exporters []string
	// Endpoints are the ready endpoints' addresses imported from each
	// source cluster, by port number: an endpoint serves the ports of
	// its slice only.
	Endpoints map[string]map[int32][]string
}

// TargetOf reads a Target from a consumer's ServiceImport and its
// imported EndpointSlices (those labelled with its name; others are left
// out).
func TargetOf(consumer string, si *mcsv1beta1.ServiceImport, slices []discoveryv1.EndpointSlice) Target {
	t := Target{Consumer: consumer, Namespace: si.Namespace, Name: si.Name,
		Headless: si.Spec.Type == mcsv1beta1.Headless, IPs: si.Spec.IPs,
		Endpoints: map[string]map[int32][]string{}}
	for _, p := range si.Spec.Ports {
		if p.Protocol == "" || p.Protocol == corev1.ProtocolTCP {
			t.Ports = append(t.Ports, p.Port)
		}
	}
	for _, c := range si.Status.Clusters {
		t.Exporters = append(t.Exporters, c.Cluster)
	}
	for i := range slices {
		if slices[i].Labels[mcsv1beta1.LabelServiceName] == si.Name {
			t.addSlice(&slices[i])
		}
	}
	return t
}

// addSlice adds the ready endpoints of an imported slice on its TCP
// ports; a slice without a source cluster is none of an import's.
func (t *Target) addSlice(s *discoveryv1.EndpointSlice) {
	source := s.Labels[mcsv1beta1.LabelSourceCluster]
	if source == "" {
		return
	}
	var ready []string
	for _, e := range s.Endpoints {
		if e.Conditions.Ready == nil || *e.Conditions.Ready {
			ready = append(ready, e.Addresses...)
		}
	}
	for _, p := range s.Ports {
		if p.Port == nil || (p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP) || len(ready) == 0 {
			continue
		}
		if t.Endpoints[source] == nil {
			t.Endpoints[source] = map[int32][]string{}
		}
		t.Endpoints[source][*p.Port] = append(t.Endpoints[source][*p.Port], ready...)
	}
}

// DNSName is the clusterset name of the Service, absolute (no search
// list).
func (t Target) DNSName() string {
	return t.Name + "." + t.Namespace + ".svc.clusterset.local."
}

// Plan returns the checks of t: its name resolved once; each clusterset
// IP and TCP port connected to tries times; and up to perCluster of each
// source cluster's endpoints connected to once on each of their ports.
func (t Target) Plan(tries, perCluster int) []Check {
	checks := []Check{{ID: "dns", Lookup: t.DNSName(), Tries: 1}}
	for _, ip := range t.IPs {
		for _, port := range t.Ports {
			dial := hostPort(ip, port)
			checks = append(checks, Check{ID: "ip " + dial, Dial: dial, Tries: tries})
		}
	}
	for _, cluster := range slices.Sorted(maps.Keys(t.Endpoints)) {
		for _, port := range slices.Sorted(maps.Keys(t.Endpoints[cluster])) {
			for _, addr := range first(t.Endpoints[cluster][port], perCluster) {
				dial := hostPort(addr, port)
				checks = append(checks, Check{ID: cluster + " " + dial, Dial: dial, Tries: 1})
			}
		}
	}
	return checks
}

func hostPort(addr string, port int32) string {
	return net.JoinHostPort(addr, strconv.Itoa(int(port)))
}

// first returns the first n of the sorted, distinct addresses.
func first(addrs []string, n int) []string {
	addrs = slices.Clone(addrs)
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	return addrs[:min(n, len(addrs))]
}

// Report is what the checks of one Target found.
type Report struct {
	Consumer  string `json:"consumer"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Headless  bool   `json:"headless,omitempty"`
	// DNS is what the clusterset name resolved to.
	DNS Line `json:"dns"`
	// IPs are the clusterset IP's ports, one line each.
	IPs []Line `json:"ips,omitempty"`
	// Clusters are the exporting clusters (and any other source of
	// imported endpoints), one line each.
	Clusters []ClusterLine `json:"clusters"`
	// Answered are the clusters at least one of whose endpoints answered.
	Answered []string `json:"answered"`
	// Exporters are the clusters that export the Service.
	Exporters []string `json:"exporters"`
	// Problems say what failed, one sentence each; none: verified.
	Problems []string `json:"problems,omitempty"`
}

// Line is one check's outcome as the report says it.
type Line struct {
	What     string `json:"what"`
	Answered int    `json:"answered"`
	Tries    int    `json:"tries"`
	Detail   string `json:"detail,omitempty"`
}

// ClusterLine is what one source cluster's endpoints answered.
type ClusterLine struct {
	Cluster   string `json:"cluster"`
	Exports   bool   `json:"exports"`
	Endpoints int    `json:"endpoints"`
	Tried     int    `json:"tried"`
	Answered  int    `json:"answered"`
	Detail    string `json:"detail,omitempty"`
}

// noResult is the error of a check the client Pod printed no result of.
const noResult = "no result: the client Pod did not run this check"

// Evaluate reads the results of t's checks (by ID; a check without a
// result failed) into its report.
func Evaluate(t Target, checks []Check, results map[string]Result) Report {
	r := Report{Consumer: t.Consumer, Namespace: t.Namespace, Name: t.Name, Headless: t.Headless,
		Exporters: slices.Sorted(slices.Values(t.Exporters)), Answered: []string{}}
	if r.Exporters == nil {
		r.Exporters = []string{}
	}
	dns, ran := results["dns"]
	if !ran {
		dns = Result{ID: "dns", Failed: 1, Error: noResult}
	}
	r.evaluateDNS(t, dns)
	clusters := map[string]*ClusterLine{}
	for _, c := range t.Exporters {
		clusters[c] = &ClusterLine{Cluster: c, Exports: true}
	}
	for _, c := range checks {
		res, ran := results[c.ID]
		if !ran {
			res = Result{ID: c.ID, Failed: c.Tries, Error: noResult}
		}
		switch kind, target, _ := strings.Cut(c.ID, " "); kind {
		case "dns":
		case "ip":
			r.addIP(t, target, c.Tries, res)
		default:
			cl := clusters[kind]
			if cl == nil {
				cl = &ClusterLine{Cluster: kind}
				clusters[kind] = cl
			}
			cl.add(target, res)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(clusters)) {
		r.addCluster(t, clusters[name])
	}
	return r
}

// addIP adds the line of one clusterset IP and port.
func (r *Report) addIP(t Target, target string, tries int, res Result) {
	line := Line{What: "clusterset IP " + target, Answered: res.Answered, Tries: tries}
	if res.Failed > 0 {
		line.Detail = res.Error
		r.Problems = append(r.Problems, fmt.Sprintf("%s: clusterset IP %s: %d of %d connections failed: %s",
			t.Consumer, target, res.Failed, tries, res.Error))
	}
	r.IPs = append(r.IPs, line)
}

// add counts one endpoint's connection.
func (cl *ClusterLine) add(target string, res Result) {
	cl.Tried++
	if res.Answered > 0 {
		cl.Answered++
	} else if cl.Detail == "" {
		cl.Detail = target + ": " + res.Error
	}
}

// addCluster adds a source cluster's line, and what it failed.
func (r *Report) addCluster(t Target, cl *ClusterLine) {
	var addrs []string
	for _, byPort := range t.Endpoints[cl.Cluster] {
		addrs = append(addrs, byPort...)
	}
	cl.Endpoints = len(first(addrs, len(addrs)))
	r.Clusters = append(r.Clusters, *cl)
	switch {
	case cl.Answered > 0:
		r.Answered = append(r.Answered, cl.Cluster)
	case cl.Tried == 0 && cl.Exports:
		r.Problems = append(r.Problems, fmt.Sprintf("%s: %s exports %s/%s but %s holds no ready endpoint of it on a TCP port",
			t.Consumer, cl.Cluster, t.Namespace, t.Name, t.Consumer))
	default:
		r.Problems = append(r.Problems, fmt.Sprintf("%s: none of the %d endpoints of %s tried answered (%s)", t.Consumer, cl.Tried, cl.Cluster, cl.Detail))
	}
	if cl.Answered > 0 && cl.Answered < cl.Tried {
		r.Problems = append(r.Problems, fmt.Sprintf("%s: %d of the %d endpoints of %s tried did not answer (%s)",
			t.Consumer, cl.Tried-cl.Answered, cl.Tried, cl.Cluster, cl.Detail))
	}
}

// evaluateDNS: the name of a ClusterSetIP Service resolves to its
// clusterset IPs; that of a headless one to addresses of its imported
// endpoints, at least one.
func (r *Report) evaluateDNS(t Target, res Result) {
	r.DNS = Line{What: t.DNSName(), Answered: res.Answered, Tries: 1, Detail: strings.Join(res.Addresses, ", ")}
	if res.Answered == 0 {
		r.DNS.Detail = res.Error
		r.Problems = append(r.Problems, fmt.Sprintf("%s: %s did not resolve: %s", t.Consumer, t.DNSName(), res.Error))
		return
	}
	want := map[string]bool{}
	if t.Headless {
		for _, byPort := range t.Endpoints {
			for _, addrs := range byPort {
				for _, a := range addrs {
					want[a] = true
				}
			}
		}
	} else {
		for _, ip := range t.IPs {
			want[ip] = true
		}
	}
	var unknown []string
	for _, a := range res.Addresses {
		if !want[a] {
			unknown = append(unknown, a)
		}
	}
	missing := !t.Headless && len(res.Addresses) != len(want)
	if len(unknown) > 0 || missing {
		what := "its clusterset IPs " + strings.Join(t.IPs, ", ")
		if t.Headless {
			what = "addresses of its imported endpoints"
		}
		r.Problems = append(r.Problems, fmt.Sprintf("%s: %s resolved to %s, want %s", t.Consumer, t.DNSName(),
			strings.Join(res.Addresses, ", "), what))
	}
}
