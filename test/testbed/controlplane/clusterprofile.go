package controlplane

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
)

// ClusterProfileCRD is a CRD of SIG-Multicluster's ClusterProfiles
// (KEP-4322, multicluster.x-k8s.io/v1alpha1), written here for the tests
// of an inventory: its spec's schema as the API's, its status kept as
// written (the API's own CRD lives in sigs.k8s.io/cluster-inventory-api,
// which is not served to this project).
func ClusterProfileCRD() *apiextensionsv1.CustomResourceDefinition {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "clusterprofiles.multicluster.x-k8s.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "multicluster.x-k8s.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "clusterprofiles", Singular: "clusterprofile", Kind: "ClusterProfile", ListKind: "ClusterProfileList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Required: []string{"spec"},
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"apiVersion": str, "kind": str, "metadata": {Type: "object"},
						"spec": {Type: "object", Required: []string{"clusterManager"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"displayName":    str,
							"clusterManager": {Type: "object", Required: []string{"name"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": str}},
						}},
						"status": {Type: "object", XPreserveUnknownFields: ptr.To(true)},
					},
				}},
			}},
		},
	}
}

// InstallClusterProfileCRD creates the ClusterProfile CRD if it is missing
// and waits until it is established.
func (cp *ControlPlane) InstallClusterProfileCRD(ctx context.Context) error {
	cl, err := cp.Client()
	if err != nil {
		return err
	}
	crd := ClusterProfileCRD()
	if err := cl.Create(ctx, crd.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("testbed: create CRD %s: %w", crd.Name, err)
	}
	return host.PollUntil(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
			return false, nil
		}
		return established(got), nil
	})
}
