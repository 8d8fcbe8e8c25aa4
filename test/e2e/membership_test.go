package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/mcs-syncer/mcs-syncer/internal/membership"
	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/workloads"
)

// The tests of this file run an mcs-syncer of their own (the shared one is
// stopped meanwhile: two with the same managed-by would fight) and change
// its clusterset config, its members' API servers and CRDs while it runs.

// exclusive stops the shared mcs-syncer until the test ends.
func exclusive(t *testing.T) {
	t.Helper()
	needTestbed(t)
	if err := syncer.stop(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		next, err := startSyncer(context.Background(), syncer.stateDir)
		if err != nil {
			t.Errorf("restart the shared mcs-syncer: %v", err)
			return
		}
		*syncer = *next
	})
}

// configHeader is the schema every clusterset config begins with.
const configHeader = "apiVersion: " + membership.ConfigAPIVersion + "\nkind: " + membership.ConfigKind + "\n"

// member is a member of a clusterset config written by a test: its ID and
// the testbed cluster it names.
type member struct{ id, cluster string }

// writeConfig writes a clusterset config of the given members to path.
func writeConfig(t *testing.T, path string, members ...member) {
	t.Helper()
	var entries []testbed.Member
	for _, m := range members {
		c := bed.Cluster(m.cluster)
		entries = append(entries, testbed.Member{ID: m.id, Kubeconfig: c.KubeconfigPath, Context: c.Context})
	}
	writeMembers(t, path, entries...)
}

// writeHubConfig writes to path the hub-mode clusterset config of self's
// own mcs-syncer with the given members: self through its admin
// kubeconfig, the others through the hub.
func writeHubConfig(t *testing.T, path, self string, members ...string) {
	t.Helper()
	conf := bed.HubConfig(self, filepath.Join(bed.StateDir, "hub", self+".kubeconfig"))
	conf.Members = slices.DeleteFunc(conf.Members, func(m testbed.Member) bool { return !slices.Contains(members, m.ID) })
	writeConfigFile(t, path, conf)
}

// writeMembers writes a clusterset config of members to path (as a
// mounted Secret changes: written aside, then renamed).
func writeMembers(t *testing.T, path string, members ...testbed.Member) {
	t.Helper()
	writeConfigFile(t, path, testbed.ClustersetConfig{Clusterset: "testbed", Members: members})
}

