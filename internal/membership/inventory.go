package membership

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/inventory"
)

// Inventory is where the clusterset's ClusterProfiles are read (KEP-4322)
// and how their clusters are reached (KEP-4322): each profile it selects
// is a member, as an entry of the config is.
type Inventory struct {
	// Kubeconfig (absolute) and Context, or InCluster, reach the cluster
	// that holds the ClusterProfiles.
	Kubeconfig, Context string
	InCluster           bool
	Selection           inventory.Selection
	// ProviderConfig is the path (absolute) of the credential provider
	// config, read again at each read of the profiles.
	ProviderConfig string
}

// checkInventory checks the config's inventory and makes its paths
// absolute against dir.
func checkInventory(inv *Inventory, dir string) error {
	if inv == nil {
		return nil
	}
	switch {
	case inv.InCluster && inv.Kubeconfig != "":
		return errors.New("inventory: set kubeconfig or inCluster, not both")
	case !inv.InCluster && inv.Kubeconfig == "":
		return errors.New("inventory: kubeconfig is missing (or set inCluster: true)")
	case inv.Context != "" && inv.Kubeconfig == "":
		return errors.New("inventory: context needs a kubeconfig")
	case inv.Selection.Namespace == "":
		return errors.New("inventory: namespace is missing: the namespace of the clusterset's ClusterProfiles")
	case inv.ProviderConfig == "":
		return errors.New("inventory: providerConfig is missing: the credential provider config (KEP-4322) that says how to reach the profiles' clusters")
	}
	if errs := validation.IsDNS1123Label(inv.Selection.Namespace); len(errs) > 0 {
		return fmt.Errorf("inventory: namespace %q is not a namespace name: %v", inv.Selection.Namespace, errs)
	}
	if _, err := inv.Selection.Selector(); err != nil {
		return fmt.Errorf("inventory: %w", err)
	}
	if inv.Kubeconfig != "" && !filepath.IsAbs(inv.Kubeconfig) {
		inv.Kubeconfig = filepath.Join(dir, inv.Kubeconfig)
	}
	if !filepath.IsAbs(inv.ProviderConfig) {
		inv.ProviderConfig = filepath.Join(dir, inv.ProviderConfig)
	}
	return nil
}

// restConfig reads the inventory cluster's kubeconfig (or the in-cluster
// config) anew.
func (inv *Inventory) restConfig() (*rest.Config, error) {
	m := Member{ID: "inventory", Kubeconfig: inv.Kubeconfig, Context: inv.Context, InCluster: inv.InCluster}
	return m.RESTConfig()
}

// inventoryReader reads the ClusterProfiles of the config's inventory in
// the background (refresh) and turns them into members when the config is
// applied (expand), so that an inventory that is slow or down never holds
// up the config's poll. What it last read is kept while the inventory
// cannot be read, as the last good config file is: a member whose profile
// cannot be read for a while stays a member (its exports are kept, its
// imports too) instead of leaving the clusterset.
type inventoryReader struct {
	mu sync.Mutex
	// tried says a read was tried with the current inventory settings.
	tried bool
	// profiles, bad are the last good read's, at readAt; readErr is why
	// the last read failed ("" if it did not), since failedAt.
	profiles         []inventory.ClusterProfile
	bad              map[string]error
	readAt, failedAt time.Time
	readErr          string
	providers        *inventory.ProviderConfig
	providersErr     string
	settings         Inventory
	// controlPlane holds, by member, what its profile says against its
	// cluster (expand).
	controlPlane map[clusterset.ClusterID]string
	// watch is the informer on the profiles (follow); changed is told of
	// each change it brings.
	watch   *profileWatch
	changed chan struct{}
	// clientFor returns the client a watch reads with (inventoryClient
	// without a timeout; the tests' fake).
	clientFor func(*Inventory) (dynamic.Interface, error)
}

func newInventoryReader() *inventoryReader {
	return &inventoryReader{controlPlane: map[clusterset.ClusterID]string{}, changed: make(chan struct{}, 1),
		clientFor: func(inv *Inventory) (dynamic.Interface, error) { return inventoryClient(inv, 0) }}
}

// inventoryTimeout bounds one read of the profiles.
const inventoryTimeout = 10 * time.Second

