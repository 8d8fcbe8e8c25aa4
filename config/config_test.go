// Package config_test checks the deployment manifests: the pinned CRDs
// match sigs.k8s.io/mcs-api, and both overlays render with kustomize (the
// one built into kubectl v1.36, run in-process through its krusty API, so
// no binary is needed) into what a controller needs.
package config_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	mcscrd "sigs.k8s.io/mcs-api/config/crd"
	sigsyaml "sigs.k8s.io/yaml"
)

func TestCRDsMatchTheModule(t *testing.T) {
	for file, want := range map[string][]byte{
		"crd/multicluster.x-k8s.io_serviceexports.yaml": mcscrd.ServiceExportCRD,
		"crd/multicluster.x-k8s.io_serviceimports.yaml": mcscrd.ServiceImportCRD,
	} {
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from sigs.k8s.io/mcs-api's embedded CRD; copy it again from the module", file)
		}
	}
}

// render builds an overlay in-process with kustomize's own API (krusty,
// what `kubectl kustomize` runs) and returns its documents by kind/name.
func render(t *testing.T, overlay string) map[string][]byte {
	t.Helper()
	return kustomize(t, filepath.Join("overlays", overlay))
}

// kustomize builds the kustomization in dir (relative to config/) and
// returns its documents by kind/name.
func kustomize(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	out, err := res.AsYaml()
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	return documents(t, out)
}

// documents splits a multi-document YAML stream into its documents by
// kind/name (empty documents left out).
func documents(t *testing.T, out []byte) map[string][]byte {
	t.Helper()
	docs := map[string][]byte{}
	reader := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(out)))
	for {
		doc, err := reader.Read()
		if err != nil {
			break
		}
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := sigsyaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		if meta.Kind == "" {
			continue
		}
		key := meta.Kind + "/" + meta.Metadata.Name
		if docs[key] != nil {
			t.Fatalf("two objects %s (namespaces aside: this test names objects by kind and name)", key)
		}
		docs[key] = doc
	}
	return docs
}

// TestMemberOverlay: a member whose mcs-syncer runs elsewhere gets the
// CRDs, the roles and the identities, and runs nothing.
func TestMemberOverlay(t *testing.T) {
	docs := render(t, "member")
	for _, want := range []string{
		"CustomResourceDefinition/serviceexports.multicluster.x-k8s.io", "CustomResourceDefinition/serviceimports.multicluster.x-k8s.io",
		"CustomResourceDefinition/publishedexports.mcs-syncer.io", "Namespace/mcs-system",
		"ServiceAccount/mcs-syncer", "ServiceAccount/mcs-syncer-remote-reader",
		"ClusterRoleBinding/mcs-syncer", "ClusterRoleBinding/mcs-syncer-remote-reader",
	} {
		if docs[want] == nil {
			t.Errorf("renders no %s", want)
		}
	}
	for name := range docs {
		if strings.HasPrefix(name, "Deployment/") {
			t.Errorf("renders %s: a member served from elsewhere runs no mcs-syncer", name)
		}
	}
}

func TestOverlaysRender(t *testing.T) {
	for _, overlay := range []string{"central", "per-cluster"} {
		t.Run(overlay, func(t *testing.T) {
			docs := render(t, overlay)
			for _, want := range []string{
				"CustomResourceDefinition/serviceexports.multicluster.x-k8s.io", "CustomResourceDefinition/serviceimports.multicluster.x-k8s.io",
				"ClusterRole/mcs-syncer", "ClusterRole/mcs-syncer-remote-reader", "Role/mcs-syncer-leader-election",
				"ClusterRoleBinding/mcs-syncer", "RoleBinding/mcs-syncer-leader-election",
				"ServiceAccount/mcs-syncer", "Deployment/mcs-syncer", "Service/mcs-syncer-metrics", "Namespace/mcs-system",
			} {
				if docs[want] == nil {
					t.Errorf("renders no %s", want)
				}
			}
			var d appsv1.Deployment
			if err := sigsyaml.UnmarshalStrict(docs["Deployment/mcs-syncer"], &d); err != nil {
				t.Fatal(err)
			}
			c := d.Spec.Template.Spec.Containers[0]
			sc := d.Spec.Template.Spec.SecurityContext
			if *d.Spec.Replicas != 2 || !slices.Contains(c.Args, "--leader-elect") || c.LivenessProbe == nil || c.ReadinessProbe == nil ||
				sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || c.SecurityContext == nil || !*c.SecurityContext.ReadOnlyRootFilesystem ||
				c.Resources.Requests.Cpu().IsZero() || d.Namespace != "mcs-system" {
				t.Errorf("Deployment is not deployable as a controller should be: %+v", d.Spec.Template.Spec)
			}
			if c.ImagePullPolicy != corev1.PullIfNotPresent {
				t.Errorf("imagePullPolicy %q: an image loaded into the nodes (ctr import, kind load) must run without a registry", c.ImagePullPolicy)
			}
			var ns corev1.Namespace
			if err := sigsyaml.UnmarshalStrict(docs["Namespace/mcs-system"], &ns); err != nil {
				t.Fatal(err)
			}
			if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
				t.Errorf("namespace mcs-system enforces %q, want the restricted Pod Security Standard", ns.Labels["pod-security.kubernetes.io/enforce"])
			}
			hasLocal := slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--local-cluster=") })
			if hasLocal != (overlay == "per-cluster") {
				t.Errorf("--local-cluster in args: %v, want it only in per-cluster", hasLocal)
			}
			var reader rbacv1.ClusterRole
			if err := sigsyaml.UnmarshalStrict(docs["ClusterRole/mcs-syncer-remote-reader"], &reader); err != nil {
				t.Fatal(err)
			}
			for _, r := range reader.Rules {
				// Besides the publications, only what the cluster says
				// of itself (KEP-2149), by name.
				properties := slices.Equal(r.Resources, []string{"clusterproperties"}) &&
					slices.Equal(r.ResourceNames, []string{"cluster.clusterset.k8s.io", "clusterset.k8s.io"}) && slices.Equal(r.Verbs, []string{"get"})
				if !slices.Equal(r.Resources, []string{"publishedexports"}) && !properties {
					t.Errorf("remote reader may read %v %v: other members read only the publications and the two ClusterProperties", r.Resources, r.ResourceNames)
				}
				for _, v := range r.Verbs {
					if v != "get" && v != "list" && v != "watch" {
						t.Errorf("remote reader may %s %v", v, r.Resources)
					}
				}
			}
		})
	}
}