func writeConfigFile(t *testing.T, path string, conf testbed.ClustersetConfig) {
	t.Helper()
	raw, err := yaml.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".tmp", raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// ownSyncer starts an mcs-syncer with the config at path (grace 20s) and
// stops it when the test ends; the stop must be graceful.
func ownSyncer(ctx context.Context, t *testing.T, path string, args ...string) *syncerProcess {
	t.Helper()
	s, err := startSyncerWith(ctx, syncer.stateDir, append([]string{"--clusterset-config", path, "--cluster-unreachable-grace", "20s"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// readyzSays returns a check that /readyz answers 200 and its verbose text
// holds every line part in want.
func readyzSays(ctx context.Context, s *syncerProcess, want ...string) func() error {
	return readyzAnswers(ctx, s, 200, want...)
}

// readyzAnswers returns a check that /readyz answers code and its verbose
// text holds every line part in want.
func readyzAnswers(ctx context.Context, s *syncerProcess, wantCode int, want ...string) func() error {
	return func() error {
		if err := s.Exited(); err != nil {
			return fmt.Errorf("%w; log: %s", err, s.logPath)
		}
		code, body, err := s.Readyz(ctx)
		if err != nil {
			return err
		}
		if code != wantCode {
			return fmt.Errorf("/readyz %d, want %d:\n%s", code, wantCode, body)
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				return fmt.Errorf("/readyz?verbose lacks %q:\n%s", w, body)
			}
		}
		return nil
	}
}

// sources returns a check that ns/web in each consumer holds imported
// slices from exactly the given sources, with the given number of ready
// endpoints each.
func sources(ctx context.Context, t *testing.T, want map[string]int, consumers ...string) func() error {
	return func() error {
		for _, consumer := range consumers {
			bySource, err := importedSlices(ctx, bed.ClientOf(t, consumer), "membership")
			if err != nil {
				return err
			}
			for source, slices := range bySource {
				if _, ok := want[source]; !ok {
					return fmt.Errorf("%s: %d slices from %s, which is not a member", consumer, len(slices), source)
				}
			}
			for source, n := range want {
				if got := countReady(bySource[source]); got != n {
					return fmt.Errorf("%s: %d ready endpoints from %s, want %d", consumer, got, source, n)
				}
			}
		}
		return nil
	}
}

// TestMembershipFollowsTheConfig: members added to and removed from the
// config file join and leave without a restart, in central, per-cluster
// and hub mode (in the last two, east and west run their own mcs-syncer,
// which publishes their exports; north's config changes). A member that leaves takes its endpoints out of every consumer at
// once (no grace), and in central mode what mcs-syncer wrote into it goes
// too. Across a restart, a removed or renamed member leaves no slice with
// its old ID in any consumer.
func TestMembershipFollowsTheConfig(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	exclusive(t)
	const ns = "membership"
	bed.Namespace(ctx, t, ns)
	east, west := bed.ClientOf(t, "east"), bed.ClientOf(t, "west")
	workloads.CreateApp(ctx, t, east, ns, 2, 80, true, nil)
	workloads.CreateApp(ctx, t, west, ns, 1, 80, true, nil)
	path := filepath.Join(t.TempDir(), "clusterset.yaml")

	for _, mode := range []struct {
		name      string
		args      []string
		consumers []string
	}{
		{"per-cluster", []string{"--local-cluster", "north"}, []string{"north"}},
		{"hub", []string{"--local-cluster", "north"}, []string{"north"}},
		{"central", nil, []string{"east", "north"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			write := func(ids ...string) {
				if mode.name == "hub" {
					writeHubConfig(t, path, "north", ids...)
					return
				}
				var members []member
				for _, id := range ids {
					members = append(members, member{id, id})
				}
				writeConfig(t, path, members...)
			}
			for _, id := range []string{"east", "west"} {
				switch mode.name {
				case "per-cluster":
					ownSyncer(ctx, t, bed.ConfigPath, "--local-cluster", id)
				case "hub":
					ownSyncer(ctx, t, bed.HubConfigPath(id), "--local-cluster", id)
					t.Cleanup(func() { clearHub(t) })
				}
			}
			write("east", "north")
			s := ownSyncer(ctx, t, path, mode.args...)
			eventually(ctx, t, "only east's endpoints", sources(ctx, t, map[string]int{"east": 2}, mode.consumers...))

			write("east", "north", "west")
			eventually(ctx, t, "west to join", sources(ctx, t, map[string]int{"east": 2, "west": 1}, mode.consumers...))
			eventually(ctx, t, "/readyz to name west", readyzSays(ctx, s, "[+]member west ok: engaged since"))
			if mode.name == "central" {
				eventually(ctx, t, "west to import and its export to be Ready", func() error {
					if _, err := getImport(ctx, west, ns); err != nil {
						return err
					}
					c, err := workloads.ExportCondition(ctx, west, ns, "web", mcsv1beta1.ServiceExportConditionReady)
					if err != nil || c.Status != metav1.ConditionTrue {
						return fmt.Errorf("Ready %v, %v", c, err)
					}
					return nil
				})
			}

			write("east", "north")
			left := time.Now()
			eventually(ctx, t, "west's endpoints to leave", sources(ctx, t, map[string]int{"east": 2}, mode.consumers...))
			if took := time.Since(left); took >= 20*time.Second {
				t.Errorf("west's endpoints left after %s: not at once, but after the grace", took)
			}
			if mode.name == "central" {
				eventually(ctx, t, "west's import and conditions to be removed", func() error {
					if _, err := getImport(ctx, west, ns); !apierrors.IsNotFound(err) {
						return fmt.Errorf("ServiceImport in west: %v", err)
					}
					var list discoveryv1.EndpointSliceList
					if err := west.List(ctx, &list, client.InNamespace(ns), client.HasLabels{mcsv1beta1.LabelServiceName}); err != nil || len(list.Items) > 0 {
						return fmt.Errorf("%d imported slices in west (%v)", len(list.Items), err)
					}
					if c, err := workloads.ExportCondition(ctx, west, ns, "web", mcsv1beta1.ServiceExportConditionReady); err == nil {
						return fmt.Errorf("west's export still says Ready=%s", c.Status)
					}
					return nil
				})
			}
			if _, body, err := s.Readyz(ctx); err != nil || strings.Contains(body, "member west") {
				t.Errorf("/readyz?verbose still names west (%v):\n%s", err, body)
			}
		})
	}

	// Across restarts (central mode): west renamed, then removed.
	t.Run("restart", func(t *testing.T) {
		writeConfig(t, path, member{"east", "east"}, member{"north", "north"}, member{"west", "west"})
		s := ownSyncer(ctx, t, path)
		eventually(ctx, t, "west's endpoints", sources(ctx, t, map[string]int{"east": 2, "west": 1}, "east", "north"))
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
		writeConfig(t, path, member{"east", "east"}, member{"north", "north"}, member{"far", "west"})
		s = ownSyncer(ctx, t, path)
		eventually(ctx, t, "the renamed member's endpoints, once", sources(ctx, t, map[string]int{"east": 2, "far": 1}, "east", "north"))
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
		writeConfig(t, path, member{"east", "east"}, member{"north", "north"})
		ownSyncer(ctx, t, path)
		eventually(ctx, t, "no endpoints of the removed member", sources(ctx, t, map[string]int{"east": 2}, "east", "north"))
	})
}

// manualExport exports ns/name from cl with a selector-less Service and an
// EndpointSlice of ips written directly (no pod, no kube-controller-manager
// in the way), so that the time to import it is mcs-syncer's alone.
func manualExport(ctx context.Context, cl client.Client, ns, name string, ips ...string) error {
	return manualExportOf(ctx, cl, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}, ips...)
}

// manualExportOf is manualExport with the ServiceExport se, of either
// version of the MCS API.
func manualExportOf(ctx context.Context, cl client.Client, se client.Object, ips ...string) error {
	ns, name := se.GetNamespace(), se.GetName()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	slice := sourceSlice(ns, name, name+"-manual", nil)
	for _, ip := range ips {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	for _, obj := range []client.Object{svc, slice, se} {
		if err := cl.Create(ctx, obj); err != nil {
			return err
		}
	}
	return nil
}

// importedEndpoints returns a check that consumer holds n ready endpoints of
// ns/name from source.
func importedEndpoints(ctx context.Context, consumer client.Client, ns, name, source string, n int) func() error {
	return func() error {
		var list discoveryv1.EndpointSliceList
		if err := consumer.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{
			mcsv1beta1.LabelServiceName: name, mcsv1beta1.LabelSourceCluster: source}); err != nil {
			return err
		}
		if got := countReady(list.Items); got != n {
			return fmt.Errorf("%d ready endpoints of %s/%s from %s, want %d", got, ns, name, source, n)
		}
		return nil
	}
}

// TestMemberDownAtStartJoinsWhenItStarts: with west's API server down,
// mcs-syncer starts, becomes ready with west reported unreachable, and
// east's export reaches north; when west starts, it joins without a
// restart, and a change made in west as soon as its API server is back is
// imported within seconds (the member-return time, printed).
func TestMemberDownAtStartJoinsWhenItStarts(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	exclusive(t)
	const ns = "member-down-at-start"
	bed.Namespace(ctx, t, ns)
	east, west, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "west"), bed.ClientOf(t, "north")
	westBed := bed.Cluster("west")
	if err := westBed.StopAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	down := true
	t.Cleanup(func() {
		if down {
			_ = westBed.StartAPIServer(context.Background())
		}
	})
	s := ownSyncer(ctx, t, bed.ConfigPath)
	eventually(ctx, t, "west reported unreachable, the process ready", readyzSays(ctx, s,
		"[+]member west ok: unreachable since", "[+]member east ok: engaged", "[+]member north ok: engaged"))
	if err := manualExport(ctx, east, ns, "api", "10.101.1.1"); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "north to import east's export while west is down", importedEndpoints(ctx, north, ns, "api", "east", 1))

	if err := westBed.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	down = false
	back := time.Now()
	if err := manualExport(ctx, west, ns, "db", "10.102.1.1", "10.102.1.2"); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "west's export to reach north", importedEndpoints(ctx, north, ns, "db", "west", 2))
	returned := time.Since(back)
	t.Logf("member-return time (west's API server ready -> a change made in west imported into north): %s", returned.Round(time.Millisecond))
	if returned > 30*time.Second {
		t.Errorf("west joined %s after its API server was back (goal: 10s)", returned)
	}
	eventually(ctx, t, "west to import east's export", importedEndpoints(ctx, west, ns, "api", "east", 1))
	eventually(ctx, t, "west engaged", readyzSays(ctx, s, "[+]member west ok: engaged since"))
}

