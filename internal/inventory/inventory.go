package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// Selection is which ClusterProfiles are members: those of Namespace,
// of ClusterManager if set, with the labels of LabelSelector if set.
type Selection struct {
	Namespace      string
	ClusterManager string
	LabelSelector  string
}

// Selector returns the selection's label selector.
func (s Selection) Selector() (labels.Selector, error) {
	sel, err := labels.Parse(s.LabelSelector)
	if err != nil {
		return nil, fmt.Errorf("labelSelector %q: %w", s.LabelSelector, err)
	}
	if s.ClusterManager != "" {
		byManager, err := labels.Parse(ClusterManagerLabel + "=" + s.ClusterManager)
		if err != nil {
			return nil, fmt.Errorf("clusterManager %q: %w", s.ClusterManager, err)
		}
		reqs, _ := byManager.Requirements()
		sel = sel.Add(reqs...)
	}
	return sel, nil
}

// Read lists the selected ClusterProfiles, sorted by name. A profile that
// does not convert (a field of another type than the API's) is returned
// in bad, by name, with why.
func Read(ctx context.Context, dc dynamic.Interface, s Selection) (profiles []ClusterProfile, bad map[string]error, err error) {
	sel, err := s.Selector()
	if err != nil {
		return nil, nil, err
	}
	list, err := dc.Resource(Resource).Namespace(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, nil, fmt.Errorf("list ClusterProfiles of %s: %w", s.Namespace, err)
	}
	items := make([]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		items[i] = &list.Items[i]
	}
	profiles, bad = Convert(items)
	return profiles, bad, nil
}

// Convert converts profiles read as unstructured objects (a LIST's, an
// informer's), sorted by name. A profile that does not convert (a field
// of another type than the API's) is returned in bad, by name, with why.
func Convert(items []*unstructured.Unstructured) (profiles []ClusterProfile, bad map[string]error) {
	bad = map[string]error{}
	for _, item := range items {
		var p ClusterProfile
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, &p); err != nil {
			bad[item.GetName()] = fmt.Errorf("ClusterProfile %s/%s: %w", item.GetNamespace(), item.GetName(), err)
			continue
		}
		profiles = append(profiles, p)
	}
	slices.SortFunc(profiles, func(a, b ClusterProfile) int { return strings.Compare(a.Name, b.Name) })
	return profiles, bad
}

// Key names a profile in messages: namespace/name.
func (p *ClusterProfile) Key() string { return p.Namespace + "/" + p.Name }

// property returns the value of property name, and whether it is there.
func (p *ClusterProfile) property(name string) (string, bool) {
	for _, prop := range p.Status.Properties {
		if prop.Name == name {
			return prop.Value, true
		}
	}
	return "", false
}

// ClusterID returns the cluster ID that the profile's property
// cluster.clusterset.k8s.io gives (KEP-4322 asks cluster managers to copy
// it from the cluster's ClusterProperty). A profile without it, with one
// that is no cluster ID, or whose clusterset.k8s.io names another
// clusterset than clustersetName, is refused with why.
func (p *ClusterProfile) ClusterID(clustersetName string) (clusterset.ClusterID, error) {
	value, ok := p.property(ClusterIDProperty)
	if !ok {
		return "", fmt.Errorf("ClusterProfile %s has no property %s in its status (its cluster manager copies it from the cluster's ClusterProperty, KEP-2149)", p.Key(), ClusterIDProperty)
	}
	id, err := clusterset.ParseClusterID(value)
	if err != nil {
		return "", fmt.Errorf("ClusterProfile %s: property %s: %w", p.Key(), ClusterIDProperty, err)
	}
	if set, ok := p.property(ClustersetProperty); ok && set != clustersetName {
		return "", fmt.Errorf("ClusterProfile %s: property %s is %q, but this is clusterset %q", p.Key(), ClustersetProperty, set, clustersetName)
	}
	return id, nil
}

// ControlPlane returns the profile's ControlPlaneHealthy condition, nil
// if its cluster manager sets none.
func (p *ClusterProfile) ControlPlane() *metav1.Condition {
	return meta.FindStatusCondition(p.Status.Conditions, ControlPlaneHealthy)
}

