package membership

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/inventory"
)

// Config is the clusterset config as mcs-syncer runs it: the file
// (v1alpha1.ClusterSetConfiguration, whose doc shows it) read strictly,
// defaulted through its scheme and checked, with the kubeconfig paths made
// absolute and what each member's entry implies.
//
// Unknown fields, bad or duplicate IDs, a member with both kubeconfig and
// inCluster (or with neither, unless there is a hub), and two members
// reaching the same API server make the file invalid. With a hub, a member
// without kubeconfig and inCluster is read through the hub
// (Member.ThroughHub). A member with kubeconfig or inCluster may leave out
// its id: its cluster's ClusterProperty cluster.clusterset.k8s.io names it
// (Member.IDFromCluster; the Set reads it). A member whose kubeconfig
// cannot be read (missing, unreadable, without the named context) does
// not make the file invalid: that member is reported and retried while
// the others run (Member.RESTConfig's error).
type Config struct {
	// APIVersion and Kind say which schema the file follows, as in
	// Kubernetes' component configs: ConfigAPIVersion, ConfigKind.
	APIVersion string
	Kind       string
	Clusterset string
	Members    []Member
	// Hub, if set, is the API server that members publish their exports
	// into, and through which the members without connection settings of
	// their own are read (hub mode).
	Hub *Hub
	// PublicationNamespace is the namespace of the publications, in the
	// hub and in every member (default DefaultPublicationNamespace).
	PublicationNamespace string
	// Inventory, if set, is a ClusterProfile inventory whose selected
	// profiles are members too (inventory.go).
	Inventory *Inventory
	// Namespaces are the namespaces exported and imported (the file's
	// exportNamespaces, with PublicationNamespace as mcs-syncer's own).
	Namespaces clusterset.NamespacePolicy
	// AddressRanges are the members' addressRanges, by ID: the only
	// addresses their endpoints are imported with.
	AddressRanges map[clusterset.ClusterID][]netip.Prefix
}

// The schema of the clusterset config file. A file of another apiVersion
// or kind, or without them (as before they were introduced), is refused
// with what to write.
const (
	ConfigAPIVersion = v1alpha1.GroupName + "/" + v1alpha1.Version
	ConfigKind       = v1alpha1.ClusterSetConfigurationKind
)

// configScheme knows the file's type and its defaults.
var configScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}()

// checkSchema reads the file's apiVersion and kind before anything else: a
// file of another schema is refused for that, not for its fields.
func checkSchema(raw []byte) error {
	var typeMeta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(raw, &typeMeta); err != nil {
		return fmt.Errorf("parse: %w", err)
	}
	switch {
	case typeMeta.APIVersion == "" && typeMeta.Kind == "":
		return fmt.Errorf("apiVersion and kind are missing: a clusterset config begins with the lines \"apiVersion: %s\" and \"kind: %s\"; add them to a file written before they were required (docs/configuration.md, \"Upgrading a config without apiVersion\")", ConfigAPIVersion, ConfigKind)
	case typeMeta.APIVersion != ConfigAPIVersion:
		return fmt.Errorf("apiVersion %q is not one this mcs-syncer reads: it reads %s", typeMeta.APIVersion, ConfigAPIVersion)
	case typeMeta.Kind != ConfigKind:
		return fmt.Errorf("kind %q: a clusterset config is of kind %s", typeMeta.Kind, ConfigKind)
	}
	return nil
}

// DefaultPublicationNamespace is where members publish by default: the
// namespace config/ deploys mcs-syncer into.
const DefaultPublicationNamespace = v1alpha1.DefaultPublicationNamespace

// Hub is how the hub API server is reached.
type Hub struct {
	// Kubeconfig is the path of the hub's kubeconfig file, absolute.
	Kubeconfig string
	// Context selects a context of Kubeconfig; empty means its current one.
	Context string
}

// RESTConfig reads the hub's kubeconfig anew.
func (h *Hub) RESTConfig() (*rest.Config, error) {
	m := Member{ID: "hub", Kubeconfig: h.Kubeconfig, Context: h.Context}
	return m.RESTConfig()
}

