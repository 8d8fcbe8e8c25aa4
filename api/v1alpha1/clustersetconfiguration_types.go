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
//	inventory:                  # optional: more members, from ClusterProfiles (KEP-4322)
//	  kubeconfig: fleet.kubeconfig  # the cluster that holds them (or inCluster: true)
//	  namespace: fleet          # the namespace of the ClusterProfiles
//	  clusterManager: ocm       # optional: only those of this cluster manager
//	  labelSelector: env=prod   # optional: only those with these labels
//	  providerConfig: providers.json  # credential plugins per access provider (KEP-4322)
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
	// Inventory, if set, is a ClusterProfile inventory (KEP-4322): each
	// profile it selects is a member too, beside Members.
	Inventory *ClusterInventory `json:"inventory,omitempty"`
	// ExportNamespaces limits the namespaces whose Services the clusterset
	// exports and imports. Whatever it says, kube-system, kube-public,
	// kube-node-lease (unless Allow names them) and PublicationNamespace
	// are not exported.
	ExportNamespaces *ExportNamespaces `json:"exportNamespaces,omitempty"`
}

// ExportNamespaces are the namespaces a clusterset exports from. Each
// entry is a namespace's name, or a prefix followed by "*" ("team-*").
//
// +kubebuilder:object:generate=true
type ExportNamespaces struct {
	// Allow, if not empty, are the only namespaces exported; naming
	// kube-system, kube-public or kube-node-lease here (by name, not by a
	// prefix) allows it.
	Allow []string `json:"allow,omitempty"`
	// Deny are namespaces never exported, besides the defaults; a
	// namespace both allowed and denied is denied.
	Deny []string `json:"deny,omitempty"`
}

// ClusterInventory is where a clusterset's ClusterProfiles (KEP-4322,
// multicluster.x-k8s.io/v1alpha1) are read, which of them are members, and
// how their clusters are reached: through the access provider of a
// profile that the provider config names, with that provider's exec
// credential plugin (KEP-4322).
//
// +kubebuilder:object:generate=true
type ClusterInventory struct {
	// Kubeconfig is the path of a kubeconfig file of the cluster that holds
	// the ClusterProfiles, relative to the config file's folder unless
	// absolute.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Context selects a context of Kubeconfig; empty means its current one.
	Context string `json:"context,omitempty"`
	// InCluster reads the ClusterProfiles of the cluster mcs-syncer runs
	// in, as its service account.
	InCluster bool `json:"inCluster,omitempty"`
	// Namespace is the namespace of the ClusterProfiles (KEP-4322: one
	// clusterset's profiles share a namespace).
	Namespace string `json:"namespace"`
	// ClusterManager, if set, selects the profiles of that cluster manager
	// only (label x-k8s.io/cluster-manager).
	ClusterManager string `json:"clusterManager,omitempty"`
	// LabelSelector, if set, selects the profiles with these labels
	// (kubectl's syntax).
	LabelSelector string `json:"labelSelector,omitempty"`
	// ProviderConfig is the path of the credential provider config
	// (KEP-4322, JSON: {"providers": [{"name", "execConfig",
	// "profileSourcedCLIArgsPolicy", "profileSourcedEnvVarsPolicy"}]}),
	// relative to the config file's folder unless absolute. A profile is reached
	// through its first access provider that the config names.
	ProviderConfig string `json:"providerConfig"`
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
	// AddressRanges, if set, are the only addresses (CIDRs, such as the
	// member's pod and node CIDRs) that the member's endpoints may have:
	// every consumer leaves out and counts an endpoint with another
	// address. Needs ID.
	AddressRanges []string `json:"addressRanges,omitempty"`
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
