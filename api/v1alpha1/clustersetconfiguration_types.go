package v1alpha1

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ClusterSetConfigurationKind is the kind of the clusterset config file.
const ClusterSetConfigurationKind = "ClusterSetConfiguration"

// DefaultPublicationNamespace is where members publish by default: the
// namespace config/ deploys mcs-syncer into.
const DefaultPublicationNamespace = "mcs-system"

// ClusterSetConfiguration is the clusterset config file that
// --clusterset-config names, a component config of its own kind:
//
//	apiVersion: mcs-syncer.io/v1alpha1
//	kind: ClusterSetConfiguration
//	clusterset: prod            # the clusterset's name (DNS-1123 label)
//	members:
//	- id: east                  # cluster ID (one or two DNS-1123 labels), unique
//	  kubeconfig: east.kubeconfig   # relative to this file, or absolute
//	  context: admin@east       # optional; default: the kubeconfig's current context
//	- id: west
//	  inCluster: true           # the cluster mcs-syncer runs in (no kubeconfig)
//	- id: south                 # hub mode: no connection settings, read through the hub
//	- kubeconfig: far.kubeconfig    # no id: the cluster's KEP-2149 ClusterProperty names it
//	hub:                        # optional: hub mode (per-cluster mode only)
//	  kubeconfig: hub.kubeconfig
//	  context: admin@hub        # optional
//	publicationNamespace: mcs-system  # optional (the default): where members publish
//
// These are the file's fields as written; internal/membership reads it
// (strictly: an unknown field is an error), applies the defaults
// (SetDefaults_ClusterSetConfiguration) and checks it.
//
// +kubebuilder:object:generate=true
type ClusterSetConfiguration struct {
	metav1.TypeMeta `json:",inline"`
	// Clusterset is the clusterset's name, a DNS-1123 label.
	Clusterset string `json:"clusterset"`
	// Members are the clusters of the clusterset.
	Members []ClusterSetMember `json:"members"`
	// Hub, if set, is the API server that members publish their exports
	// into, and through which the members without connection settings of
	// their own are read (hub mode).
	Hub *HubConnection `json:"hub,omitempty"`
	// PublicationNamespace is the namespace of the publications, in the
	// hub and in every member (default DefaultPublicationNamespace).
	PublicationNamespace string `json:"publicationNamespace,omitempty"`
}

// ClusterSetMember is one cluster of the clusterset and how it is reached.
//
// +kubebuilder:object:generate=true
type ClusterSetMember struct {
	// ID is the cluster ID (one or two DNS-1123 labels); empty: the
	// cluster's ClusterProperty cluster.clusterset.k8s.io names it.
	ID string `json:"id,omitempty"`
	// Kubeconfig is the path of a kubeconfig file, relative to the config
	// file's folder unless absolute.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Context selects a context of Kubeconfig; empty means its current one.
	Context string `json:"context,omitempty"`
	// InCluster uses the service account mcs-syncer runs as, instead of a
	// kubeconfig.
	InCluster bool `json:"inCluster,omitempty"`
}

// HubConnection is how the hub API server is reached.
//
// +kubebuilder:object:generate=true
type HubConnection struct {
	// Kubeconfig is the path of a kubeconfig file, relative to the config
	// file's folder unless absolute.
	Kubeconfig string `json:"kubeconfig"`
	// Context selects a context of Kubeconfig; empty means its current one.
	Context string `json:"context,omitempty"`
}

// SetDefaults_ClusterSetConfiguration fills in what the file may leave out
// (the name is the defaulting convention of Kubernetes' API packages).
func SetDefaults_ClusterSetConfiguration(c *ClusterSetConfiguration) {
	if c.PublicationNamespace == "" {
		c.PublicationNamespace = DefaultPublicationNamespace
	}
}

// DeepCopyObject makes a ClusterSetConfiguration a runtime.Object, for the
// scheme's defaulting (written here: a root marker would make controller-gen
// write a CRD for a file format).
func (c *ClusterSetConfiguration) DeepCopyObject() runtime.Object { return c.DeepCopy() }

// MarshalJSON writes the file with its apiVersion and kind, whether or not
// they were set, so that a config written by a program is one mcs-syncer
// reads.
func (c ClusterSetConfiguration) MarshalJSON() ([]byte, error) {
	type fields ClusterSetConfiguration // without this method
	c.APIVersion, c.Kind = GroupVersion.String(), ClusterSetConfigurationKind
	return json.Marshal(fields(c))
}
