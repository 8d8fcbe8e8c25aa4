package mcsapi

import (
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

var (
	// V1beta1 is the version mcs-api stores since v0.5.0, preferred.
	V1beta1 = mcsv1beta1.SchemeGroupVersion
	// V1alpha1 is the version of clusters that installed mcs-api's CRDs
	// before v0.5.0.
	V1alpha1 = mcsv1alpha1.SchemeGroupVersion
	// Versions are the versions mcs-syncer speaks, the preferred first.
	Versions = []schema.GroupVersion{V1beta1, V1alpha1}
)

// Resources are what a member must serve, in one version, to be engaged.
var Resources = []string{"serviceexports", "serviceimports"}

// AddToScheme registers mcs-api's v1beta1 Go types in s under version gv,
// one of Versions: a client of s reads and writes gv. A scheme holds one
// version of the MCS API only, or its clients could not tell which one to
// speak.
func AddToScheme(s *runtime.Scheme, gv schema.GroupVersion) error {
	if !slices.Contains(Versions, gv) {
		return fmt.Errorf("mcsapi: %s is not a version of the MCS API that mcs-syncer speaks (%v)", gv, Versions)
	}
	s.AddKnownTypes(gv, &mcsv1beta1.ServiceExport{}, &mcsv1beta1.ServiceExportList{},
		&mcsv1beta1.ServiceImport{}, &mcsv1beta1.ServiceImportList{})
	metav1.AddToGroupVersion(s, gv)
	return nil
}

// Scheme returns a new scheme with the MCS API in version gv, after what
// add registers (the types of Kubernetes, mcs-syncer's own).
func Scheme(gv schema.GroupVersion, add ...func(*runtime.Scheme) error) (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, f := range add {
		if err := f(s); err != nil {
			return nil, err
		}
	}
	if err := AddToScheme(s, gv); err != nil {
		return nil, err
	}
	return s, nil
}

// Schemes returns a scheme per version of Versions, each with what add
// registers (the types of Kubernetes, mcs-syncer's own) and the MCS API
// in that version: what a process that reads members of either version
// holds.
func Schemes(add ...func(*runtime.Scheme) error) (map[schema.GroupVersion]*runtime.Scheme, error) {
	schemes := map[schema.GroupVersion]*runtime.Scheme{}
	for _, gv := range Versions {
		s, err := Scheme(gv, add...)
		if err != nil {
			return nil, err
		}
		schemes[gv] = s
	}
	return schemes, nil
}

// IsServiceImport reports whether ref refers to a ServiceImport, of any
// version: an owner written before a member's CRDs changed version is
// still the same ServiceImport.
func IsServiceImport(ref *metav1.OwnerReference) bool {
	return ref != nil && ref.Kind == "ServiceImport" && strings.HasPrefix(ref.APIVersion, V1beta1.Group+"/")
}

// Version returns the version of the MCS API that s speaks, and whether
// it speaks one.
func Version(s *runtime.Scheme) (schema.GroupVersion, bool) {
	if s == nil {
		return schema.GroupVersion{}, false
	}
	for _, gv := range Versions {
		if s.Recognizes(gv.WithKind("ServiceExport")) {
			return gv, true
		}
	}
	return schema.GroupVersion{}, false
}

// MissingError is a server that serves none of the versions asked for
// fully.
type MissingError struct {
	// Versions are the versions asked for, the preferred first; Missing
	// names, per version, the resources (resource.group) it lacks.
	Versions []schema.GroupVersion
	Missing  map[schema.GroupVersion][]string
}

func (e *MissingError) Error() string {
	var parts []string
	for _, gv := range e.Versions {
		parts = append(parts, fmt.Sprintf("%s lacks %s", gv, strings.Join(e.Missing[gv], ", ")))
	}
	return strings.Join(parts, "; ")
}

// Served asks discovery which version of the MCS API the server serves:
// the preferred of Versions whose every resource it serves.
func Served(dc discovery.DiscoveryInterface) (schema.GroupVersion, error) {
	return FirstServed(dc, Resources, Versions...)
}

// FirstServed returns the first of versions in which the server serves
// every one of resources. A server that serves none of them fully returns
// a *MissingError; one that cannot be asked, its error.
func FirstServed(dc discovery.DiscoveryInterface, resources []string, versions ...schema.GroupVersion) (schema.GroupVersion, error) {
	missing := &MissingError{Versions: versions, Missing: map[schema.GroupVersion][]string{}}
	for _, gv := range versions {
		list, err := dc.ServerResourcesForGroupVersion(gv.String())
		if err != nil && !apierrors.IsNotFound(err) {
			return schema.GroupVersion{}, fmt.Errorf("discover %s: %w", gv, err)
		}
		for _, want := range resources {
			if list == nil || !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == want }) {
				missing.Missing[gv] = append(missing.Missing[gv], want+"."+gv.Group)
			}
		}
		if len(missing.Missing[gv]) == 0 {
			return gv, nil
		}
	}
	return schema.GroupVersion{}, missing
}
