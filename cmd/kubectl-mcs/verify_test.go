package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/mcs-syncer/mcs-syncer/internal/verify"
)

func TestFromMembers(t *testing.T) {
	conns := []memberConn{{id: "east", rest: &rest.Config{}}, {id: "west"}, {id: "north", rest: &rest.Config{}}}
	for _, c := range []struct {
		from, want, err string
	}{
		{"", "east, north", ""},
		{"north", "north", ""},
		{"south", "", "--from south: no such member"},
		{"west", "", "--from west: it is read through the hub"},
	} {
		got, err := fromMembers(conns, c.from)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("--from %q: %v, want an error saying %q", c.from, err, c.err)
			}
			continue
		}
		if err != nil || memberIDs(got) != c.want {
			t.Errorf("--from %q: %q, %v; want %q", c.from, memberIDs(got), err, c.want)
		}
	}
}

// TestClientPod: the client Pod meets the restricted Pod Security
// Standard, ends itself after the command's timeout, carries the labels a
// cleanup selects, runs mcs-syncer's probe, and takes --overrides as a
// strategic merge patch (a node selector and a toleration added, the
// rest kept).
func TestClientPod(t *testing.T) {
	pod := clientPod("demo", "mcs-syncer:v1", []verify.Check{{ID: "dns", Lookup: "web.demo.svc.clusterset.local."}}, time.Minute)
	c := pod.Spec.Containers[0]
	sc := c.SecurityContext
	if !*pod.Spec.SecurityContext.RunAsNonRoot || pod.Spec.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
		*sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("the client Pod does not meet the restricted Pod Security Standard: %+v %+v", pod.Spec.SecurityContext, sc)
	}
	if *pod.Spec.ActiveDeadlineSeconds != 61 || pod.Spec.RestartPolicy != corev1.RestartPolicyNever || pod.Labels["app.kubernetes.io/name"] != "mcs-verify" {
		t.Errorf("deadline %d, restart %s, labels %v", *pod.Spec.ActiveDeadlineSeconds, pod.Spec.RestartPolicy, pod.Labels)
	}
	if c.Image != "mcs-syncer:v1" || c.Args[0] != verify.ProbeCommand || !strings.Contains(strings.Join(c.Args, " "), `"lookup":"web.demo.svc.clusterset.local."`) {
		t.Errorf("container %s %q", c.Image, c.Args)
	}
	got, err := patched(pod, []byte(`{"spec":{"nodeSelector":{"pool":"probes"},"tolerations":[{"key":"dedicated","operator":"Exists"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeSelector["pool"] != "probes" || len(got.Spec.Tolerations) != 1 || got.Spec.Containers[0].Image != "mcs-syncer:v1" || got.Namespace != "demo" {
		t.Errorf("patched: %+v", got.Spec)
	}
	if _, err := patched(pod, []byte(`{"spec":{"containers":"no"}}`)); err == nil {
		t.Error("a patch that breaks the Pod was taken")
	}
}

// TestSyncerImage: the client Pods run the image of the member's
// mcs-syncer; without one, the error says to pass --image.
func TestSyncerImage(t *testing.T) {
	ctx := context.Background()
	syncerPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "mcs-system", Name: "mcs-syncer-1", Labels: map[string]string{"app.kubernetes.io/name": "mcs-syncer"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "mcs-syncer", Image: "registry.example/mcs-syncer:v0.1.0"}}}}
	if got, err := syncerImage(ctx, fake.NewClientBuilder().WithScheme(scheme).WithObjects(syncerPod).Build()); err != nil || got != "registry.example/mcs-syncer:v0.1.0" {
		t.Errorf("image %q, %v", got, err)
	}
	if _, err := syncerImage(ctx, fake.NewClientBuilder().WithScheme(scheme).Build()); err == nil || !strings.Contains(err.Error(), "--image") {
		t.Errorf("no mcs-syncer Pod: %v, want an error naming --image", err)
	}
}

// TestVerifyRefusesBadInput: bad flags and arguments exit 2 with what is
// wrong, before any cluster is asked.
func TestVerifyRefusesBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"verify", "web"}, "want namespace/name"},
		{[]string{"verify", "--tries", "0"}, "--tries"},
		{[]string{"verify", "--overrides", "{nodeSelector"}, "--overrides: not JSON"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), c.args, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: exit %d, %s; want %d saying %q", c.args, code, stderr.String(), exitUsage, c.want)
		}
	}
}