// refresh reads the provider config and the profiles of cfg's inventory
// once (a LIST): what a one-off reader (ReadInventory) does; a Set
// follows the profiles with an informer instead (follow). Nothing without
// an inventory.
func (r *inventoryReader) refresh(ctx context.Context, cfg *Config) {
	inv := cfg.Inventory
	if inv == nil {
		r.forget()
		return
	}
	providers, providersErr := inventory.LoadProviderConfig(inv.ProviderConfig)
	profiles, bad, err := readProfiles(ctx, inv)
	r.mu.Lock()
	r.setSettings(*inv)
	r.setProviders(providers, providersErr)
	r.mu.Unlock()
	if err != nil {
		r.failed(err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.read(profiles, bad)
}

// read takes profiles and bad as the last good read, now. r.mu is held.
func (r *inventoryReader) read(profiles []inventory.ClusterProfile, bad map[string]error) {
	r.tried = true
	r.profiles, r.bad, r.readAt, r.readErr = profiles, bad, time.Now(), ""
}

// forget drops everything read: the config has no inventory (any more).
func (r *inventoryReader) forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tried, r.profiles, r.bad, r.readAt, r.readErr, r.providers, r.providersErr = false, nil, nil, time.Time{}, "", nil, ""
	r.settings, r.controlPlane = Inventory{}, map[clusterset.ClusterID]string{}
}

// setSettings takes inv as the inventory's settings: what was read with
// other settings is not theirs, and is dropped. r.mu is held.
func (r *inventoryReader) setSettings(inv Inventory) {
	if r.settings != inv {
		r.profiles, r.bad, r.readAt, r.providers = nil, nil, time.Time{}, nil
		r.settings = inv
	}
}

// setProviders takes the provider config just read, or keeps the last
// good one with why the new one was refused. r.mu is held.
func (r *inventoryReader) setProviders(providers *inventory.ProviderConfig, err error) {
	if err == nil {
		r.providers, r.providersErr = providers, ""
		return
	}
	r.providersErr = err.Error()
}

func readProfiles(ctx context.Context, inv *Inventory) ([]inventory.ClusterProfile, map[string]error, error) {
	dc, err := inventoryClient(inv, inventoryTimeout)
	if err != nil {
		return nil, nil, err
	}
	return inventory.Read(ctx, dc, inv.Selection)
}

// expand returns cfg with a member for each profile last read, and the
// profiles left out, with why: no cluster ID, an ID that is a member
// already, no access provider that the provider config names.
func (r *inventoryReader) expand(cfg *Config) (*Config, []unresolved) {
	if cfg.Inventory == nil {
		return cfg, nil
	}
	out := *cfg
	out.Members = slices.Clone(cfg.Members)
	taken := namedIDs(cfg, "the config's member")
	var left []unresolved
	r.mu.Lock()
	defer r.mu.Unlock()
	controlPlane := map[clusterset.ClusterID]string{}
	for _, name := range slices.Sorted(maps.Keys(r.bad)) {
		left = append(left, profileLeftOut("of ClusterProfile "+cfg.Inventory.Selection.Namespace+"/"+name, r.bad[name].Error()))
	}
	for i := range r.profiles {
		p := &r.profiles[i]
		name := "of ClusterProfile " + p.Key()
		id, err := p.ClusterID(cfg.Clusterset)
		if err != nil {
			left = append(left, profileLeftOut(name, err.Error()))
			continue
		}
		if by := taken[id]; by != "" {
			left = append(left, profileLeftOut(name, fmt.Sprintf("its property %s names it %q, which is %s already", inventory.ClusterIDProperty, id, by)))
			continue
		}
		if r.providers == nil {
			left = append(left, profileLeftOut(name, "the provider config cannot be read: "+r.providersErr))
			continue
		}
		access, err := r.providers.AccessOf(p)
		if err != nil {
			left = append(left, profileLeftOut(name, err.Error()))
			continue
		}
		taken[id] = "ClusterProfile " + p.Key() + "'s"
		out.Members = append(out.Members, Member{ID: id, Access: access})
		if c := p.ControlPlane(); c != nil && c.Status != metav1.ConditionTrue {
			controlPlane[id] = fmt.Sprintf("its ClusterProfile %s says %s=%s (%s: %s)", p.Key(), c.Type, c.Status, c.Reason, c.Message)
		}
	}
	r.controlPlane = controlPlane
	return &out, left
}

// profileLeftOut is a profile left out of the membership, and why.
func profileLeftOut(name, cause string) unresolved {
	return unresolved{name: name, cause: cause, profile: true}
}

// note returns what member id's ClusterProfile says against its cluster
// (ControlPlaneHealthy not True), "" if nothing.
func (r *inventoryReader) note(id clusterset.ClusterID) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.controlPlane[id]
}

// readiness returns the inventory's /readyz line, and whether it holds
// readiness back (its first read not tried yet); "" without an inventory.
func (r *inventoryReader) readiness(cfg *Config) (line string, ready bool) {
	inv := cfg.Inventory
	if inv == nil {
		return "", true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	what := "ClusterProfiles of namespace " + inv.Selection.Namespace
	if sel, err := inv.Selection.Selector(); err == nil && !sel.Empty() {
		what += " with " + sel.String()
	}
	if !r.tried {
		return "[-]inventory failed: " + what + " not read yet", false
	}
	var detail []string
	switch {
	case r.readErr != "" && r.readAt.IsZero():
		detail = append(detail, fmt.Sprintf("cannot be read since %s: %s; no member from it yet", stamp(r.failedAt), r.readErr))
	case r.readErr != "":
		detail = append(detail, fmt.Sprintf("cannot be read since %s: %s; the %d read at %s stay", stamp(r.failedAt), r.readErr, len(r.profiles), stamp(r.readAt)))
	default:
		detail = append(detail, fmt.Sprintf("%d read at %s", len(r.profiles)+len(r.bad), stamp(r.readAt)))
	}
	if r.providersErr != "" {
		detail = append(detail, "provider config: "+r.providersErr)
	}
	return "[+]inventory ok: " + what + ": " + strings.Join(detail, "; "), true
}

// ReadInventory returns cfg with the members of its inventory as they are
// now (one read of its profiles and provider config), and the profiles
// left out, each as "ClusterProfile namespace/name: why"; cfg itself
// without an inventory. It is
// for a one-off reader (kubectl mcs); a Set reads its inventory again and
// again.
func ReadInventory(ctx context.Context, cfg *Config) (*Config, []string, error) {
	if cfg.Inventory == nil {
		return cfg, nil, nil
	}
	r := newInventoryReader()
	r.refresh(ctx, cfg)
	switch {
	case r.readErr != "":
		return nil, nil, fmt.Errorf("inventory: %s", r.readErr)
	case r.providers == nil:
		return nil, nil, fmt.Errorf("inventory: %s", r.providersErr)
	}
	expanded, left := r.expand(cfg)
	var out []string
	for _, u := range left {
		out = append(out, u.profileLine())
	}
	return expanded, out, nil
}

// profileLine says which profile u is and why it is left out, for
// ReadInventory.
func (u unresolved) profileLine() string {
	return strings.TrimPrefix(u.name, "of ") + ": " + u.cause
}