// Fingerprint changes when the hub's connection settings change, the
// content of its kubeconfig included (a rotated token).
func (h *Hub) Fingerprint() [32]byte {
	m := Member{Kubeconfig: h.Kubeconfig, Context: h.Context}
	return m.connectionPrint()
}

// Member is one cluster of the clusterset.
type Member struct {
	ID clusterset.ClusterID
	// Kubeconfig is the path of a kubeconfig file, absolute (made so
	// against the config file's folder).
	Kubeconfig string
	// Context selects a context of Kubeconfig; empty means its current one.
	Context string
	// InCluster uses the service account mcs-syncer runs as, instead of a
	// kubeconfig.
	InCluster bool
	// ThroughHub says the member is read through the hub: Kubeconfig and
	// Context are the hub's (set by ParseConfig for a member without
	// connection settings in hub mode).
	ThroughHub bool
	// IDFromCluster says the config leaves the member's ID to its cluster
	// (KEP-2149): ID is the one its ClusterProperty
	// cluster.clusterset.k8s.io gave, empty until it is read (set by
	// ParseConfig for an entry without id).
	IDFromCluster bool
	// Access, for a member of the inventory, is how its ClusterProfile
	// says it is reached (server, CA, exec credential plugin); it replaces
	// Kubeconfig.
	Access *inventory.Access
}

// name is how messages call the member: its ID, or, while its cluster has
// not named it, its entry and connection settings.
func (m *Member) name() string {
	switch {
	case m.ID != "":
		return string(m.ID)
	case m.Access != nil:
		return "of ClusterProfile " + m.Access.Profile
	case m.InCluster:
		return "without id (inCluster)"
	}
	return "without id (kubeconfig " + m.Kubeconfig + ")"
}

