package inventory

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
)

// GroupVersion is the ClusterProfile API's.
var GroupVersion = schema.GroupVersion{Group: "multicluster.x-k8s.io", Version: "v1alpha1"}

// Resource is the ClusterProfiles' resource.
var Resource = GroupVersion.WithResource("clusterprofiles")

const (
	// ClusterManagerLabel names the cluster manager that wrote a profile
	// (KEP-4322).
	ClusterManagerLabel = "x-k8s.io/cluster-manager"
	// ClusterIDProperty is the property that a cluster manager copies
	// from the cluster's ClusterProperty (KEP-2149): the cluster's ID.
	ClusterIDProperty = "cluster.clusterset.k8s.io"
	// ClustersetProperty names the clusterset the cluster belongs to.
	ClustersetProperty = "clusterset.k8s.io"
	// ControlPlaneHealthy is the condition a cluster manager sets on a
	// profile whose control plane it finds healthy or not.
	ControlPlaneHealthy = "ControlPlaneHealthy"
	// ExecExtension is the cluster extension whose content reaches the
	// exec plugin as ExecCredential's spec.cluster.config (client-go's
	// reserved key).
	ExecExtension = "client.authentication.k8s.io/exec"
)

// ClusterProfile is one cluster of the inventory, as far as mcs-syncer
// reads it.
type ClusterProfile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ClusterProfileSpec   `json:"spec"`
	Status            ClusterProfileStatus `json:"status,omitempty"`
}

// ClusterProfileSpec is what the cluster manager declares.
type ClusterProfileSpec struct {
	DisplayName    string         `json:"displayName,omitempty"`
	ClusterManager ClusterManager `json:"clusterManager"`
}

// ClusterManager names the cluster manager that owns the profile.
type ClusterManager struct {
	Name string `json:"name"`
}

// ClusterProfileStatus is what the cluster manager observed of the
// cluster.
type ClusterProfileStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	Properties []Property         `json:"properties,omitempty"`
	// AccessProviders are how the cluster is reached, one per provider
	// (KEP-4322). CredentialProviders is their former name: both are
	// read, AccessProviders winning for the same name.
	AccessProviders     []AccessProvider `json:"accessProviders,omitempty"`
	CredentialProviders []AccessProvider `json:"credentialProviders,omitempty"`
}

// Property is one name and value the cluster manager reports.
type Property struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// AccessProvider is the cluster's connection details as one provider
// gives them: its server, CA, proxy and extensions (a kubeconfig's
// cluster entry).
type AccessProvider struct {
	Name    string              `json:"name"`
	Cluster clientcmdv1.Cluster `json:"cluster,omitempty"`
}

// ProviderConfig is the consumer's credential provider config
// (KEP-4322): for each access provider it trusts, the exec credential
// plugin that gets a credential for it.
type ProviderConfig struct {
	Providers []Provider `json:"providers"`
}

// Provider is one access provider's plugin, and what it takes of the
// profiles' exec extensions (cluster-inventory-api v0.1.2): none unless
// its policies say so, as the profile is written by the cluster manager,
// not by this consumer.
type Provider struct {
	Name       string                   `json:"name"`
	ExecConfig *clientcmdapi.ExecConfig `json:"execConfig"`
	// ProfileSourcedCLIArgsPolicy: Append adds the arguments of a
	// profile's AdditionalArgsExtension after the plugin's; Ignore (or
	// empty) does not.
	ProfileSourcedCLIArgsPolicy string `json:"profileSourcedCLIArgsPolicy,omitempty"`
	// ProfileSourcedEnvVarsPolicy: AppendIfNotExists adds the variables of
	// a profile's AdditionalEnvsExtension that the plugin's config does not
	// set; Replace adds them all, the profile's winning; Ignore (or empty)
	// adds none.
	ProfileSourcedEnvVarsPolicy string `json:"profileSourcedEnvVarsPolicy,omitempty"`
}

// The policies of Provider and the extensions they apply to.
const (
	// AdditionalArgsExtension holds a YAML (or JSON) list of arguments.
	AdditionalArgsExtension = "clusterprofiles.multicluster.x-k8s.io/exec/additional-args"
	// AdditionalEnvsExtension holds a YAML (or JSON) map of variables.
	AdditionalEnvsExtension = "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs"

	PolicyAppend            = "Append"
	PolicyIgnore            = "Ignore"
	PolicyAppendIfNotExists = "AppendIfNotExists"
	PolicyReplace           = "Replace"
)
