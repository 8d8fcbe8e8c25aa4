package v1alpha1_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
)

// TestClusterSetConfigurationDefaults: the scheme's defaulting fills in
// the publication namespace, and keeps one that is set.
func TestClusterSetConfigurationDefaults(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	empty, set := &v1alpha1.ClusterSetConfiguration{}, &v1alpha1.ClusterSetConfiguration{PublicationNamespace: "pubs"}
	s.Default(empty)
	s.Default(set)
	if empty.PublicationNamespace != v1alpha1.DefaultPublicationNamespace || set.PublicationNamespace != "pubs" {
		t.Errorf("defaulted: %q and %q, want %q and pubs", empty.PublicationNamespace, set.PublicationNamespace, v1alpha1.DefaultPublicationNamespace)
	}
	gvks, _, err := s.ObjectKinds(empty)
	if err != nil || len(gvks) != 1 || gvks[0].Kind != v1alpha1.ClusterSetConfigurationKind || gvks[0].GroupVersion() != v1alpha1.GroupVersion {
		t.Errorf("kinds %v, %v", gvks, err)
	}
}

// TestClusterSetConfigurationWritesItsSchema: a config built by a program
// marshals with its apiVersion and kind, and reads back the same.
func TestClusterSetConfigurationWritesItsSchema(t *testing.T) {
	in := v1alpha1.ClusterSetConfiguration{Clusterset: "prod", Members: []v1alpha1.ClusterSetMember{{ID: "east", Kubeconfig: "east.kubeconfig"}, {InCluster: true}},
		Hub: &v1alpha1.HubConnection{Kubeconfig: "hub.kubeconfig"}}
	raw, err := yaml.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(raw), "apiVersion: mcs-syncer.io/v1alpha1\n") || !strings.Contains(string(raw), "\nkind: ClusterSetConfiguration\n") {
		t.Errorf("written without its schema:\n%s", raw)
	}
	var out v1alpha1.ClusterSetConfiguration
	if err := yaml.UnmarshalStrict(raw, &out); err != nil {
		t.Fatal(err)
	}
	if out.Clusterset != "prod" || len(out.Members) != 2 || out.Members[0].ID != "east" || !out.Members[1].InCluster || out.Hub.Kubeconfig != "hub.kubeconfig" {
		t.Errorf("read back %+v", out)
	}
}
