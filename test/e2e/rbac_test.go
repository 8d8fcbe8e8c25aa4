package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/imports"
	"github.com/mcs-syncer/mcs-syncer/internal/publish"
	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/controlplane"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/host"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/workloads"
)

// TestPerClusterModeWithLeastPrivilege runs mcs-syncer in per-cluster
// mode, one process per member, each with ServiceAccount tokens bound to
// the roles of config/rbac (not the admin kubeconfig): its own cluster
// through ClusterRole mcs-syncer, the others through
// mcs-syncer-remote-reader. The export/import scenario passes, no process
// is refused anything, and the remote identity cannot write.
func TestPerClusterModeWithLeastPrivilege(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// The central mcs-syncer of the other tests would write the same
	// objects: stop it for this test.
	exclusive(t)

	roles := rbacRoles(t)
	dir := t.TempDir()
	localTokens, remoteTokens := map[string]string{}, map[string]string{}
	for _, c := range bed.Clusters {
		localTokens[c.Name], remoteTokens[c.Name] = grantSyncerIdentities(ctx, t, c, roles)
	}

	procs := startPerCluster(ctx, t, dir, localTokens, remoteTokens)
	defer stopAll(t, procs)

	// The scenario: exported from east, imported by west and north; east's
	// own mcs-syncer writes its ServiceExport's status.
	ns := "rbac-scenario"
	bed.Namespace(ctx, t, ns)
	east := bed.ClientOf(t, "east")
	workloads.CreateApp(ctx, t, east, ns, 2, 80, true, nil)
	for _, consumer := range []string{"west", "north"} {
		cl := bed.ClientOf(t, consumer)
		eventually(ctx, t, consumer+": the import of east's 2 endpoints with a clusterset IP", func() error {
			si, err := getImport(ctx, cl, ns)
			if err != nil {
				return err
			}
			if len(si.Spec.IPs) != 1 {
				return fmt.Errorf("ips %v", si.Spec.IPs)
			}
			return readyImported(ctx, cl, ns, map[string]int{"east": 2})()
		})
	}
	eventually(ctx, t, "east's ServiceExport Ready=True/Exported", func() error {
		c, err := workloads.ExportCondition(ctx, east, ns, "web", mcsv1beta1.ServiceExportConditionReady)
		if err != nil {
			return err
		}
		if c.Reason != "Exported" {
			return fmt.Errorf("%s", c.Reason)
		}
		return nil
	})

	// Withdrawing the export exercises the deletes.
	if err := east.Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	for _, consumer := range []string{"west", "north"} {
		cl := bed.ClientOf(t, consumer)
		eventually(ctx, t, consumer+": the import withdrawn", func() error {
			if _, err := getImport(ctx, cl, ns); !apierrors.IsNotFound(err) {
				return fmt.Errorf("ServiceImport still there (%v)", err)
			}
			return nil
		})
	}

	// Least privilege is enough: nobody was refused anything. (A Warning
	// event refused because its namespace is being deleted, an earlier
	// test's, is no refusal of rights.)
	for _, p := range procs {
		log, err := os.ReadFile(p.logPath)
		if err != nil {
			t.Fatal(err)
		}
		for line := range bytes.Lines(log) {
			if bytes.Contains(bytes.ToLower(line), []byte("forbidden")) && !bytes.Contains(line, []byte("because it is being terminated")) {
				t.Errorf("%s: a request was forbidden: %s", p.logPath, line)
				break
			}
		}
	}

	// The remote identity reads east's publications and nothing else of
	// east, and cannot write.
	remote := clientWithToken(t, bed.Cluster("east"), remoteTokens["east"])
	var pubs v1alpha1.PublishedExportList
	if err := remote.List(ctx, &pubs, client.InNamespace("mcs-system")); err != nil {
		t.Errorf("the remote reader cannot list publications: %v", err)
	}
	if !slices.ContainsFunc(pubs.Items, func(p v1alpha1.PublishedExport) bool { return p.Name == "east" && publish.IsMarker(&p) }) {
		t.Errorf("east's marker is not among its publications %v", pubs.Items)
	}
	for _, list := range []client.ObjectList{&mcsv1beta1.ServiceExportList{}, &corev1.ServiceList{}, &discoveryv1.EndpointSliceList{}} {
		if err := remote.List(ctx, list, client.InNamespace(ns)); !apierrors.IsForbidden(err) {
			t.Errorf("the remote reader may list %T: %v", list, err)
		}
	}
	if err := remote.Create(ctx, publish.Marker("west", "mcs-system", 0)); !apierrors.IsForbidden(err) {
		t.Errorf("the remote reader published: %v", err)
	}
	si := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: "intruder", Namespace: ns}, Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, Ports: []mcsv1beta1.ServicePort{}}}
	if err := remote.Create(ctx, si); !apierrors.IsForbidden(err) {
		t.Errorf("the remote reader created a ServiceImport: %v", err)
	}
	se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "again", Namespace: ns}}
	if err := east.Create(ctx, se); err != nil {
		t.Fatal(err)
	}
	se.Status.Conditions = nil
	if err := remote.Status().Update(ctx, se); !apierrors.IsForbidden(err) {
		t.Errorf("the remote reader wrote ServiceExport status: %v", err)
	}
	if err := remote.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}); !apierrors.IsForbidden(err) {
		t.Errorf("the remote reader deleted a Service: %v", err)
	}
}

