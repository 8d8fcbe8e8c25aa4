package membership

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// TestClaimsRead: the ClusterProperties are read by name from
// about.k8s.io/v1alpha1; one that is missing (or whose API is not served)
// or may not be read claims nothing; any other failure is an error that
// names the property.
func TestClaimsRead(t *testing.T) {
	const prefix = "/apis/about.k8s.io/v1alpha1/clusterproperties/"
	for _, tc := range []struct {
		name      string
		answers   map[string]string // property name -> "<code> <body>"
		want      claims
		wantError string
	}{
		{name: "both", answers: map[string]string{
			"cluster.clusterset.k8s.io": `200 {"apiVersion":"about.k8s.io/v1alpha1","kind":"ClusterProperty","metadata":{"name":"cluster.clusterset.k8s.io"},"spec":{"value":"east.fleet-a"}}`,
			"clusterset.k8s.io":         `200 {"spec":{"value":"prod"}}`,
		}, want: claims{id: "east.fleet-a", clusterset: "prod"}},
		{name: "API not served", answers: map[string]string{}},
		{name: "may not be read", answers: map[string]string{
			"cluster.clusterset.k8s.io": `403 {"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`,
			"clusterset.k8s.io":         `200 {"spec":{"value":"prod"}}`,
		}, want: claims{clusterset: "prod"}},
		{name: "server error", answers: map[string]string{
			"cluster.clusterset.k8s.io": `500 {"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcd timeout","code":500}`,
		}, wantError: "read ClusterProperty cluster.clusterset.k8s.io"},
		{name: "not JSON", answers: map[string]string{"cluster.clusterset.k8s.io": `200 <html>`}, wantError: "read ClusterProperty cluster.clusterset.k8s.io"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				answer, ok := tc.answers[strings.TrimPrefix(r.URL.Path, prefix)]
				if !strings.HasPrefix(r.URL.Path, prefix) || !ok {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusNotFound)
					_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
					return
				}
				code, body, _ := strings.Cut(answer, " ")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(map[string]int{"200": 200, "403": 403, "500": 500}[code])
				_, _ = w.Write([]byte(body))
			}))
			defer srv.Close()
			check, err := newHealthCheck(&rest.Config{Host: srv.URL}, mcsAPIOf(Options{}))
			if err != nil {
				t.Fatal(err)
			}
			got, err := check.claims(t.Context())
			switch {
			case tc.wantError != "" && (err == nil || !strings.Contains(err.Error(), tc.wantError)):
				t.Errorf("claims: %+v, %v; want an error with %q", got, err, tc.wantError)
			case tc.wantError == "" && (err != nil || got != tc.want):
				t.Errorf("claims: %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestProbeSaysWhyItWasRefused: a member whose /readyz refuses the
// credentials is Forbidden, and the cause is the API server's own words
// (they were "unknown"); a refusal without an API Status still counts.
func TestProbeSaysWhyItWasRefused(t *testing.T) {
	for _, tc := range []struct {
		name, contentType, body string
		code                    int
		want                    State
		wantCause               string
	}{
		{"refused", "application/json", `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","message":"forbidden: User \"east\" cannot get path \"/readyz\": RBAC: clusterrole.rbac.authorization.k8s.io \"system:public-info-viewer\" not found","code":403}`, 403, Forbidden, `cannot get path "/readyz": RBAC`},
		{"401 without a Status", "text/plain", "Unauthorized", 401, Forbidden, "provide credentials"},
		{"not ready", "text/plain", "[-]etcd failed: reason withheld", 500, Unreachable, "etcd failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				w.WriteHeader(tc.code)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			check, err := newHealthCheck(&rest.Config{Host: srv.URL}, mcsAPIOf(Options{}))
			if err != nil {
				t.Fatal(err)
			}
			state, err := check.probe(t.Context())
			if state != tc.want || err == nil || !strings.Contains(err.Error(), tc.wantCause) {
				t.Errorf("probe: %s, %v; want %s with a cause saying %q", state, err, tc.want, tc.wantCause)
			}
		})
	}
}
