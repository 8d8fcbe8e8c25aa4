package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// olderMCSAPIReleases are the mcs-api releases whose own CRDs a member
// runs on in TestOlderMCSAPIReleases: the first, and the last before
// v1beta1 (v0.5.0).
var olderMCSAPIReleases = []string{"v0.1.0", "v0.4.0"}

// TestOlderMCSAPIReleases (hub mode): west runs on the CRDs that an older
// mcs-api release shipped, read from that release's module as `go mod
// download` fetches it (not today's CRDs served in v1alpha1 only, as
// TestCRDVersionSkew has them): west's ServiceExport reaches north, and
// east's export reaches west as a ServiceImport that owns its derived
// Service and holds its clusterset IP. West gets today's CRDs back after.
func TestOlderMCSAPIReleases(t *testing.T) {
	needTestbed(t)
	exclusive(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	westBed := bed.Cluster("west")
	t.Cleanup(func() {
		if err := westBed.ReplaceMCSCRDs(context.Background(), nil); err != nil {
			t.Errorf("west's CRDs back to today's: %v", err)
		}
	})
	for _, release := range olderMCSAPIReleases {
		t.Run(release, func(t *testing.T) {
			crds := releaseCRDs(ctx, t, release)
			if err := westBed.ReplaceMCSCRDs(ctx, crds); err != nil {
				t.Fatal(err)
			}
			holdsTheRelease(ctx, t, release, crds)
			ns := "mcs-api-" + strings.ReplaceAll(release, ".", "-")
			bed.Namespace(ctx, t, ns)
			t.Cleanup(func() { clearHub(t) })
			procs := startHubModeWithHeartbeat(ctx, t)
			t.Cleanup(func() { stopAll(t, slices.Collect(maps.Values(procs))) })
			westOnV1alpha1FlowsBothWays(ctx, t, ns)
		})
	}
}

// holdsTheRelease checks that west's API server holds crds, the CRDs of
// mcs-api release: the same versions, and the same properties of each
// version's status and spec (v0.1.0's ServiceExport has no spec, its
// ServiceImport no status.conditions).
func holdsTheRelease(ctx context.Context, t *testing.T, release string, crds []*apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	shape := func(crd *apiextensionsv1.CustomResourceDefinition) string {
		var out []string
		for _, v := range crd.Spec.Versions {
			props := v.Schema.OpenAPIV3Schema.Properties
			out = append(out, fmt.Sprintf("%s spec%v status%v", v.Name,
				slices.Sorted(maps.Keys(props["spec"].Properties)), slices.Sorted(maps.Keys(props["status"].Properties))))
		}
		return strings.Join(out, "; ")
	}
	west := bed.ClientOf(t, "west")
	for _, want := range crds {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := west.Get(ctx, types.NamespacedName{Name: want.Name}, got); err != nil {
			t.Fatal(err)
		}
		if shape(got) != shape(want) {
			t.Fatalf("west's %s: %s, want mcs-api %s's %s", want.Name, shape(got), release, shape(want))
		}
	}
}

// releaseCRDs returns the ServiceExport and ServiceImport CRDs of mcs-api
// release, from its module (go mod download: the module proxy or the
// module cache).
func releaseCRDs(ctx context.Context, t *testing.T, release string) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", "sigs.k8s.io/mcs-api@"+release).Output()
	if err != nil {
		t.Fatalf("go mod download sigs.k8s.io/mcs-api@%s: %v", release, err)
	}
	var module struct{ Dir string }
	if err := json.Unmarshal(out, &module); err != nil || module.Dir == "" {
		t.Fatalf("go mod download sigs.k8s.io/mcs-api@%s: %v: %s", release, err, out)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, kind := range []string{"serviceexports", "serviceimports"} {
		raw, err := os.ReadFile(filepath.Join(module.Dir, "config", "crd", "multicluster.x-k8s.io_"+kind+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, crd); err != nil {
			t.Fatalf("mcs-api %s's %s CRD: %v", release, kind, err)
		}
		crds = append(crds, crd)
	}
	return crds
}
