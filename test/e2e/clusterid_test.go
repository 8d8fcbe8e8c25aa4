package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// TestTwoLabelClusterIDs: KEP-1645, "cluster id": it "must be either equal
// to cluster name, or composed of two valid RFC 1123 DNS labels separated
// with a dot". A clusterset whose members are east.fleet-a, west.fleet-b and
// north.fleet-a exports and imports (the imported slices' source-cluster
// labels and the ServiceImport's clusters are the two-label IDs), and a pod
// in north resolves and reaches the clusterset names of a ClusterSetIP and
// a headless import.
func TestTwoLabelClusterIDs(t *testing.T) {
	exclusive(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "clusterset.yaml")
	writeConfig(t, path, member{"east.fleet-a", "east"}, member{"west.fleet-b", "west"}, member{"north.fleet-a", "north"})
	ownSyncer(ctx, t, path)

	dp := newDataPlane(ctx, t, "two-label-ids")
	var podIPs []string
	for _, c := range []string{"east", "west"} {
		serve(ctx, t, c, dp.ns, "web", 1, true, nil, port("tcp", corev1.ProtocolTCP, 80))
		serve(ctx, t, c, dp.ns, "db", 1, true, func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }, port("tcp", corev1.ProtocolTCP, 80))
		for _, p := range podsReady(ctx, t, bed.ClientOf(t, c), dp.ns, 1, client.MatchingLabels{"app": "db"}) {
			podIPs = append(podIPs, p.Status.PodIP)
		}
	}
	slices.Sort(podIPs)

	north := bed.ClientOf(t, "north")
	eventually(ctx, t, "north to import web's endpoints under their two-label source clusters", readyImported(ctx, north, dp.ns, map[string]int{"east.fleet-a": 1, "west.fleet-b": 1}))
	eventually(ctx, t, "north's ServiceImport web to name both clusters", func() error {
		si := &mcsv1beta1.ServiceImport{}
		if err := north.Get(ctx, types.NamespacedName{Namespace: dp.ns, Name: "web"}, si); err != nil {
			return err
		}
		var clusters []string
		for _, c := range si.Status.Clusters {
			clusters = append(clusters, c.Cluster)
		}
		if want := []string{"east.fleet-a", "west.fleet-b"}; !slices.Equal(clusters, want) {
			return fmt.Errorf("status.clusters %v, want %v", clusters, want)
		}
		return nil
	})

	name := "web." + dp.ns + ".svc.clusterset.local"
	dp.resolvesTo(ctx, t, name, importIP(ctx, t, dp.ns, "web"))
	dp.reaches(ctx, t, "tcp", name+":80", 20, "east", "west")
	dp.resolvesTo(ctx, t, "db."+dp.ns+".svc.clusterset.local", podIPs...)
}

// clusterPropertyCRD is KEP-2149's ClusterProperty (about.k8s.io/v1alpha1,
// cluster-scoped, a string in spec.value), as the about-api project
// installs it: written here from the KEP's schema.
func clusterPropertyCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "clusterproperties.about.k8s.io",
			// A *.k8s.io group needs its API review named.
			Annotations: map[string]string{"api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/pull/3084"}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "about.k8s.io", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "clusterproperties", Singular: "clusterproperty", Kind: "ClusterProperty", ListKind: "ClusterPropertyList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Required: []string{"spec"},
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"apiVersion": {Type: "string"}, "kind": {Type: "string"}, "metadata": {Type: "object"},
						"spec": {Type: "object", Required: []string{"value"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"value": {Type: "string", MinLength: ptr.To[int64](1), MaxLength: ptr.To[int64](128000)},
						}},
					},
				}},
			}},
		},
	}
}

// installClusterPropertyCRD installs the ClusterProperty API in cl until
// the test ends (its properties go with it).
func installClusterPropertyCRD(ctx context.Context, t *testing.T, cl client.Client) {
	t.Helper()
	if err := cl.Create(ctx, clusterPropertyCRD()); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cl.Delete(context.Background(), clusterPropertyCRD()); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})
}

// setClusterProperty creates or updates the ClusterProperty name in cl,
// waiting for its API to be served.
func setClusterProperty(ctx context.Context, t *testing.T, cl client.Client, name, value string) {
	t.Helper()
	eventually(ctx, t, "ClusterProperty "+name+" to be "+value, func() error {
		p := &unstructured.Unstructured{}
		p.SetAPIVersion("about.k8s.io/v1alpha1")
		p.SetKind("ClusterProperty")
		err := cl.Get(ctx, types.NamespacedName{Name: name}, p)
		if apierrors.IsNotFound(err) {
			p.SetName(name)
			err = nil
		}
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedField(p.Object, value, "spec", "value"); err != nil {
			return err
		}
		if p.GetResourceVersion() == "" {
			return cl.Create(ctx, p)
		}
		return cl.Update(ctx, p)
	})
}

