package verify

import (
	"bytes"
	"context"
	"net"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func slice(source string, port int32, proto corev1.Protocol, ready bool, addrs ...string) discoveryv1.EndpointSlice {
	s := discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web-" + source, Labels: map[string]string{
			mcsv1beta1.LabelServiceName: "web", mcsv1beta1.LabelSourceCluster: source}},
		Ports: []discoveryv1.EndpointPort{{Port: ptr.To(port), Protocol: ptr.To(proto)}},
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}})
	}
	return s
}

func serviceImport(typ mcsv1beta1.ServiceImportType, ips []string, clusters ...string) *mcsv1beta1.ServiceImport {
	si := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: typ, IPs: ips, Ports: []mcsv1beta1.ServicePort{
			{Port: 80, Protocol: corev1.ProtocolTCP}, {Port: 53, Protocol: corev1.ProtocolUDP}}},
	}
	for _, c := range clusters {
		si.Status.Clusters = append(si.Status.Clusters, mcsv1beta1.ClusterStatus{Cluster: c})
	}
	return si
}

func TestTargetOfAndPlan(t *testing.T) {
	si := serviceImport(mcsv1beta1.ClusterSetIP, []string{"10.96.0.10"}, "east", "west")
	other := slice("east", 80, corev1.ProtocolTCP, true, "10.1.0.9")
	other.Labels[mcsv1beta1.LabelServiceName] = "api"
	target := TargetOf("north", si, []discoveryv1.EndpointSlice{
		slice("east", 80, corev1.ProtocolTCP, true, "10.1.0.5", "10.1.0.4", "10.1.0.3", "10.1.0.2"),
		slice("east", 80, corev1.ProtocolTCP, false, "10.1.0.99"), // not ready: never tried
		slice("west", 53, corev1.ProtocolUDP, true, "10.2.0.5"),   // UDP: no answer to count on
		other,
	})
	if !slices.Equal(target.Ports, []int32{80}) || len(target.Endpoints["west"]) != 0 || len(target.Endpoints["east"][80]) != 4 {
		t.Fatalf("target %+v: want TCP port 80 only, east's 4 ready endpoints, none of west's UDP ones", target)
	}
	var ids []string
	for _, c := range target.Plan(5, 3) {
		ids = append(ids, c.ID+"="+c.Lookup+c.Dial)
	}
	want := []string{
		"dns=web.demo.svc.clusterset.local.",
		"ip 10.96.0.10:80=10.96.0.10:80",
		"east 10.1.0.2:80=10.1.0.2:80", "east 10.1.0.3:80=10.1.0.3:80", "east 10.1.0.4:80=10.1.0.4:80",
	}
	if !slices.Equal(ids, want) {
		t.Errorf("plan %q, want %q", ids, want)
	}
}

