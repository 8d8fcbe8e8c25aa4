package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// GroupName and Version are mcs-syncer's API group and this package's
// version.
const (
	GroupName = "mcs-syncer.io"
	Version   = "v1alpha1"
)

// GroupVersion is the API group and version of PublishedExport and of
// ClusterSetConfiguration.
var GroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// Resource is PublishedExport's resource name.
const Resource = "publishedexports"

// PublishedExport is one member's export of one Service as published for
// the other members: its head (the exported spec, named
// <cluster>.<namespace>.<name>), or one of its parts (spec.part set: at
// most --max-endpoints-per-slice of its endpoints, named
// <cluster>.<namespace>.<name>.part.<part>); or, without namespace and name,
// the member's marker: its publisher has published every export of a full
// pass. A head of a publisher before parts (or of one that an older
// reader holds to that form) carries every endpoint itself; a reader
// imports the union of a head's endpoints and its parts'.
//
// +kubebuilder:object:generate=true
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=pubexp,categories=mcs-syncer
// +kubebuilder:printcolumn:name=Cluster,type=string,JSONPath=`.spec.cluster`
// +kubebuilder:printcolumn:name=Namespace,type=string,JSONPath=`.spec.namespace`
// +kubebuilder:printcolumn:name=Service,type=string,JSONPath=`.spec.name`
// +kubebuilder:printcolumn:name=Age,type=date,JSONPath=`.metadata.creationTimestamp`
type PublishedExport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec keeps fields this CRD does not name: a publisher newer than the
	// hub's CRD may write them, and the readers check every field they
	// use (Decode) either way.
	// +kubebuilder:pruning:PreserveUnknownFields
	Spec PublishedExportSpec `json:"spec"`
}

// PublishedExportSpec is a clusterset.ExportedService on the wire.
//
// +kubebuilder:object:generate=true
type PublishedExportSpec struct {
	// Cluster is the exporting member's cluster ID; it equals the object's
	// multicluster.kubernetes.io/source-cluster label.
	// +kubebuilder:validation:MaxLength=63
	Cluster string `json:"cluster"`
	// Namespace is the exported Service's namespace; empty in the member's
	// marker.
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// Name is the exported Service's name; empty in the member's marker.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name,omitempty"`
	// Part is the ID of a part (a DNS label), empty in a head and in the
	// marker. A part carries Cluster, Namespace, Name and Endpoints only.
	// +kubebuilder:validation:MaxLength=63
	Part string `json:"part,omitempty"`
	// Parts, in a head published in parts, are the IDs of its parts, as
	// its publisher last wrote them: a reader keeps what a part it held
	// carried while the head names it, so a part deleted by someone else
	// and written again takes no endpoint away meanwhile. Empty in a part,
	// a marker, a head published whole, and a head of an older publisher.
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	Parts []string `json:"parts,omitempty"`
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
	RenewTime *metav1.MicroTime `json:"renewTime,omitempty"`
	// +kubebuilder:validation:Minimum=1
	RenewIntervalSeconds int32 `json:"renewIntervalSeconds,omitempty"`
	// ReadsParts, in a marker, says that its member's readers assemble
	// publications from parts. A publisher publishes whole (every
	// endpoint in the head, as before parts) while a marker it reads
	// lacks it: a reader before parts would read a head without
	// endpoints as an export without any.
	ReadsParts bool `json:"readsParts,omitempty"`
}

// EndpointGroup is a reconciler.EndpointGroup on the wire.
//
// +kubebuilder:object:generate=true
type EndpointGroup struct {
	AddressType discoveryv1.AddressType    `json:"addressType"`
	Ports       []discoveryv1.EndpointPort `json:"ports,omitempty"`
	Endpoints   []discoveryv1.Endpoint     `json:"endpoints,omitempty"`
}

// PublishedExportList is a list of PublishedExports.
//
// +kubebuilder:object:generate=true
// +kubebuilder:object:root=true
type PublishedExportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PublishedExport `json:"items"`
}

// AddToScheme registers the types in a scheme, with the defaults of
// ClusterSetConfiguration (scheme.Default applies them).
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &PublishedExport{}, &PublishedExportList{}, &ClusterSetConfiguration{})
	metav1.AddToGroupVersion(s, GroupVersion)
	s.AddTypeDefaultingFunc(&ClusterSetConfiguration{}, func(obj any) { SetDefaults_ClusterSetConfiguration(obj.(*ClusterSetConfiguration)) })
	return nil
}