// LoadConfig reads and validates a clusterset config file.
func LoadConfig(path string) (*Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("clusterset config: %w", err)
	}
	cfg, err := ParseConfig(raw, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("clusterset config %s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig parses and validates a clusterset config; relative kubeconfig
// paths are taken relative to dir.
func ParseConfig(raw []byte, dir string) (*Config, error) {
	if err := checkSchema(raw); err != nil {
		return nil, err
	}
	var file v1alpha1.ClusterSetConfiguration
	if err := yaml.UnmarshalStrict(raw, &file); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	configScheme.Default(&file)
	cfg := fromFile(&file)
	var err error
	if cfg.AddressRanges, err = addressRanges(file.Members); err != nil {
		return nil, err
	}
	if cfg.Clusterset == "" {
		return nil, errors.New("clusterset: name is missing")
	}
	if errs := validation.IsDNS1123Label(cfg.Clusterset); len(errs) > 0 {
		return nil, fmt.Errorf("clusterset: name %q is not a DNS-1123 label: %v", cfg.Clusterset, errs)
	}
	if len(cfg.Members) == 0 && cfg.Inventory == nil {
		return nil, errors.New("members: no member clusters (and no inventory)")
	}
	if err := checkInventory(cfg.Inventory, dir); err != nil {
		return nil, err
	}
	if errs := validation.IsDNS1123Label(cfg.PublicationNamespace); len(errs) > 0 {
		return nil, fmt.Errorf("publicationNamespace: %q is not a namespace name: %v", cfg.PublicationNamespace, errs)
	}
	if err := errors.Join(clusterset.CheckNamespacePatterns("exportNamespaces.allow", cfg.Namespaces.Allow),
		clusterset.CheckNamespacePatterns("exportNamespaces.deny", cfg.Namespaces.Deny)); err != nil {
		return nil, err
	}
	if h := cfg.Hub; h != nil {
		if h.Kubeconfig == "" {
			return nil, errors.New("hub: kubeconfig is missing")
		}
		if !filepath.IsAbs(h.Kubeconfig) {
			h.Kubeconfig = filepath.Join(dir, h.Kubeconfig)
		}
	}
	if err := checkMembers(cfg, dir); err != nil {
		return nil, err
	}
	return cfg, nil
}

// addressRanges reads the members' addressRanges: CIDRs in canonical form
// (no host bits set), on members with an ID.
func addressRanges(members []v1alpha1.ClusterSetMember) (map[clusterset.ClusterID][]netip.Prefix, error) {
	var out map[clusterset.ClusterID][]netip.Prefix
	for i, m := range members {
		if len(m.AddressRanges) == 0 {
			continue
		}
		if m.ID == "" {
			return nil, fmt.Errorf("members[%d]: addressRanges needs an id (a member named by its cluster's ClusterProperty has none here to hold them by)", i)
		}
		for j, r := range m.AddressRanges {
			p, err := netip.ParsePrefix(r)
			if err != nil || p != p.Masked() {
				return nil, fmt.Errorf("members[%d].addressRanges[%d]: %q is not a CIDR such as 10.100.0.0/16 or fd00:100::/64 (no host bits set)", i, j, r)
			}
			if out == nil {
				out = map[clusterset.ClusterID][]netip.Prefix{}
			}
			out[clusterset.ClusterID(m.ID)] = append(out[clusterset.ClusterID(m.ID)], p)
		}
	}
	return out, nil
}

// fromFile is the Config of a file as written, before its checks.
func fromFile(file *v1alpha1.ClusterSetConfiguration) *Config {
	cfg := &Config{APIVersion: file.APIVersion, Kind: file.Kind, Clusterset: file.Clusterset, PublicationNamespace: file.PublicationNamespace}
	cfg.Namespaces.Own = file.PublicationNamespace
	if n := file.ExportNamespaces; n != nil {
		cfg.Namespaces.Allow, cfg.Namespaces.Deny = n.Allow, n.Deny
	}
	for _, m := range file.Members {
		cfg.Members = append(cfg.Members, Member{ID: clusterset.ClusterID(m.ID), Kubeconfig: m.Kubeconfig, Context: m.Context, InCluster: m.InCluster})
	}
	if file.Hub != nil {
		cfg.Hub = &Hub{Kubeconfig: file.Hub.Kubeconfig, Context: file.Hub.Context}
	}
	if inv := file.Inventory; inv != nil {
		cfg.Inventory = &Inventory{Kubeconfig: inv.Kubeconfig, Context: inv.Context, InCluster: inv.InCluster, ProviderConfig: inv.ProviderConfig,
			Selection: inventory.Selection{Namespace: inv.Namespace, ClusterManager: inv.ClusterManager, LabelSelector: inv.LabelSelector}}
	}
	return cfg
}

// checkMembers checks the members' IDs and connection settings: unique IDs,
// kubeconfig or inCluster (or neither, read through the hub), and no two
// members reaching the same API server. Relative kubeconfig paths are made
// absolute against dir.
func checkMembers(cfg *Config, dir string) error {
	byID := map[clusterset.ClusterID]bool{}
	byServer := map[string]string{}
	for i := range cfg.Members {
		m := &cfg.Members[i]
		if err := checkMemberID(i, m, byID); err != nil {
			return err
		}
		server, err := memberServer(m, cfg.Hub, dir)
		if err != nil {
			return err
		}
		if server == "" {
			continue // read through the hub (many are), or its own problem, reported when it is engaged
		}
		if other, ok := byServer[server]; ok {
			if server == "in-cluster" {
				return fmt.Errorf("member %s: inCluster is already member %s", m.name(), other)
			}
			return fmt.Errorf("member %s: reaches the same API server (%s) as member %s", m.name(), server, other)
		}
		byServer[server] = m.name()
	}
	return nil
}

// checkMemberID checks entry i's ID (one of its own, or left to its
// cluster when it has connection settings) and records it in byID.
func checkMemberID(i int, m *Member, byID map[clusterset.ClusterID]bool) error {
	switch {
	case m.ID == "" && m.Kubeconfig == "" && !m.InCluster:
		return fmt.Errorf("members[%d]: id is missing: only a member with kubeconfig or inCluster may leave it to its cluster's ClusterProperty %s", i, clusterIDProperty)
	case m.ID == "":
		m.IDFromCluster = true
		return nil
	}
	if _, err := clusterset.ParseClusterID(string(m.ID)); err != nil {
		return fmt.Errorf("members[%d]: %w", i, err)
	}
	if byID[m.ID] {
		return fmt.Errorf("members[%d]: cluster ID %q appears twice", i, m.ID)
	}
	byID[m.ID] = true
	return nil
}

// memberServer checks how m is reached and returns the API server it
// reaches ("in-cluster" for inCluster), or "" when that is not to be
// compared: a member read through the hub (its settings become the hub's),
// or one whose kubeconfig cannot be read now. A relative kubeconfig path
// is made absolute against dir.
func memberServer(m *Member, hub *Hub, dir string) (string, error) {
	switch {
	case m.InCluster && m.Kubeconfig != "":
		return "", fmt.Errorf("member %s: set kubeconfig or inCluster, not both", m.name())
	case m.Context != "" && (m.InCluster || m.Kubeconfig == ""):
		return "", fmt.Errorf("member %s: context needs a kubeconfig", m.name())
	case m.InCluster:
		return "in-cluster", nil
	case m.Kubeconfig == "" && hub != nil:
		m.ThroughHub, m.Kubeconfig, m.Context = true, hub.Kubeconfig, hub.Context
		return "", nil
	case m.Kubeconfig == "":
		return "", fmt.Errorf("member %s: kubeconfig is missing (or set inCluster: true, or read it through a hub)", m.ID)
	}
	if !filepath.IsAbs(m.Kubeconfig) {
		m.Kubeconfig = filepath.Join(dir, m.Kubeconfig)
	}
	rc, err := m.RESTConfig()
	if err != nil {
		return "", nil
	}
	return rc.Host, nil
}

// RESTConfig reads the member's kubeconfig (or the in-cluster config) anew:
// a kubeconfig that was missing or wrong a moment ago may be fixed now.
func (m *Member) RESTConfig() (*rest.Config, error) {
	if m.Access != nil {
		rc, err := m.Access.RESTConfig()
		if err != nil {
			return nil, fmt.Errorf("member %s: %w", m.name(), err)
		}
		return rc, nil
	}
	if m.InCluster {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("member %s: in-cluster config: %w", m.name(), err)
		}
		return rc, nil
	}
	if _, err := os.Stat(m.Kubeconfig); err != nil {
		return nil, fmt.Errorf("member %s: kubeconfig %s: %w", m.name(), m.Kubeconfig, err)
	}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: m.Kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: m.Context},
	).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("member %s: kubeconfig %s (context %q): %w", m.name(), m.Kubeconfig, m.Context, err)
	}
	return rc, nil
}