// LoadProviderConfig reads a credential provider config file. A plugin
// command given as a relative path with a separator is made absolute
// against the file's folder, as kubeconfig's exec commands are.
func LoadProviderConfig(path string) (*ProviderConfig, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("provider config: %w", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	var cfg ProviderConfig
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("provider config %s: %w", path, err)
	}
	seen := map[string]bool{}
	for i := range cfg.Providers {
		pr := &cfg.Providers[i]
		switch {
		case pr.Name == "":
			return nil, fmt.Errorf("provider config %s: providers[%d]: name is missing", path, i)
		case seen[pr.Name]:
			return nil, fmt.Errorf("provider config %s: provider %q appears twice", path, pr.Name)
		case pr.ExecConfig == nil || pr.ExecConfig.Command == "":
			return nil, fmt.Errorf("provider config %s: provider %q: execConfig.command is missing", path, pr.Name)
		case pr.ExecConfig.APIVersion == "":
			return nil, fmt.Errorf("provider config %s: provider %q: execConfig.apiVersion is missing (client.authentication.k8s.io/v1)", path, pr.Name)
		}
		if err := pr.checkPolicies(); err != nil {
			return nil, fmt.Errorf("provider config %s: provider %q: %w", path, pr.Name, err)
		}
		seen[pr.Name] = true
		if cmd := pr.ExecConfig.Command; !filepath.IsAbs(cmd) && strings.ContainsRune(cmd, filepath.Separator) {
			pr.ExecConfig.Command = filepath.Join(filepath.Dir(path), cmd)
		}
	}
	if len(cfg.Providers) == 0 {
		return nil, fmt.Errorf("provider config %s: no providers", path)
	}
	return &cfg, nil
}

// Access is how a profile's cluster is reached: the access provider's
// connection details and the plugin that the provider config names for
// it.
type Access struct {
	// Profile is the profile's namespace/name.
	Profile  string                  `json:"profile"`
	Provider string                  `json:"provider"`
	Cluster  clientcmdv1.Cluster     `json:"cluster"`
	Exec     clientcmdapi.ExecConfig `json:"exec"`
}

// AccessOf returns how profile p's cluster is reached: through its first
// access provider (in the provider config's order) that cfg names.
func (cfg *ProviderConfig) AccessOf(p *ClusterProfile) (*Access, error) {
	byName := map[string]AccessProvider{}
	for _, ap := range p.Status.CredentialProviders {
		byName[ap.Name] = ap
	}
	for _, ap := range p.Status.AccessProviders {
		byName[ap.Name] = ap
	}
	for _, pr := range cfg.Providers {
		ap, ok := byName[pr.Name]
		if !ok {
			continue
		}
		if ap.Cluster.Server == "" {
			return nil, fmt.Errorf("ClusterProfile %s: access provider %q has no server", p.Key(), ap.Name)
		}
		exec, err := pr.execFor(ap.Cluster)
		if err != nil {
			return nil, fmt.Errorf("ClusterProfile %s: access provider %q: %w", p.Key(), ap.Name, err)
		}
		return &Access{Profile: p.Key(), Provider: pr.Name, Cluster: ap.Cluster, Exec: exec}, nil
	}
	var offered []string
	for name := range byName {
		offered = append(offered, name)
	}
	slices.Sort(offered)
	return nil, fmt.Errorf("ClusterProfile %s: none of its access providers %v is in the provider config", p.Key(), offered)
}

