package testbed

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/mcs-syncer/mcs-syncer/test/testbed/controlplane"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
)

// HubName is the hub's name among the testbed's control planes.
const HubName = "hub"

// hubStateFile records the hub of a running testbed.
const hubStateFile = "hub.json"

// HubNamespace is where the hub holds the publications and the members'
// identities (config/hub).
const HubNamespace = controlplane.SystemNamespace

// startHub starts the hub: an API server and etcd (no controllers, no
// nodes) with config/hub applied.
func (cs *Clusterset) startHub(ctx context.Context) error {
	hub, err := cs.newHub(ctx, HubName, len(cs.Clusters), false)
	if err != nil {
		return err
	}
	cs.Hub = hub
	raw, err := json.MarshalIndent(hub, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(cs.StateDir, hubStateFile), raw, 0o644)
}

// StartHAHub starts another hub, named name, highly available as kind's
// HA control planes are (controlplane.Spec.HA: three etcd members, two API
// servers, haproxy in front), with config/hub applied: for failover tests,
// which give the members identities there (HubIdentityIn) and end it with
// Destroy. It lives as long as the calling process; the testbed's
// teardown stops it too.
func (cs *Clusterset) StartHAHub(ctx context.Context, name string) (*controlplane.ControlPlane, error) {
	// The index after the regular hub's, so that no CIDR is shared.
	return cs.newHub(ctx, name, len(cs.Clusters)+1, true)
}

// StartBareHub starts another hub, named name, without config/hub (only
// what every control plane of the testbed has: the CRDs and the namespace
// mcs-system): for a test that installs the hub's objects itself, as a
// user does (TestInstalledWithHelm). It lives as long as the calling
// process, which ends it with Destroy; the testbed's teardown stops it
// too.
func (cs *Clusterset) StartBareHub(ctx context.Context, name string) (*controlplane.ControlPlane, error) {
	// Two after the regular hub's (StartHAHub's is one after it), so that
	// no CIDR is shared.
	return cs.startHubControlPlane(ctx, name, len(cs.Clusters)+2, false)
}

// newHub starts a hub control plane and applies config/hub to it.
func (cs *Clusterset) newHub(ctx context.Context, name string, index int, ha bool) (*controlplane.ControlPlane, error) {
	hub, err := cs.startHubControlPlane(ctx, name, index, ha)
	if err != nil {
		return nil, err
	}
	return hub, ApplyHubConfig(ctx, hub)
}

// startHubControlPlane starts a hub's control plane, nothing of ours
// applied to it.
func (cs *Clusterset) startHubControlPlane(ctx context.Context, name string, index int, ha bool) (*controlplane.ControlPlane, error) {
	hub := controlplane.New(controlplane.Spec{
		Name: name, Index: index, Hub: true, HA: ha, Generic: cs.opts.GenericHub && !ha,
		WorkDir:        filepath.Join(cs.StateDir, "kwok"),
		KubeconfigPath: filepath.Join(cs.StateDir, name+".kubeconfig"),
		BinDir:         cs.BinDir, AuditPolicy: cs.opts.AuditPolicy,
	})
	if err := hub.Create(ctx); err != nil {
		if ha {
			// What started of it would hold its ports, and the next HA
			// hub would fail on them (CI: a failed start of one made the
			// next test's etcds unhealthy).
			err = errors.Join(err, hub.Destroy(context.Background()))
		}
		return nil, fmt.Errorf("testbed: %s: %w", name, err)
	}
	return hub, nil
}

// ApplyHubConfig applies config/hub (the namespace, the members' Role and
// the admission policy) to hub: on a new hub, or again on a wiped one.
func ApplyHubConfig(ctx context.Context, hub *controlplane.ControlPlane) error {
	root, err := host.RepoRoot()
	if err != nil {
		return err
	}
	for _, file := range []string{"namespace.yaml", "role.yaml", "admission.yaml"} {
		if err := applyToHub(ctx, hub, filepath.Join(root, "config", "hub", file)); err != nil {
			return err
		}
	}
	return nil
}

