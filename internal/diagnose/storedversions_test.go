package diagnose

import (
	"context"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestStoredVersions: a CRD of the MCS API or of mcs-syncer whose
// status.storedVersions lists a version it no longer serves (dropped from
// spec.versions, or served: false) fails, with the commands that take it
// out; CRDs of other groups are not read into it; credentials that may
// not list CRDs skip the check.
func TestStoredVersions(t *testing.T) {
	crd := func(name, group string, stored []string, versions ...apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:   apiextensionsv1.CustomResourceDefinitionSpec{Group: group, Versions: versions},
			Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: stored}}
	}
	served := func(v string, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{Name: v, Served: true, Storage: storage}
	}
	notServed := apiextensionsv1.CustomResourceDefinitionVersion{Name: "v1alpha1"}
	for _, tc := range []struct {
		name      string
		crds      []client.Object
		forbidden bool
		result    Result
		detail    []string
		fix       []string
	}{
		{name: "stored versions all served", crds: []client.Object{
			crd("serviceexports.multicluster.x-k8s.io", mcsGroup, []string{"v1alpha1", "v1beta1"}, served("v1alpha1", false), served("v1beta1", true)),
			crd("publishedexports.mcs-syncer.io", "mcs-syncer.io", []string{"v1alpha1"}, served("v1alpha1", true)),
		}, result: Pass, detail: []string{"publishedexports.mcs-syncer.io (v1alpha1)", "serviceexports.multicluster.x-k8s.io (v1alpha1, v1beta1)"}},
		{name: "a stored version dropped from spec.versions", crds: []client.Object{
			crd("serviceimports.multicluster.x-k8s.io", mcsGroup, []string{"v1alpha1", "v1beta1"}, served("v1beta1", true)),
		}, result: Fail, detail: []string{"serviceimports.multicluster.x-k8s.io stores v1alpha1, no longer served"},
			fix: []string{"kubectl get serviceimports.multicluster.x-k8s.io -A -o json | kubectl replace -f -",
				`kubectl patch crd serviceimports.multicluster.x-k8s.io --subresource=status --type=merge -p '{"status":{"storedVersions":["v1beta1"]}}'`}},
		{name: "a stored version listed but not served, the storage version not yet stored", crds: []client.Object{
			crd("serviceexports.multicluster.x-k8s.io", mcsGroup, []string{"v1alpha1"}, notServed, served("v1beta1", true)),
		}, result: Fail, detail: []string{"serviceexports.multicluster.x-k8s.io stores v1alpha1, no longer served"},
			fix: []string{`"storedVersions":["v1beta1"]`}},
		{name: "another group's CRD is not ours to judge", crds: []client.Object{
			crd("widgets.example.com", "example.com", []string{"v1"}, served("v2", true)),
		}, result: Skip, detail: []string{"no CRD of multicluster.x-k8s.io or mcs-syncer.io"}},
		{name: "credentials that may not list CRDs", forbidden: true, result: Skip, detail: []string{"may not list CustomResourceDefinitions"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			if err := apiextensionsv1.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.crds...)
			if tc.forbidden {
				b = b.WithInterceptorFuncs(interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
					return apierrors.NewForbidden(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, "", nil)
				}})
			}
			c := storedVersions(t.Context(), Member{ID: "east", Client: b.Build()})
			if c.Result != tc.result || c.Member != "east" {
				t.Fatalf("%s for east: %q (fix %q), want %s", c.Result, c.Detail, c.Fix, tc.result)
			}
			for _, want := range tc.detail {
				if !strings.Contains(c.Detail, want) {
					t.Errorf("detail %q lacks %q", c.Detail, want)
				}
			}
			for _, want := range tc.fix {
				if !strings.Contains(c.Fix, want) {
					t.Errorf("fix %q lacks %q", c.Fix, want)
				}
			}
			if (c.Result == Fail) != (c.Fix != "") {
				t.Errorf("%s with fix %q", c.Result, c.Fix)
			}
		})
	}
}
