package mcsapi

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// TestServed: the preferred version whose every resource is served; a
// version serving only one of them does not do.
func TestServed(t *testing.T) {
	both := []metav1.APIResource{{Name: "serviceexports"}, {Name: "serviceimports"}}
	for _, tc := range []struct {
		name   string
		served map[string][]metav1.APIResource
		want   schema.GroupVersion
		errHas string
	}{
		{"v1beta1 and v1alpha1", map[string][]metav1.APIResource{"v1beta1": both, "v1alpha1": both}, V1beta1, ""},
		{"v1alpha1 only", map[string][]metav1.APIResource{"v1alpha1": both}, V1alpha1, ""},
		{"v1beta1 without ServiceImports", map[string][]metav1.APIResource{"v1beta1": both[:1], "v1alpha1": both}, V1alpha1, ""},
		{"none", nil, schema.GroupVersion{}, "multicluster.x-k8s.io/v1beta1 lacks serviceexports.multicluster.x-k8s.io, serviceimports.multicluster.x-k8s.io; multicluster.x-k8s.io/v1alpha1 lacks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
			for version, resources := range tc.served {
				dc.Resources = append(dc.Resources, &metav1.APIResourceList{GroupVersion: V1beta1.Group + "/" + version, APIResources: resources})
			}
			got, err := Served(dc)
			var missing *MissingError
			switch {
			case tc.errHas == "" && err != nil:
				t.Fatal(err)
			case tc.errHas != "" && (!errors.As(err, &missing) || !strings.Contains(err.Error(), tc.errHas)):
				t.Fatalf("error %v, want a MissingError with %q", err, tc.errHas)
			case got != tc.want:
				t.Errorf("served %v, want %v", got, tc.want)
			}
		})
	}
}

// TestScheme: a scheme speaks one version of the MCS API, with the same Go
// types; another version is refused.
func TestScheme(t *testing.T) {
	for _, gv := range Versions {
		s, err := Scheme(gv)
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range []runtime.Object{&mcsv1beta1.ServiceExport{}, &mcsv1beta1.ServiceImportList{}} {
			gvk, err := apiutil.GVKForObject(obj, s)
			if err != nil || gvk.GroupVersion() != gv {
				t.Errorf("%T in %v's scheme: %v, %v", obj, gv, gvk, err)
			}
		}
		if got, ok := Version(s); !ok || got != gv {
			t.Errorf("Version of %v's scheme: %v", gv, got)
		}
	}
	if _, err := Scheme(schema.GroupVersion{Group: V1beta1.Group, Version: "v2"}); err == nil {
		t.Error("a version mcs-syncer does not speak was accepted")
	}
}
