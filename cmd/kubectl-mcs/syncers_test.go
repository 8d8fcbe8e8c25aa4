package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/mcs-syncer/mcs-syncer/internal/membership"
)

// viewPods answers /members through pods/proxy with a view naming the
// Pod, and records the port asked.
type viewPods struct{ asked []string }

func (*viewPods) logs(context.Context, string, string) ([]byte, error) { return nil, nil }

func (v *viewPods) proxy(_ context.Context, ns, pod, port, path string, _ map[string]string) ([]byte, error) {
	v.asked = append(v.asked, pod+":"+port+path)
	return json.Marshal(membership.View{Cluster: "west", Version: pod, Leading: true})
}

// TestPodSyncers: each running mcs-syncer Pod of a member is read, on its
// probes port, through the API server; a Pod not running is not.
func TestPodSyncers(t *testing.T) {
	pod := func(name string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "mcs-system", Name: name, Labels: syncerPods},
			Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "mcs-syncer", Ports: []corev1.ContainerPort{{Name: "probes", ContainerPort: 9091}}}}},
			Status: corev1.PodStatus{Phase: phase}}
	}
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web-1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(pod("mcs-syncer-a", corev1.PodRunning), pod("mcs-syncer-b", corev1.PodPending), other).Build()
	pods := &viewPods{}
	syncers, err := podSyncers("west", c, pods)(t.Context())
	if err != nil || len(syncers) != 1 || syncers[0].Name != "west: mcs-system/mcs-syncer-a" {
		t.Fatalf("%v: %+v", err, syncers)
	}
	v, err := syncers[0].Read(t.Context())
	if err != nil || v.Version != "mcs-syncer-a" || !v.Leading || strings.Join(pods.asked, ",") != "mcs-syncer-a:9091/members" {
		t.Errorf("%v: %+v, asked %v", err, v, pods.asked)
	}
}

// TestAddrSyncer: --syncer reads /members at a probe address (host:port
// or URL); an mcs-syncer that serves none is an error that says so.
func TestAddrSyncer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/members" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(membership.View{Version: "v1", Leading: true, Members: []membership.MemberView{{ID: "east", Health: membership.HealthUp}}})
	}))
	defer srv.Close()
	for _, addr := range []string{srv.URL, strings.TrimPrefix(srv.URL, "http://"), srv.URL + "/"} {
		v, err := addrSyncer(addr).Read(t.Context())
		if err != nil || v.Version != "v1" || len(v.Members) != 1 {
			t.Errorf("%s: %v, %+v", addr, err, v)
		}
	}
	old := httptest.NewServer(http.NotFoundHandler())
	defer old.Close()
	if _, err := addrSyncer(old.URL).Read(t.Context()); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("no /members: %v", err)
	}
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>")) }))
	defer html.Close()
	if _, err := addrSyncer(html.URL).Read(t.Context()); err == nil || !strings.Contains(err.Error(), "not an mcs-syncer's view") {
		t.Errorf("not JSON: %v", err)
	}
}

// TestGatherSyncer: gather keeps what a --syncer's probes answer,
// /readyz's 503 included, and says what could not be read.
func TestGatherSyncer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/members":
			_, _ = w.Write([]byte(`{"leading":true}`))
		case "/readyz":
			if r.URL.Query().Has("verbose") {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte("[-]member west failed: …\n"))
			}
		}
	}))
	defer srv.Close()
	b := &bundle{files: map[string][]byte{}}
	b.syncer(t.Context(), srv.URL)
	dir := "syncers/" + strings.NewReplacer("://", "_", "/", "_", ":", "_").Replace(srv.URL) + "/"
	if got := string(b.files[dir+"members.json"]); got != `{"leading":true}` {
		t.Errorf("members.json: %q (files %v)", got, keysOf(b.files))
	}
	if got := string(b.files[dir+"readyz"]); !strings.Contains(got, "503") || !strings.Contains(got, "member west failed") {
		t.Errorf("readyz: %q", got)
	}
	srv.Close()
	b = &bundle{files: map[string][]byte{}}
	b.syncer(t.Context(), srv.URL)
	if got := string(b.files[dir+"errors.txt"]); !strings.Contains(got, "members.json:") || !strings.Contains(got, "readyz:") {
		t.Errorf("errors.txt: %q", got)
	}
}

func keysOf(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