// TestMemberWithoutCRDs: a member whose ServiceExport CRD is deleted while
// mcs-syncer runs, and one that lacks it when mcs-syncer starts, is
// reported (readiness, metric) and never makes it exit; it is engaged
// again when the CRD is back. A member whose credentials forbid what
// mcs-syncer lists is reported with the refused permission named.
func TestMemberWithoutCRDs(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	exclusive(t)
	const ns = "member-without-crds"
	bed.Namespace(ctx, t, ns)
	east, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "north")
	if err := manualExport(ctx, east, ns, "api", "10.101.2.1"); err != nil {
		t.Fatal(err)
	}
	s := ownSyncer(ctx, t, bed.ConfigPath)
	eventually(ctx, t, "north to import", importedEndpoints(ctx, north, ns, "api", "east", 1))

	northBed := bed.Cluster("north")
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "serviceexports." + mcsv1beta1.GroupName}}
	if err := north.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = northBed.InstallCRDs(context.Background()) })
	missing := []string{"[+]member north ok: missing-crds since", "serviceexports." + mcsv1beta1.GroupName}
	eventually(ctx, t, "north reported without its CRD", readyzSays(ctx, s, missing...))
	eventually(ctx, t, "the state metric", func() error {
		v, err := s.metric(ctx, `mcs_syncer_member_state{cluster="north",state="missing-crds"}`)
		if err == nil && v != 1 {
			err = fmt.Errorf("member_state{north,missing-crds} = %v", v)
		}
		return err
	})
	// Started without it: the same, and no exit.
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	s = ownSyncer(ctx, t, bed.ConfigPath)
	eventually(ctx, t, "north reported at start", readyzSays(ctx, s, missing...))
	if err := manualExport(ctx, east, ns, "db", "10.101.2.2"); err != nil {
		t.Fatal(err)
	}
	// A member never heard from holds back no export's Conflict condition:
	// it is computed from the members that answer, and says who is missing.
	eventually(ctx, t, "east's new export to have a Conflict condition that names north as not heard from", func() error {
		c, err := workloads.ExportCondition(ctx, east, ns, "db", mcsv1beta1.ServiceExportConditionConflict)
		if err != nil {
			return err
		}
		if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "not yet heard from north") {
			return fmt.Errorf("%s/%s: %s", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	if err := northBed.InstallCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "north engaged again", readyzSays(ctx, s, "[+]member north ok: engaged since"))
	eventually(ctx, t, "north to import what was exported meanwhile", importedEndpoints(ctx, north, ns, "db", "east", 1))
	if err := s.Exited(); err != nil {
		t.Fatal(err)
	}

	// Forbidden: north through a service account without any permission.
	cs, err := northBed.Kubernetes()
	if err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody", Namespace: ns}}
	if err := north.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeTokenKubeconfig(t, northBed, tr.Status.Token, filepath.Join(dir, "north.kubeconfig"))
	raw := fmt.Sprintf(configHeader+"clusterset: testbed\nmembers:\n- id: east\n  kubeconfig: %s\n  context: %s\n- id: north\n  kubeconfig: north.kubeconfig\n",
		bed.Cluster("east").KubeconfigPath, bed.Cluster("east").Context)
	if err := os.WriteFile(filepath.Join(dir, "clusterset.yaml"), []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	s = ownSyncer(ctx, t, filepath.Join(dir, "clusterset.yaml"))
	eventually(ctx, t, "north reported forbidden, naming what", readyzSays(ctx, s,
		"[+]member north ok: forbidden since", `system:serviceaccount:`+ns+`:nobody" cannot list resource`, "[+]member east ok: engaged"))
}

// TestKillDuringImportConverges: mcs-syncer killed (SIGKILL) while it
// imports 400 services converges after a restart, with exactly one slice
// per service and source in every consumer and no slice without its
// ServiceImport. (It imported 1,000, three minutes of CI's time; 400 are
// still killed mid-import, after a fifth of them.)
func TestKillDuringImportConverges(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	exclusive(t)
	const ns, services = "kill-during-import", 400
	bed.Namespace(ctx, t, ns)
	east := bed.ClientOf(t, "east")
	var g errgroup.Group
	g.SetLimit(16)
	for i := range services {
		g.Go(func() error {
			return manualExport(ctx, east, ns, fmt.Sprintf("svc-%04d", i), fmt.Sprintf("10.101.%d.%d", 100+i/250, 1+i%250))
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	s := ownSyncer(ctx, t, bed.ConfigPath)
	north := bed.ClientOf(t, "north")
	eventually(ctx, t, "the import to be under way", func() error {
		var list mcsv1beta1.ServiceImportList
		if err := north.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) < services/5 {
			return fmt.Errorf("%d ServiceImports so far", len(list.Items))
		}
		return nil
	})
	s.Kill()
	s = ownSyncer(ctx, t, bed.ConfigPath)
	eventually(ctx, t, "every member engaged after the restart", readyzSays(ctx, s,
		"[+]member east ok: engaged", "[+]member west ok: engaged", "[+]member north ok: engaged"))
	for _, consumer := range []string{"east", "west", "north"} {
		cl := bed.ClientOf(t, consumer)
		eventually(ctx, t, consumer+" to converge", func() error {
			var imports mcsv1beta1.ServiceImportList
			if err := cl.List(ctx, &imports, client.InNamespace(ns)); err != nil {
				return err
			}
			uids := map[string]string{}
			for _, si := range imports.Items {
				if len(si.Status.Clusters) != 1 {
					return fmt.Errorf("%s: %s imported from %v", consumer, si.Name, si.Status.Clusters)
				}
				uids[si.Name] = string(si.UID)
			}
			if len(uids) != services {
				return fmt.Errorf("%s: %d ServiceImports", consumer, len(uids))
			}
			var list discoveryv1.EndpointSliceList
			if err := cl.List(ctx, &list, client.InNamespace(ns), client.HasLabels{mcsv1beta1.LabelServiceName}); err != nil {
				return err
			}
			perService := map[string]int{}
			for _, sl := range list.Items {
				name := sl.Labels[mcsv1beta1.LabelServiceName]
				perService[name]++
				if owner := metav1.GetControllerOf(&sl); owner == nil || string(owner.UID) != uids[name] {
					return fmt.Errorf("%s: slice %s is not owned by ServiceImport %s", consumer, sl.Name, name)
				}
				if sl.Labels[mcsv1beta1.LabelSourceCluster] != "east" || countReady([]discoveryv1.EndpointSlice{sl}) != 1 {
					return fmt.Errorf("%s: slice %s: source %q, %d ready endpoints", consumer, sl.Name, sl.Labels[mcsv1beta1.LabelSourceCluster], countReady([]discoveryv1.EndpointSlice{sl}))
				}
			}
			for name, n := range perService {
				if n != 1 {
					return fmt.Errorf("%s: %d slices for %s", consumer, n, name)
				}
			}
			if len(perService) != services {
				return fmt.Errorf("%s: slices for %d services", consumer, len(perService))
			}
			return nil
		})
	}
}

// TestLeaseOutsideTheMembers: with the Lease in a cluster the user names
// (north here), two replicas elect one leader while east, a member, is
// down: the leader engages the members that answer and reports east, the
// other is a ready standby; when the leader is killed, the standby takes
// over.
func TestLeaseOutsideTheMembers(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	exclusive(t)
	eastBed := bed.Cluster("east")
	if err := eastBed.StopAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	down := true
	t.Cleanup(func() {
		if down {
			_ = eastBed.StartAPIServer(context.Background())
		}
	})
	args := []string{"--leader-elect", "--leader-election-cluster", "north", "--leader-election-namespace", "default"}
	a, b := ownSyncer(ctx, t, bed.ConfigPath, args...), ownSyncer(ctx, t, bed.ConfigPath, args...)
	leading := func(s *syncerProcess) bool {
		_, body, err := s.Readyz(ctx)
		return err == nil && strings.Contains(body, "[+]member west ok: engaged")
	}
	var leader, standby *syncerProcess
	eventually(ctx, t, "one leader, one standby", func() error {
		switch {
		case leading(a) && !leading(b):
			leader, standby = a, b
		case leading(b) && !leading(a):
			leader, standby = b, a
		default:
			return fmt.Errorf("leading: %v, %v", leading(a), leading(b))
		}
		return nil
	})
	eventually(ctx, t, "the leader to report east", readyzSays(ctx, leader, "[+]member east ok: unreachable since"))
	eventually(ctx, t, "the other to be a ready standby", readyzSays(ctx, standby, "[+]leader-election ok: standby"))
	leader.Kill()
	eventually(ctx, t, "the standby to take over", readyzSays(ctx, standby, "[+]member west ok: engaged", "[+]member north ok: engaged"))
	if err := eastBed.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	down = false
	eventually(ctx, t, "east to join", readyzSays(ctx, standby, "[+]member east ok: engaged"))
}
