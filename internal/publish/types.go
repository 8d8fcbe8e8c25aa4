package publish

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// GroupVersion is the API group and version of PublishedExport.
var GroupVersion = schema.GroupVersion{Group: "mcs-syncer.io", Version: "v1alpha1"}

// Resource is PublishedExport's resource name.
const Resource = "publishedexports"

// PublishedExport is one member's export of one Service, as published for
// the other members; or, without a Service, the member's marker (see the
// package doc).
type PublishedExport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PublishedExportSpec `json:"spec"`
}

// PublishedExportSpec is a clusterset.ExportedService on the wire.
type PublishedExportSpec struct {
	// Cluster is the exporting member; it equals the object's
	// multicluster.kubernetes.io/source-cluster label.
	Cluster string `json:"cluster"`
	// Namespace and Name are the exported Service's; both empty in the
	// member's marker.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// ExportCreated is the ServiceExport's creationTimestamp.
	ExportCreated         metav1.Time                          `json:"exportCreated,omitempty"`
	Type                  mcsv1beta1.ServiceImportType         `json:"type,omitempty"`
	Ports                 []mcsv1beta1.ServicePort             `json:"ports,omitempty"`
	SessionAffinity       corev1.ServiceAffinity               `json:"sessionAffinity,omitempty"`
	SessionAffinityConfig *corev1.SessionAffinityConfig        `json:"sessionAffinityConfig,omitempty"`
	InternalTrafficPolicy *corev1.ServiceInternalTrafficPolicy `json:"internalTrafficPolicy,omitempty"`
	TrafficDistribution   *string                              `json:"trafficDistribution,omitempty"`
	IPFamilies            []corev1.IPFamily                    `json:"ipFamilies,omitempty"`
	// ExportedLabels and ExportedAnnotations are the ServiceExport's.
	ExportedLabels      map[string]string `json:"exportedLabels,omitempty"`
	ExportedAnnotations map[string]string `json:"exportedAnnotations,omitempty"`
	LocalClusterFirst   bool              `json:"localClusterFirst,omitempty"`
	// Endpoints are grouped by address type and port set.
	Endpoints []EndpointGroup `json:"endpoints,omitempty"`
	// LastChangeTriggerTime is the newest trigger time of the source
	// slices (for the consumers' propagation latency metric), in
	// RFC 3339 with nanoseconds as the slices' annotation has it: a
	// metav1.Time would cut it to the second, and every latency observed
	// from it would be off by up to a second.
	LastChangeTriggerTime string `json:"lastChangeTriggerTime,omitempty"`
	// RenewTime and RenewIntervalSeconds are the marker's heartbeat: its
	// publisher renews RenewTime every RenewIntervalSeconds while it
	// runs, so that readers tell a member whose mcs-syncer stopped from a
	// publication server that is out of reach (see Heartbeats). A marker
	// without them (of an older publisher) has no heartbeat.
	RenewTime            *metav1.MicroTime `json:"renewTime,omitempty"`
	RenewIntervalSeconds int32             `json:"renewIntervalSeconds,omitempty"`
}

// EndpointGroup is a reconciler.EndpointGroup on the wire.
type EndpointGroup struct {
	AddressType discoveryv1.AddressType    `json:"addressType"`
	Ports       []discoveryv1.EndpointPort `json:"ports,omitempty"`
	Endpoints   []discoveryv1.Endpoint     `json:"endpoints,omitempty"`
}

// PublishedExportList is a list of PublishedExports.
type PublishedExportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PublishedExport `json:"items"`
}

// AddToScheme registers the types in a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &PublishedExport{}, &PublishedExportList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// DeepCopyInto copies the spec into out.
func (in *PublishedExportSpec) DeepCopyInto(out *PublishedExportSpec) {
	*out = *in
	in.ExportCreated.DeepCopyInto(&out.ExportCreated)
	if in.Ports != nil {
		out.Ports = make([]mcsv1beta1.ServicePort, len(in.Ports))
		for i := range in.Ports {
			in.Ports[i].DeepCopyInto(&out.Ports[i])
		}
	}
	out.SessionAffinityConfig = in.SessionAffinityConfig.DeepCopy()
	if in.InternalTrafficPolicy != nil {
		p := *in.InternalTrafficPolicy
		out.InternalTrafficPolicy = &p
	}
	if in.TrafficDistribution != nil {
		d := *in.TrafficDistribution
		out.TrafficDistribution = &d
	}
	if in.IPFamilies != nil {
		out.IPFamilies = append([]corev1.IPFamily(nil), in.IPFamilies...)
	}
	if in.RenewTime != nil {
		out.RenewTime = in.RenewTime.DeepCopy()
	}
	out.ExportedLabels = maps.Clone(in.ExportedLabels)
	out.ExportedAnnotations = maps.Clone(in.ExportedAnnotations)
	if in.Endpoints != nil {
		out.Endpoints = make([]EndpointGroup, len(in.Endpoints))
		for i := range in.Endpoints {
			in.Endpoints[i].DeepCopyInto(&out.Endpoints[i])
		}
	}
}

// DeepCopyInto copies the group into out.
func (in *EndpointGroup) DeepCopyInto(out *EndpointGroup) {
	*out = *in
	if in.Ports != nil {
		out.Ports = make([]discoveryv1.EndpointPort, len(in.Ports))
		for i := range in.Ports {
			in.Ports[i].DeepCopyInto(&out.Ports[i])
		}
	}
	if in.Endpoints != nil {
		out.Endpoints = make([]discoveryv1.Endpoint, len(in.Endpoints))
		for i := range in.Endpoints {
			in.Endpoints[i].DeepCopyInto(&out.Endpoints[i])
		}
	}
}

// DeepCopy returns a copy of the object.
func (in *PublishedExport) DeepCopy() *PublishedExport {
	if in == nil {
		return nil
	}
	out := &PublishedExport{TypeMeta: in.TypeMeta}
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *PublishedExport) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyObject implements runtime.Object.
func (in *PublishedExportList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := &PublishedExportList{TypeMeta: in.TypeMeta}
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]PublishedExport, len(in.Items))
		for i := range in.Items {
			out.Items[i] = *in.Items[i].DeepCopy()
		}
	}
	return out
}