// applyToHub creates every object of a YAML file in hub.
func applyToHub(ctx context.Context, hub *controlplane.ControlPlane, path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("testbed: %s: %w", hub.Name, err)
	}
	cl, err := hub.Client()
	if err != nil {
		return err
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("testbed: %s: %s: %w", hub.Name, path, err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
			return fmt.Errorf("testbed: %s: %s: %w", hub.Name, path, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := cl.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("testbed: %s: create %s %s from %s: %w", hub.Name, obj.GetKind(), obj.GetName(), path, err)
		}
	}
}

// loadHub reads back the hub of a testbed started by another process, if
// it has one.
func (cs *Clusterset) loadHub() error {
	raw, err := os.ReadFile(filepath.Join(cs.StateDir, hubStateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("testbed: hub state: %w", err)
	}
	hub := &controlplane.ControlPlane{}
	if err := json.Unmarshal(raw, hub); err != nil {
		return fmt.Errorf("testbed: hub state: %w", err)
	}
	if err := hub.Load(cs.BinDir); err != nil {
		return err
	}
	cs.Hub = hub
	return nil
}

// HubIdentity gives member its identity in the hub (ServiceAccount
// mcs-system/member-<member>, bound to Role mcs-syncer-member, as
// config/hub/member-binding.yaml describes) and writes a kubeconfig of
// the hub with a token of it (valid for a day) to path.
func (cs *Clusterset) HubIdentity(ctx context.Context, member, path string) error {
	if cs.Hub == nil {
		return errors.New("testbed: no hub (start it with Options.Hub)")
	}
	return HubIdentityIn(ctx, cs.Hub, member, path)
}

// HubIdentityIn is HubIdentity in the hub given, such as one that
// StartHAHub started.
func HubIdentityIn(ctx context.Context, hub *controlplane.ControlPlane, member, path string) error {
	kube, err := hub.Kubernetes()
	if err != nil {
		return err
	}
	sa := "member-" + member
	if _, err := kube.CoreV1().ServiceAccounts(HubNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("testbed: hub: ServiceAccount %s: %w", sa, err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "mcs-syncer-member"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: HubNamespace}},
	}
	if _, err := kube.RbacV1().RoleBindings(HubNamespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("testbed: hub: RoleBinding %s: %w", sa, err)
	}
	tr, err := kube.CoreV1().ServiceAccounts(HubNamespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("testbed: hub: token of %s: %w", sa, err)
	}
	rc := hub.RESTConfig()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["hub"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthorityData: rc.CAData}
	kc.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: sa}
	kc.CurrentContext = "hub"
	return clientcmd.WriteToFile(*kc, path)
}

// HubConfig is the clusterset config of member's own mcs-syncer in hub
// mode: its own cluster through its admin kubeconfig, the hub through
// hubKubeconfig, every other member through the hub.
func (cs *Clusterset) HubConfig(member, hubKubeconfig string) ClustersetConfig {
	conf := ClustersetConfig{Clusterset: "testbed", Hub: &HubSettings{Kubeconfig: hubKubeconfig}}
	for _, c := range cs.Clusters {
		m := Member{ID: c.Name}
		if c.Name == member {
			m.Kubeconfig, m.Context = c.KubeconfigPath, c.Context
		}
		conf.Members = append(conf.Members, m)
	}
	return conf
}

// writeHubConfigs gives every member its hub identity and writes its
// hub-mode clusterset config to <state>/hub/<member>.yaml (for `testbed
// up --hub` and the demo).
func (cs *Clusterset) writeHubConfigs(ctx context.Context) error {
	dir := filepath.Join(cs.StateDir, "hub")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, c := range cs.Clusters {
		kubeconfig := filepath.Join(dir, c.Name+".kubeconfig")
		if err := cs.HubIdentity(ctx, c.Name, kubeconfig); err != nil {
			return err
		}
		raw, err := yaml.Marshal(cs.HubConfig(c.Name, kubeconfig))
		if err != nil {
			return err
		}
		if err := os.WriteFile(cs.HubConfigPath(c.Name), raw, 0o600); err != nil {
			return fmt.Errorf("testbed: hub config: %w", err)
		}
	}
	return nil
}

// HubConfigPath is where Start wrote member's hub-mode clusterset config.
func (cs *Clusterset) HubConfigPath(member string) string {
	return filepath.Join(cs.StateDir, "hub", member+".yaml")
}