// TestClusterPropertyContradiction: KEP-2149. A member whose ClusterProperty
// cluster.clusterset.k8s.io names another cluster is not engaged: /readyz,
// the log and the state metric say why, and its exports are not imported,
// while the members whose properties agree (or that have none) sync. Once
// the property is right, the member is engaged.
func TestClusterPropertyContradiction(t *testing.T) {
	exclusive(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const ns = "cluster-property"
	bed.Namespace(ctx, t, ns)
	east, west, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "west"), bed.ClientOf(t, "north")
	installClusterPropertyCRD(ctx, t, east)
	installClusterPropertyCRD(ctx, t, west)
	setClusterProperty(ctx, t, east, "cluster.clusterset.k8s.io", "east")
	setClusterProperty(ctx, t, east, "clusterset.k8s.io", "testbed")
	setClusterProperty(ctx, t, west, "cluster.clusterset.k8s.io", "east")
	if err := manualExport(ctx, east, ns, "api", "10.101.3.1"); err != nil {
		t.Fatal(err)
	}
	if err := manualExport(ctx, west, ns, "api", "10.101.3.2"); err != nil {
		t.Fatal(err)
	}

	s := ownSyncer(ctx, t, bed.ConfigPath)
	refused := `ClusterProperty cluster.clusterset.k8s.io of this cluster is "east", but the clusterset config names this member "west"`
	eventually(ctx, t, "west refused by name in /readyz, east and north engaged", readyzSays(ctx, s,
		"[+]member west ok: wrong-cluster since", refused, "[+]member east ok: engaged", "[+]member north ok: engaged"))
	// The log is JSON: its quotes are escaped.
	eventually(ctx, t, "the log to say why west is not engaged", logSays(s, "Member cannot be engaged; retrying", strings.ReplaceAll(refused, `"`, `\"`)))
	eventually(ctx, t, "the state metric", func() error {
		v, err := s.metric(ctx, `mcs_syncer_member_state{cluster="west",state="wrong-cluster"}`)
		if err == nil && v != 1 {
			err = fmt.Errorf("member_state{west,wrong-cluster} = %v", v)
		}
		return err
	})
	eventually(ctx, t, "north to import east's endpoint", importedEndpoints(ctx, north, ns, "api", "east", 1))
	if err := importedEndpoints(ctx, north, ns, "api", "west", 0)(); err != nil {
		t.Errorf("west's export imported while west is refused: %v", err)
	}

	setClusterProperty(ctx, t, west, "cluster.clusterset.k8s.io", "west")
	eventually(ctx, t, "west engaged once its property is right", readyzSays(ctx, s, "[+]member west ok: engaged"))
	eventually(ctx, t, "north to import west's endpoint", importedEndpoints(ctx, north, ns, "api", "west", 1))
}

// TestIDFromClusterProperty: KEP-2149 lets a cluster name itself. A config
// entry without id joins under the ID its cluster's ClusterProperty
// cluster.clusterset.k8s.io gives; until the property exists it is left
// out, and /readyz says so.
func TestIDFromClusterProperty(t *testing.T) {
	exclusive(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const ns = "id-from-property"
	bed.Namespace(ctx, t, ns)
	west, north := bed.ClientOf(t, "west"), bed.ClientOf(t, "north")
	installClusterPropertyCRD(ctx, t, west)
	if err := manualExport(ctx, west, ns, "api", "10.101.4.2"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "clusterset.yaml")
	writeConfig(t, path, member{"east", "east"}, member{"", "west"}, member{"north", "north"})
	s := ownSyncer(ctx, t, path)
	eventually(ctx, t, "west left out until it names itself", readyzSays(ctx, s,
		"left out until its cluster names it: its cluster has no ClusterProperty cluster.clusterset.k8s.io", "[+]member north ok: engaged"))

	setClusterProperty(ctx, t, west, "cluster.clusterset.k8s.io", "west.fleet-b")
	eventually(ctx, t, "west engaged under the ID its property gives", readyzSays(ctx, s, "[+]member west.fleet-b ok: engaged"))
	eventually(ctx, t, "north to import west's endpoint under that ID", importedEndpoints(ctx, north, ns, "api", "west.fleet-b", 1))
}
