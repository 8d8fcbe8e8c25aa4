package diffkcm

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMirroringStuckReadsTheLastSync: only a key whose last finished sync
// failed on the recycleSlices bug is stuck; a later sync that starts (and
// logs no error) is not, nor is another key, nor another error.
func TestMirroringStuckReadsTheLastSync(t *testing.T) {
	const (
		start     = `I1124 16:34:42.8 1 endpointslicemirroring_controller.go:297] "syncEndpoints" key="diff/m"` + "\n"
		recycled  = `I1124 16:34:42.9 1 endpointslicemirroring_controller.go:278] "Error mirroring EndpointSlices for Endpoints, retrying" key="diff/m" err="failed to create EndpointSlice for Endpoints diff/m: endpointslices.discovery.k8s.io \"m-2vf8r\" already exists, the server was not able to generate a unique name for the object"` + "\n"
		other     = `I1124 16:34:43.0 1 endpointslicemirroring_controller.go:278] "Error mirroring EndpointSlices for Endpoints, retrying" key="diff/m" err="EndpointSlice informer cache is out of date"` + "\n"
		elsewhere = `I1124 16:34:43.1 1 endpointslicemirroring_controller.go:297] "syncEndpoints" key="diff/m2"` + "\n"
	)
	for _, tc := range []struct {
		log  string
		want bool
	}{
		{"", false},
		{start, false},
		{start + recycled, true},
		{start + recycled + elsewhere, true},
		{start + recycled + start, false},
		{start + recycled + start + other, false},
		{start + other + start + recycled, true},
	} {
		path := filepath.Join(t.TempDir(), "kube-controller-manager.log")
		if err := os.WriteFile(path, []byte(tc.log), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := mirroringStuck(path, "diff/m"); got != tc.want {
			t.Errorf("log\n%s: stuck %v, want %v", tc.log, got, tc.want)
		}
	}
	if mirroringStuck(filepath.Join(t.TempDir(), "missing.log"), "diff/m") {
		t.Error("a missing log explains a difference")
	}
}