// fingerprint changes when anything that decides how the member is reached
// changes, the content of its kubeconfig included (rotated credentials).
func (m *Member) fingerprint() [sha256.Size]byte {
	conn := m.connectionPrint()
	return sha256.Sum256(append([]byte(string(m.ID)+"\x00"), conn[:]...))
}

// connectionPrint is the fingerprint of how the member is reached, its ID
// aside: the same for every member read through one hub.
func (m *Member) connectionPrint() [sha256.Size]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%v\x00%v\x00", m.Kubeconfig, m.Context, m.InCluster, m.ThroughHub)
	if m.Access != nil {
		// What the profile and the provider config say, the plugin's
		// command, arguments and environment included.
		access, _ := json.Marshal(m.Access)
		h.Write(access)
	}
	if raw, err := os.ReadFile(m.Kubeconfig); err == nil {
		h.Write(raw)
	} else if m.Kubeconfig != "" {
		fmt.Fprint(h, err)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// Member returns the member with the given ID, or nil.
func (c *Config) Member(id clusterset.ClusterID) *Member {
	for i := range c.Members {
		if c.Members[i].ID == id {
			return &c.Members[i]
		}
	}
	return nil
}

// Usable returns an error naming every member's problem when no member's
// connection settings can be read at all: such a config cannot do
// anything.
func (c *Config) Usable() error {
	var problems []string
	if c.Inventory != nil {
		_, err := c.Inventory.restConfig()
		if err == nil {
			return nil // its members may be reached
		}
		problems = append(problems, "inventory: "+err.Error())
	}
	for i := range c.Members {
		_, err := c.Members[i].RESTConfig()
		if err == nil {
			return nil
		}
		problems = append(problems, err.Error())
	}
	return fmt.Errorf("no member can be reached: %s", strings.Join(problems, "; "))
}
