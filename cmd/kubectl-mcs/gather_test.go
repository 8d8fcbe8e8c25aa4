package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// fakePods serves a log and proxied answers, and fails west-b's metrics.
type fakePods struct{ asked []string }

func (f *fakePods) logs(_ context.Context, ns, pod string) ([]byte, error) {
	return []byte("log of " + ns + "/" + pod + "\n"), nil
}

func (f *fakePods) proxy(_ context.Context, ns, pod, port, path string, params map[string]string) ([]byte, error) {
	f.asked = append(f.asked, pod+":"+port+path+"?verbose="+params["verbose"])
	if pod == "mcs-syncer-b" && path == "/metrics" {
		return nil, errors.New("connection refused")
	}
	return []byte("answer of " + path), nil
}

// TestGatherBundle: the bundle holds a member's MCS objects and events,
// and each mcs-syncer Pod's log, metrics and readyz (asked on the ports its
// container names); what could not be read is in errors.txt.
func TestGatherBundle(t *testing.T) {
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "mcs-system", Name: name, Labels: map[string]string{"app.kubernetes.io/name": "mcs-syncer"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "mcs-syncer", Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9090}, {Name: "probes", ContainerPort: 9091}}}}}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"}},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web.1"}, InvolvedObject: corev1.ObjectReference{Kind: "ServiceExport", Name: "web"}, Reason: "PortConflict"},
		&corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "pod.1"}, InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "web-1"}, Reason: "Pulled"},
		pod("mcs-syncer-a"), pod("mcs-syncer-b"),
	).WithIndex(&corev1.Event{}, "involvedObject.kind", func(o client.Object) []string { return []string{o.(*corev1.Event).InvolvedObject.Kind} }).Build()
	b := &bundle{files: map[string][]byte{}}
	pods := &fakePods{}
	b.member(t.Context(), "west", c, pods)
	path := filepath.Join(t.TempDir(), "bundle.tar.gz")
	if err := b.write(path); err != nil {
		t.Fatal(err)
	}
	files := readBundle(t, path)
	for name, part := range map[string]string{
		"west/serviceexports.yaml":                        "name: web",
		"west/serviceimports.yaml":                        "kind: ServiceImportList",
		"west/endpointslices-imported.yaml":               "kind: EndpointSliceList",
		"west/events.yaml":                                "reason: PortConflict",
		"west/mcs-syncer/mcs-system_mcs-syncer-a.log":     "log of mcs-system/mcs-syncer-a",
		"west/mcs-syncer/mcs-system_mcs-syncer-a.metrics": "answer of /metrics",
		"west/mcs-syncer/mcs-system_mcs-syncer-b.readyz":  "answer of /readyz",
		"west/errors.txt":                                 "mcs-system_mcs-syncer-b.metrics: connection refused",
	} {
		if !strings.Contains(files[name], part) {
			t.Errorf("%s: %q, want it to hold %q", name, files[name], part)
		}
	}
	if strings.Contains(files["west/events.yaml"], "Pulled") {
		t.Error("events.yaml holds an event of a Pod")
	}
	if !slices.Contains(pods.asked, "mcs-syncer-a:9091/readyz?verbose=true") || !slices.Contains(pods.asked, "mcs-syncer-a:9090/metrics?verbose=") {
		t.Errorf("asked %v: not the container's ports", pods.asked)
	}
}

func readBundle(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = string(raw)
	}
}
