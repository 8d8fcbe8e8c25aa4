package controlplane

import (
	"context"
	"fmt"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcscrd "sigs.k8s.io/mcs-api/config/crd"
	"sigs.k8s.io/yaml"

	ownCRD "github.com/mcs-syncer/mcs-syncer/config/crd"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
)

// MCSCRDs returns the ServiceExport and ServiceImport CRDs exactly as
// sigs.k8s.io/mcs-api embeds them.
func MCSCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, raw := range [][]byte{mcscrd.ServiceExportCRD, mcscrd.ServiceImportCRD} {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return nil, fmt.Errorf("decode MCS CRD: %w", err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}

// CRDs returns the MCS CRDs and mcs-syncer's own PublishedExport CRD, as
// config/crd deploys them.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	crds, err := MCSCRDs()
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(ownCRD.PublishedExportCRD, crd); err != nil {
		return nil, fmt.Errorf("decode the PublishedExport CRD: %w", err)
	}
	return append(crds, crd), nil
}

// InstallCRDs creates the CRDs of CRDs that are missing and waits until
// the API server serves them.
func (cp *ControlPlane) InstallCRDs(ctx context.Context) error {
	crds, err := CRDs()
	if err != nil {
		return err
	}
	cl, err := cp.Client()
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if err := cl.Create(ctx, crd.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", crd.Name, err)
		}
	}
	return host.PollUntil(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		for _, crd := range crds {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := cl.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
				return false, nil
			}
			if !established(got) || got.DeletionTimestamp != nil {
				return false, nil
			}
		}
		return true, nil
	})
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// ServeMCSVersions changes the MCS CRDs in place as an upgrade or a
// rollback of mcs-api's CRDs does: served are the versions served,
// storage the one stored (which must be among them). A version served
// before and not now stays in the CRD, unserved, as the API server asks
// of a version that objects may still be stored in. It returns once
// discovery serves exactly those versions.
func (cp *ControlPlane) ServeMCSVersions(ctx context.Context, storage string, served ...string) error {
	cl, err := cp.Client()
	if err != nil {
		return err
	}
	crds, err := MCSCRDs()
	if err != nil {
		return err
	}
	for _, want := range crds {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := cl.Get(ctx, client.ObjectKeyFromObject(want), crd); err != nil {
				return err
			}
			for i := range crd.Spec.Versions {
				v := &crd.Spec.Versions[i]
				v.Served, v.Storage = slices.Contains(served, v.Name), v.Name == storage
			}
			return cl.Update(ctx, crd)
		})
		if err != nil {
			return fmt.Errorf("testbed: %s: serve %v, store %s: %w", want.Name, served, storage, err)
		}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cp.RESTConfig())
	if err != nil {
		return err
	}
	return host.PollUntil(ctx, time.Minute, func(context.Context) (bool, error) {
		for _, crd := range crds {
			for _, v := range crd.Spec.Versions {
				list, err := dc.ServerResourcesForGroupVersion(crd.Spec.Group + "/" + v.Name)
				if err != nil && !apierrors.IsNotFound(err) {
					return false, nil
				}
				has := list != nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == crd.Spec.Names.Plural })
				if has != slices.Contains(served, v.Name) {
					return false, nil
				}
			}
		}
		return true, nil
	})
}

// ReplaceMCSCRDs deletes the MCS CRDs (and with them every ServiceExport
// and ServiceImport of the cluster) and creates crds in their place, as a
// cluster that installed another mcs-api release has them (nil: today's,
// MCSCRDs); it returns once the API server serves them.
func (cp *ControlPlane) ReplaceMCSCRDs(ctx context.Context, crds []*apiextensionsv1.CustomResourceDefinition) error {
	if crds == nil {
		var err error
		if crds, err = MCSCRDs(); err != nil {
			return err
		}
	}
	cl, err := cp.Client()
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if err := cl.Delete(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crd.Name}}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete CRD %s: %w", crd.Name, err)
		}
	}
	// Deleted once the API server has deleted their objects.
	if err := host.PollUntil(ctx, 2*time.Minute, func(ctx context.Context) (bool, error) {
		for _, crd := range crds {
			err := cl.Get(ctx, client.ObjectKeyFromObject(crd), &apiextensionsv1.CustomResourceDefinition{})
			if !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return fmt.Errorf("the MCS CRDs were not deleted: %w", err)
	}
	for _, crd := range crds {
		crd = crd.DeepCopy()
		crd.ResourceVersion, crd.Status = "", apiextensionsv1.CustomResourceDefinitionStatus{}
		if err := cl.Create(ctx, crd); err != nil {
			return fmt.Errorf("create CRD %s: %w", crd.Name, err)
		}
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cp.RESTConfig())
	if err != nil {
		return err
	}
	return host.PollUntil(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		for _, crd := range crds {
			got := &apiextensionsv1.CustomResourceDefinition{}
			if err := cl.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil || !established(got) {
				return false, nil
			}
			for _, v := range crd.Spec.Versions {
				list, err := dc.ServerResourcesForGroupVersion(crd.Spec.Group + "/" + v.Name)
				if err != nil || !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == crd.Spec.Names.Plural }) {
					return false, nil
				}
			}
		}
		return true, nil
	})
}
