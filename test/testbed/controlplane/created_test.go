package controlplane_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/controlplane"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
)

// TestCreateStartsAnExitedAPIServerAgain: kwokctl create returns success
// even when its wait for a ready cluster ran out, so an API server that
// exited before it was ever ready (CI: the first request after create was
// refused) must be started again by Create's own wait, which returns once
// the server answers.
func TestCreateStartsAnExitedAPIServerAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("-short (make unit): testbeds start in make test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bed, err := testbed.Start(ctx, testbed.Options{Clusters: []string{"solo"}, StateDir: t.TempDir(), TeardownOnExit: true})
	if errors.Is(err, testbed.ErrNoBinaries) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bed.Stop(context.Background()) })
	cp := bed.Clusters[0].ControlPlane
	pids, err := cp.Pids()
	if err != nil {
		t.Fatal(err)
	}
	exited := pids["kube-apiserver"]
	// As a crash leaves it: the process gone, its pid file in place.
	if err := syscall.Kill(exited, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := host.PollUntil(ctx, time.Minute, func(context.Context) (bool, error) { return !host.ProcessAlive(exited), nil }); err != nil {
		t.Fatalf("kube-apiserver %d did not exit: %v", exited, err)
	}
	if err := controlplane.WaitCreated(cp, ctx); err != nil {
		t.Fatal(err)
	}
	if pids, err = cp.Pids(); err != nil {
		t.Fatal(err)
	}
	if pid := pids["kube-apiserver"]; pid == 0 || pid == exited {
		t.Fatalf("kube-apiserver pid %d after the wait, %d before: not started again", pid, exited)
	}
	kube, err := cp.Kubernetes()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Get(ctx, controlplane.SystemNamespace, metav1.GetOptions{}); err != nil {
		t.Fatalf("the API server started again does not serve what it held: %v", err)
	}
}