// startPerCluster runs one mcs-syncer per member in per-cluster mode, with
// leader election: its own cluster with the local token, the others with
// their remote-reader token.
func startPerCluster(ctx context.Context, t *testing.T, dir string, localTokens, remoteTokens map[string]string) []*syncerProcess {
	t.Helper()
	var procs []*syncerProcess
	for _, self := range bed.Clusters {
		conf := testbed.ClustersetConfig{Clusterset: "testbed"}
		for _, member := range bed.Clusters {
			token := remoteTokens[member.Name]
			if member.Name == self.Name {
				token = localTokens[member.Name]
			}
			path := filepath.Join(dir, fmt.Sprintf("%s-sees-%s.kubeconfig", self.Name, member.Name))
			writeTokenKubeconfig(t, member, token, path)
			conf.Members = append(conf.Members, testbed.Member{ID: member.Name, Kubeconfig: path})
		}
		raw, err := sigsyaml.Marshal(conf)
		if err != nil {
			t.Fatal(err)
		}
		confPath := filepath.Join(dir, self.Name+"-clusterset.yaml")
		if err := os.WriteFile(confPath, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := startMemberSyncer(ctx, confPath, self.Name)
		if err != nil {
			stopAll(t, procs)
			t.Fatal(err)
		}
		procs = append(procs, p)
	}
	return procs
}

// startMemberSyncer runs member's own mcs-syncer (per-cluster mode, with
// leader election in its cluster) with the clusterset config at path, and
// flags besides.
func startMemberSyncer(ctx context.Context, path, member string, flags ...string) (*syncerProcess, error) {
	return startSyncerWith(ctx, syncer.stateDir, append([]string{"--clusterset-config", path, "--local-cluster", member,
		"--leader-elect", "--leader-election-namespace", "mcs-system"}, flags...)...)
}

func stopAll(t *testing.T, procs []*syncerProcess) {
	for _, p := range procs {
		if err := p.stop(); err != nil {
			t.Error(err)
		}
	}
}

// TestConsumerThatCannotWriteSlices: mcs-syncer (central mode) may read
// but not write EndpointSlices in north (its identity there has the local
// role without create, update and delete on them). An export of east is
// imported by west as usual; north's ServiceImport says Ready=False
// EndpointSlicesNotWritten, east's ServiceExport does not say it is
// imported everywhere, and mcs_syncer_imported_endpoints counts nothing
// for north.
func TestConsumerThatCannotWriteSlices(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	exclusive(t)

	roles := rbacRoles(t)
	readOnly := roles.local.DeepCopy()
	readOnly.Name = "mcs-syncer-no-slice-writes"
	for i, r := range readOnly.Rules {
		if slices.Contains(r.Resources, "endpointslices") {
			readOnly.Rules[i].Verbs = []string{"get", "list", "watch"}
		}
	}
	token := grantIdentity(ctx, t, bed.Cluster("north"), "mcs-syncer-no-slice-writes", readOnly, "")
	dir := t.TempDir()
	conf := testbed.ClustersetConfig{Clusterset: "testbed"}
	for _, c := range bed.Clusters {
		m := testbed.Member{ID: c.Name, Kubeconfig: c.KubeconfigPath, Context: c.Context}
		if c.Name == "north" {
			m = testbed.Member{ID: c.Name, Kubeconfig: filepath.Join(dir, "north.kubeconfig")}
			writeTokenKubeconfig(t, c, token, m.Kubeconfig)
		}
		conf.Members = append(conf.Members, m)
	}
	raw, err := sigsyaml.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	confPath := filepath.Join(dir, "clusterset.yaml")
	if err := os.WriteFile(confPath, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	proc, err := startSyncerWith(ctx, syncer.stateDir, "--clusterset-config", confPath)
	if err != nil {
		t.Fatal(err)
	}
	defer stopAll(t, []*syncerProcess{proc})

	ns := "rbac-read-only"
	bed.Namespace(ctx, t, ns)
	east := bed.ClientOf(t, "east")
	workloads.CreateApp(ctx, t, east, ns, 2, 80, true, nil)
	west := bed.ClientOf(t, "west")
	eventually(ctx, t, "west: the import of east's 2 endpoints", readyImported(ctx, west, ns, map[string]int{"east": 2}))
	north := bed.ClientOf(t, "north")
	eventually(ctx, t, "north's ServiceImport Ready=False EndpointSlicesNotWritten", func() error {
		si, err := getImport(ctx, north, ns)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != string(imports.ReasonEndpointSlicesNotWritten) || !strings.Contains(c.Message, "forbidden") {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
	eventually(ctx, t, "east's ServiceExport not to claim it is imported everywhere", func() error {
		c, err := workloads.ExportCondition(ctx, east, ns, "web", mcsv1beta1.ServiceExportConditionReady)
		if err != nil {
			return err
		}
		if !strings.Contains(c.Message, "not imported everywhere") || !strings.Contains(c.Message, "north") {
			return fmt.Errorf("Ready %s/%s: %s", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	var list discoveryv1.EndpointSliceList
	if err := north.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		if s.Labels[mcsv1beta1.LabelSourceCluster] != "" {
			t.Errorf("north holds an imported slice %s although its mcs-syncer may not write any", s.Name)
		}
	}
	if v, err := proc.metric(ctx, `mcs_syncer_imported_endpoints{consumer_cluster="north",source_cluster="east"}`); err == nil && v != 0 {
		t.Errorf("north's mcs_syncer_imported_endpoints from east is %v: it holds none", v)
	}
}

// grantIdentity creates in c (namespace mcs-system if missing) a
// ClusterRole role and a ServiceAccount sa in mcs-system bound to it (and to the leader-election Role leaderRole, if
// not ""), and returns a token of sa.
func grantIdentity(ctx context.Context, t *testing.T, c *testbed.Cluster, sa string, role *rbacv1.ClusterRole, leaderRole string) string {
	t.Helper()
	const ns = "mcs-system"
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		role.DeepCopy(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}},
	}
	if leaderRole != "" {
		objs = append(objs, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa + "-leader-election", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: leaderRole},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}}})
	}
	cl := bed.ClientOf(t, c.Name)
	for _, o := range objs {
		if err := cl.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s: create %T %s: %v", c.Name, o, o.GetName(), err)
		}
	}
	return serviceAccountToken(ctx, t, c, ns, sa)
}

// serviceAccountToken returns a token of ServiceAccount ns/sa in c, valid
// for an hour.
func serviceAccountToken(ctx context.Context, t *testing.T, c *testbed.Cluster, ns, sa string) string {
	t.Helper()
	cs, err := c.Kubernetes()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%s: token of %s: %v", c.Name, sa, err)
	}
	return tr.Status.Token
}

