package diagnose

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
)

// storedVersionsGroups are the API groups whose CRDs storedVersions
// checks: the MCS API's and mcs-syncer's own (publications).
var storedVersionsGroups = []string{mcsGroup, v1alpha1.GroupName}

// storedVersions checks that every version a CRD of the MCS API or of
// mcs-syncer lists in status.storedVersions is still served. Objects may
// still be stored in each version listed there, and an API server refuses
// an update of the CRD that drops one of them from spec.versions: an
// upgrade of the CRDs (kubectl apply, Helm, a GitOps dry-run) fails on it,
// long after the version stopped being served.
func storedVersions(ctx context.Context, m Member) Check {
	c := Check{Name: "CRD stored versions", Member: m.ID}
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := m.Client.List(ctx, &crds); err != nil {
		if apierrors.IsForbidden(err) {
			c.Result, c.Detail = Skip, "the credentials may not list CustomResourceDefinitions: "+err.Error()
			return c
		}
		c.Result, c.Detail, c.Fix = Fail, err.Error(), unreadable
		return c
	}
	var checked, stale, fixes []string
	for i := range crds.Items {
		crd := &crds.Items[i]
		if !slices.Contains(storedVersionsGroups, crd.Spec.Group) {
			continue
		}
		checked = append(checked, fmt.Sprintf("%s (%s)", crd.Name, strings.Join(crd.Status.StoredVersions, ", ")))
		var gone []string
		for _, v := range crd.Status.StoredVersions {
			if !served(crd, v) {
				gone = append(gone, v)
			}
		}
		if len(gone) == 0 {
			continue
		}
		stale = append(stale, fmt.Sprintf("%s stores %s, no longer served", crd.Name, strings.Join(gone, ", ")))
		fixes = append(fixes, storedVersionsFix(crd, gone))
	}
	switch {
	case len(stale) > 0:
		c.Result, c.Detail = Fail, strings.Join(stale, "; ")
		c.Fix = strings.Join(fixes, "; ")
	case len(checked) == 0:
		c.Result, c.Detail = Skip, "no CRD of "+strings.Join(storedVersionsGroups, " or ")+" (the MCS CRDs check says what to install)"
	default:
		c.Result, c.Detail = Pass, "every stored version served: "+strings.Join(checked, ", ")
	}
	return c
}

// served reports whether crd serves version v.
func served(crd *apiextensionsv1.CustomResourceDefinition, v string) bool {
	return slices.ContainsFunc(crd.Spec.Versions, func(cv apiextensionsv1.CustomResourceDefinitionVersion) bool {
		return cv.Name == v && cv.Served
	})
}

// storedVersionsFix says how to take versions gone out of crd's
// storedVersions: rewrite every object (the API server stores each in the
// storage version), then keep only the versions still served.
func storedVersionsFix(crd *apiextensionsv1.CustomResourceDefinition, gone []string) string {
	var keep []string
	for _, v := range crd.Status.StoredVersions {
		if !slices.Contains(gone, v) {
			keep = append(keep, v)
		}
	}
	for _, v := range crd.Spec.Versions {
		if v.Storage && !slices.Contains(keep, v.Name) {
			keep = append(keep, v.Name)
		}
	}
	versions, _ := json.Marshal(keep) // strings: cannot fail
	return fmt.Sprintf("rewrite every %[1]s in its storage version (kubectl get %[1]s -A -o json | kubectl replace -f -), then: "+
		`kubectl patch crd %[1]s --subresource=status --type=merge -p '{"status":{"storedVersions":%[2]s}}'`,
		crd.Name, versions)
}