// RESTConfig returns a client config of the cluster: its server, CA and
// proxy, and the exec plugin, which (with provideClusterInfo) is given
// the cluster and the content of its client.authentication.k8s.io/exec
// extension.
func (a *Access) RESTConfig() (*rest.Config, error) {
	c := a.Cluster
	rc := &rest.Config{
		Host: c.Server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData: c.CertificateAuthorityData, ServerName: c.TLSServerName, Insecure: c.InsecureSkipTLSVerify,
		},
	}
	if c.ProxyURL != "" {
		proxy, err := url.Parse(c.ProxyURL)
		if err != nil {
			return nil, fmt.Errorf("ClusterProfile %s: proxy-url: %w", a.Profile, err)
		}
		rc.Proxy = http.ProxyURL(proxy)
	}
	exec := a.Exec
	exec.InteractiveMode = clientcmdapi.NeverExecInteractiveMode
	for _, ext := range c.Extensions {
		if ext.Name == ExecExtension {
			exec.Config = &runtime.Unknown{Raw: ext.Extension.Raw, ContentType: runtime.ContentTypeJSON}
		}
	}
	if exec.Command == "" {
		return nil, errors.New("inventory: an access without a plugin")
	}
	rc.ExecProvider = &exec
	return rc, nil
}

// checkPolicies refuses a policy the provider config may not name.
func (pr *Provider) checkPolicies() error {
	switch pr.ProfileSourcedCLIArgsPolicy {
	case "", PolicyIgnore, PolicyAppend:
	default:
		return fmt.Errorf("profileSourcedCLIArgsPolicy %q: want %s or %s", pr.ProfileSourcedCLIArgsPolicy, PolicyAppend, PolicyIgnore)
	}
	switch pr.ProfileSourcedEnvVarsPolicy {
	case "", PolicyIgnore, PolicyAppendIfNotExists, PolicyReplace:
	default:
		return fmt.Errorf("profileSourcedEnvVarsPolicy %q: want %s, %s or %s", pr.ProfileSourcedEnvVarsPolicy,
			PolicyAppendIfNotExists, PolicyReplace, PolicyIgnore)
	}
	return nil
}

// execFor returns the provider's plugin for a profile's cluster: its exec
// config (a copy: the provider config's is shared by every profile) with
// the cluster's exec extensions as the provider's policies allow.
func (pr *Provider) execFor(cluster clientcmdv1.Cluster) (clientcmdapi.ExecConfig, error) {
	exec := *pr.ExecConfig
	exec.Args = slices.Clone(exec.Args)
	exec.Env = slices.Clone(exec.Env)
	for _, ext := range cluster.Extensions {
		switch {
		case ext.Name == AdditionalArgsExtension && pr.ProfileSourcedCLIArgsPolicy == PolicyAppend:
			var args []string
			if err := yaml.Unmarshal(ext.Extension.Raw, &args); err != nil {
				return exec, fmt.Errorf("extension %s: want a list of arguments: %w", ext.Name, err)
			}
			exec.Args = append(exec.Args, args...)
		case ext.Name == AdditionalEnvsExtension && (pr.ProfileSourcedEnvVarsPolicy == PolicyAppendIfNotExists || pr.ProfileSourcedEnvVarsPolicy == PolicyReplace):
			var envs map[string]string
			if err := yaml.Unmarshal(ext.Extension.Raw, &envs); err != nil {
				return exec, fmt.Errorf("extension %s: want a map of variables: %w", ext.Name, err)
			}
			exec.Env = mergeEnv(exec.Env, envs, pr.ProfileSourcedEnvVarsPolicy == PolicyReplace)
		}
	}
	return exec, nil
}

// mergeEnv adds the profile's variables to the plugin's: those the plugin
// does not set, or with replace every one, the profile's value winning.
// The profile's are added sorted by name, after the plugin's.
func mergeEnv(own []clientcmdapi.ExecEnvVar, profile map[string]string, replace bool) []clientcmdapi.ExecEnvVar {
	var out []clientcmdapi.ExecEnvVar
	for _, e := range own {
		if _, ok := profile[e.Name]; ok && replace {
			continue
		}
		out = append(out, e)
	}
	for _, name := range slices.Sorted(maps.Keys(profile)) {
		if !replace && slices.ContainsFunc(own, func(e clientcmdapi.ExecEnvVar) bool { return e.Name == name }) {
			continue
		}
		out = append(out, clientcmdapi.ExecEnvVar{Name: name, Value: profile[name]})
	}
	return out
}