func TestEvaluate(t *testing.T) {
	setIP := serviceImport(mcsv1beta1.ClusterSetIP, []string{"10.96.0.10"}, "east", "west")
	both := []discoveryv1.EndpointSlice{slice("east", 80, corev1.ProtocolTCP, true, "10.1.0.2"), slice("west", 80, corev1.ProtocolTCP, true, "10.2.0.2")}
	allAnswer := func(checks []Check) map[string]Result {
		out := map[string]Result{}
		for _, c := range checks {
			r := Result{ID: c.ID, Answered: c.Tries}
			if c.Lookup != "" {
				r.Addresses = []string{"10.96.0.10"}
			}
			out[c.ID] = r
		}
		return out
	}
	for _, c := range []struct {
		name     string
		si       *mcsv1beta1.ServiceImport
		slices   []discoveryv1.EndpointSlice
		results  func([]Check) map[string]Result
		answered []string
		problems []string
	}{
		{"every exporter answers", setIP, both, allAnswer, []string{"east", "west"}, nil},
		{"west exports with no endpoint", setIP, both[:1], allAnswer, []string{"east"},
			[]string{"north: west exports demo/web but north holds no ready endpoint of it on a TCP port"}},
		{"west's endpoint does not answer", setIP, both, func(checks []Check) map[string]Result {
			out := allAnswer(checks)
			out["west 10.2.0.2:80"] = Result{ID: "west 10.2.0.2:80", Failed: 1, Error: "i/o timeout"}
			return out
		}, []string{"east"}, []string{"north: none of the 1 endpoints of west tried answered (10.2.0.2:80: i/o timeout)"}},
		{"the clusterset IP fails and the name resolves elsewhere", setIP, both, func(checks []Check) map[string]Result {
			out := allAnswer(checks)
			out["dns"] = Result{ID: "dns", Answered: 1, Addresses: []string{"10.96.0.99"}}
			out["ip 10.96.0.10:80"] = Result{ID: "ip 10.96.0.10:80", Answered: 3, Failed: 2, Error: "connection refused"}
			return out
		}, []string{"east", "west"}, []string{
			"north: web.demo.svc.clusterset.local. resolved to 10.96.0.99, want its clusterset IPs 10.96.0.10",
			"north: clusterset IP 10.96.0.10:80: 2 of 5 connections failed: connection refused"}},
		{"no result at all (the Pod ran nothing)", setIP, both, func([]Check) map[string]Result { return nil }, []string{}, []string{
			"north: web.demo.svc.clusterset.local. did not resolve: no result: the client Pod did not run this check",
			"north: clusterset IP 10.96.0.10:80: 5 of 5 connections failed: no result: the client Pod did not run this check",
			"north: none of the 1 endpoints of east tried answered (10.1.0.2:80: no result: the client Pod did not run this check)",
			"north: none of the 1 endpoints of west tried answered (10.2.0.2:80: no result: the client Pod did not run this check)"}},
		{"headless: the name resolves to the endpoints", serviceImport(mcsv1beta1.Headless, nil, "east", "west"), both, func(checks []Check) map[string]Result {
			out := allAnswer(checks)
			out["dns"] = Result{ID: "dns", Answered: 1, Addresses: []string{"10.1.0.2", "10.2.0.2"}}
			return out
		}, []string{"east", "west"}, nil},
		{"headless: the name resolves to an address of no endpoint", serviceImport(mcsv1beta1.Headless, nil, "east", "west"), both, allAnswer,
			[]string{"east", "west"}, []string{"north: web.demo.svc.clusterset.local. resolved to 10.96.0.10, want addresses of its imported endpoints"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			target := TargetOf("north", c.si, c.slices)
			checks := target.Plan(5, 3)
			r := Evaluate(target, checks, c.results(checks))
			if !slices.Equal(r.Answered, c.answered) {
				t.Errorf("answered %q, want %q", r.Answered, c.answered)
			}
			if !slices.Equal(r.Problems, c.problems) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(r.Problems, "\n"), strings.Join(c.problems, "\n"))
			}
			if !slices.Equal(r.Exporters, []string{"east", "west"}) {
				t.Errorf("exporters %q", r.Exporters)
			}
		})
	}
}

// TestProbe runs real checks: a connection to a listening port, one to a
// closed port, a lookup of a name that cannot exist; RunProbe prints each
// result as a line of JSON that ReadResults reads back.
func TestProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	defer l.Close()
	checks := `[{"id":"open","dial":"` + l.Addr().String() + `","tries":3},{"id":"closed","dial":"` + closedAddr + `","tries":2},` +
		`{"id":"dns","lookup":"no-such-name.invalid.","tries":1}]`
	var stdout, stderr bytes.Buffer
	if code := RunProbe(context.Background(), []string{"-timeout", "2s", "-checks", checks}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	got := ReadResults(append([]byte("a line of the runtime's\n"), stdout.Bytes()...))
	if r := got["open"]; r.Answered != 3 || r.Failed != 0 {
		t.Errorf("open port: %+v", r)
	}
	if r := got["closed"]; r.Answered != 0 || r.Failed != 2 || !strings.Contains(r.Error, "refused") {
		t.Errorf("closed port: %+v", r)
	}
	if r := got["dns"]; r.Answered != 0 || r.Failed != 1 || r.Error == "" {
		t.Errorf("lookup of no name: %+v", r)
	}
	for _, bad := range [][]string{{"-checks", "not json"}, {"-checks", "[]"}, {"-timeout", "soon"}} {
		if code := RunProbe(context.Background(), bad, &stdout, &stderr); code != 2 {
			t.Errorf("probe %q: exit %d, want 2", bad, code)
		}
	}
}