// rbacRoles reads the ClusterRoles and the leader-election Role of
// config/rbac, exactly as deployed.
func rbacRoles(t *testing.T) (roles struct {
	local, remote *rbacv1.ClusterRole
	leader        *rbacv1.Role
}) {
	t.Helper()
	root, err := host.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"role.yaml", "leader_election_role.yaml"} {
		raw, err := os.ReadFile(filepath.Join(root, "config", "rbac", file))
		if err != nil {
			t.Fatal(err)
		}
		reader := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
		for {
			doc, err := reader.Read()
			if err != nil {
				break
			}
			var kind struct {
				Kind string `json:"kind"`
			}
			if err := sigsyaml.Unmarshal(doc, &kind); err != nil {
				t.Fatal(err)
			}
			switch kind.Kind {
			case "ClusterRole":
				var r rbacv1.ClusterRole
				if err := sigsyaml.UnmarshalStrict(doc, &r); err != nil {
					t.Fatal(err)
				}
				if r.Name == "mcs-syncer" {
					roles.local = &r
				} else {
					roles.remote = &r
				}
			case "Role":
				var r rbacv1.Role
				if err := sigsyaml.UnmarshalStrict(doc, &r); err != nil {
					t.Fatal(err)
				}
				roles.leader = &r
			}
		}
	}
	if roles.local == nil || roles.remote == nil || roles.leader == nil {
		t.Fatal("config/rbac lacks a role")
	}
	return roles
}

// grantSyncerIdentities creates in c the roles, two ServiceAccounts (the
// local identity and the one other members' mcs-syncers use) bound to
// them, and returns a token of each.
func grantSyncerIdentities(ctx context.Context, t *testing.T, c *testbed.Cluster, roles struct {
	local, remote *rbacv1.ClusterRole
	leader        *rbacv1.Role
}) (local, remote string) {
	t.Helper()
	local = grantIdentity(ctx, t, c, "mcs-syncer", roles.local, roles.leader.Name)
	remote = grantIdentity(ctx, t, c, "mcs-syncer-remote", roles.remote, "")
	leader := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: roles.leader.Name, Namespace: "mcs-system"}, Rules: roles.leader.Rules}
	if err := bed.ClientOf(t, c.Name).Create(ctx, leader); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("%s: create Role %s: %v", c.Name, leader.Name, err)
	}
	return local, remote
}

// writeTokenKubeconfig writes a kubeconfig for c that authenticates with
// token instead of the admin certificate.
func writeTokenKubeconfig(t *testing.T, c *testbed.Cluster, token, path string) {
	t.Helper()
	cfg := c.RESTConfig()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile, InsecureSkipTLSVerify: cfg.Insecure}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["ctx"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "ctx"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
}

func clientWithToken(t *testing.T, c *testbed.Cluster, token string) client.Client {
	t.Helper()
	cfg := c.RESTConfig()
	anon := rest.AnonymousClientConfig(cfg)
	anon.BearerToken = token
	cl, err := client.New(anon, client.Options{Scheme: controlplane.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}
