package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/publish"
	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/controlplane"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/workloads"
)

// TestHubFailover: the members publish through a highly available hub, as
// kind builds an HA control plane (three etcd members, two kube-apiservers,
// haproxy in front on the one address of the members' hub kubeconfigs).
// One API server is killed, then (the first back) the other, then the etcd
// leader. Each time east scales its app right after the kill: the change
// reaches north and west (the time it takes is the failover's figure),
// nothing is withdrawn meanwhile (neither consumer ever holds fewer of
// east's ready endpoints than the smaller count of the change), and their
// ServiceImports keep their UIDs and clusterset IPs.
func TestHubFailover(t *testing.T) {
	ns := "hub-failover"
	ctx, ha := haHubTest(t, ns)
	hub := ha.hub
	hubAdmin, err := hub.Client()
	if err != nil {
		t.Fatal(err)
	}
	east := bed.ClientOf(t, "east")
	d := workloads.CreateApp(ctx, t, east, ns, 2, 80, true, nil)
	kept := importsKept(ctx, t, ns)

	replicas := 2
	failover := func(what string, stop, start func(context.Context) error) {
		t.Helper()
		if err := stop(ctx); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		replicas = 5 - replicas // 2, 3, 2, 3: never fewer than 2
		scale(ctx, t, east, d, replicas)
		eventually(ctx, t, fmt.Sprintf("east's %d endpoints published with %s down", replicas, what), func() error {
			var pubs v1alpha1.PublishedExportList
			if err := hubAdmin.List(ctx, &pubs, client.InNamespace(testbed.HubNamespace), client.MatchingLabels{
				mcsv1beta1.LabelSourceCluster: "east", mcsv1beta1.LabelServiceName: "web", publish.ServiceNamespaceLabel: ns}); err != nil {
				return err
			}
			n := 0
			for i := range pubs.Items {
				n += publishedReady(&pubs.Items[i])
			}
			if n != replicas {
				return fmt.Errorf("%d ready endpoints published", n)
			}
			return nil
		})
		published := time.Since(killed)
		for _, consumer := range haConsumers {
			eventually(ctx, t, fmt.Sprintf("%s: east's %d endpoints with %s down", consumer, replicas, what),
				readyImported(ctx, bed.ClientOf(t, consumer), ns, map[string]int{"east": replicas}))
			t.Logf("FIGURE hub failover (%s killed): east's change published %s and imported by %s %s after the kill",
				what, published.Round(time.Millisecond), consumer, time.Since(killed).Round(time.Millisecond))
		}
		if err := start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	apiServer := func(i int) (func(context.Context) error, func(context.Context) error) {
		return func(ctx context.Context) error { return hub.StopAPIServerReplica(ctx, i) },
			func(ctx context.Context) error { return hub.StartAPIServerReplica(ctx, i) }
	}
	stop, start := apiServer(0)
	failover("API server 0", stop, start)
	stop, start = apiServer(1)
	failover("API server 1", stop, start)
	leader, err := hub.EtcdLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	failover(fmt.Sprintf("etcd leader (member %d)", leader),
		func(ctx context.Context) error { return hub.StopEtcdMember(ctx, leader) },
		func(context.Context) error { return hub.StartEtcdMember(leader) })

	if rss, err := hub.ResidentBytes(); err == nil {
		t.Logf("FIGURE HA hub resident memory after the failovers: %v MiB", mebibytes(rss))
	}
	kept()
	ha.noneExited(t)
}

// haConsumers are the members that import east's web in the HA hub tests.
var haConsumers = []string{"north", "west"}

// importsKept waits until north and west import east's web of ns (2 ready
// endpoints, a clusterset IP), then watches them; the function it returns
// fails t if either consumer has since held fewer than 2 of east's ready
// endpoints, or its ServiceImport changed its UID or clusterset IP.
func importsKept(ctx context.Context, t *testing.T, ns string) func() {
	t.Helper()
	before := map[string]importIdentity{}
	lowest := map[string]func() int{}
	for _, consumer := range haConsumers {
		cl := bed.ClientOf(t, consumer)
		eventually(ctx, t, consumer+": east's web through the HA hub", func() error {
			if err := readyImported(ctx, cl, ns, map[string]int{"east": 2})(); err != nil {
				return err
			}
			id, err := addressedIdentityOf(ctx, cl, ns, "web")
			before[consumer] = id
			return err
		})
		lowest[consumer] = lowestReady(ctx, t, consumer, ns, "multicluster.kubernetes.io/source-cluster=east", 2)
	}
	return func() {
		t.Helper()
		for _, consumer := range haConsumers {
			if id, err := identityOf(ctx, bed.ClientOf(t, consumer), ns, "web"); err != nil || id != before[consumer] {
				t.Errorf("%s: ServiceImport %+v (%v), was %+v", consumer, id, err, before[consumer])
			}
			if n := lowest[consumer](); n < 2 {
				t.Errorf("%s held %d of east's ready endpoints, want never fewer than 2", consumer, n)
			}
		}
	}
}

// haHubTest sets up a test on an HA hub: the shared mcs-syncer stopped,
// namespace ns in every cluster, an HA hub (Clusterset.StartHAHub) with every
// member's identity in kubeconfigs of a temporary folder, and one
// mcs-syncer per member in hub mode through it (the hub failure tests'
// grace and heartbeat); all of it ends with the test.
func haHubTest(t *testing.T, ns string) (context.Context, *haHub) {
	t.Helper()
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	exclusive(t)
	bed.Namespace(ctx, t, ns)
	began := time.Now()
	hub, err := bed.StartHAHub(ctx, "hub-ha")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("FIGURE HA hub up in %s", time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := hub.Destroy(context.Background()); err != nil {
			t.Error(err)
		}
	})
	ha := &haHub{hub: hub, dir: t.TempDir()}
	t.Cleanup(func() { stopAll(t, ha.procs) })
	ha.identities(ctx, t)
	for _, c := range bed.Clusters {
		kubeconfig, config := ha.kubeconfig(c.Name), filepath.Join(ha.dir, c.Name+".yaml")
		raw, err := yaml.Marshal(bed.HubConfig(c.Name, kubeconfig))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(config, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := startHubMemberWith(ctx, c.Name, config)
		if err != nil {
			t.Fatal(err)
		}
		ha.procs = append(ha.procs, p)
	}
	return ctx, ha
}

// haHub is what haHubTest set up.
type haHub struct {
	hub   *controlplane.ControlPlane
	procs []*syncerProcess
	// dir holds each member's hub kubeconfig and clusterset config.
	dir string
}

// kubeconfig is member's hub kubeconfig.
func (ha *haHub) kubeconfig(member string) string { return filepath.Join(ha.dir, member+".kubeconfig") }

// identities gives every member its identity in the hub and writes its
// hub kubeconfig with a new token.
func (ha *haHub) identities(ctx context.Context, t *testing.T) {
	t.Helper()
	for _, c := range bed.Clusters {
		if err := testbed.HubIdentityIn(ctx, ha.hub, c.Name, ha.kubeconfig(c.Name)); err != nil {
			t.Fatal(err)
		}
	}
}

// noneExited fails t if one of the members' mcs-syncers exited (the
// failures of the hub must be survived without a restart).
func (ha *haHub) noneExited(t *testing.T) {
	t.Helper()
	for _, p := range ha.procs {
		if err := p.Exited(); err != nil {
			t.Errorf("an mcs-syncer exited: %v", err)
		}
	}
}

// publishedReady counts the ready endpoints of a publication's head or
// part.
func publishedReady(p *v1alpha1.PublishedExport) int {
	n := 0
	for _, g := range p.Spec.Endpoints {
		n += workloads.CountReady(g.Endpoints)
	}
	return n
}

// mebibytes gives each process's resident bytes in whole MiB.
func mebibytes(rss map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for name, n := range rss {
		out[name] = n >> 20
	}
	return out
}

// TestWipedHubRecovers: the HA hub's etcd is wiped (every member killed,
// its data removed, started empty), as a hub rebuilt from nothing is. It
// stays empty for longer than the grace, and nothing is withdrawn. Then its
// administrator re-applies config/hub and gives the members new
// identities, with new tokens in their hub kubeconfigs. Every member
// publishes everything again, marker included, with no restart; web2,
// unexported in east while the hub was empty, is withdrawn and never comes
// back; meanwhile no consumer held fewer of east's ready endpoints, and
// their ServiceImports kept their UIDs and clusterset IPs.
func TestWipedHubRecovers(t *testing.T) {
	ns := "hub-wiped-etcd"
	ctx, ha := haHubTest(t, ns)
	east := bed.ClientOf(t, "east")
	workloads.CreateApp(ctx, t, east, ns, 2, 80, true, nil)
	if err := manualExport(ctx, east, ns, "web2", "10.100.9.2"); err != nil {
		t.Fatal(err)
	}
	for _, consumer := range haConsumers {
		eventually(ctx, t, consumer+": east's web2", importedEndpoints(ctx, bed.ClientOf(t, consumer), ns, "web2", "east", 1))
	}
	kept := importsKept(ctx, t, ns)

	if err := ha.hub.Wipe(ctx); err != nil {
		t.Fatal(err)
	}
	wiped := time.Now()
	if err := east.Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web2"}}); err != nil {
		t.Fatal(err)
	}
	// Empty for the grace and half as much again, as while its
	// administrator restores it: the members' tokens are refused (their
	// identities are gone), so nothing of them is known, and the consumers
	// keep web and web2 as they are.
	holds(ctx, t, "the hub wiped", hubFailureGrace*3/2, func() error {
		for _, consumer := range haConsumers {
			cl := bed.ClientOf(t, consumer)
			if err := readyImported(ctx, cl, ns, map[string]int{"east": 2})(); err != nil {
				return fmt.Errorf("%s: %w", consumer, err)
			}
			if err := importedEndpoints(ctx, cl, ns, "web2", "east", 1)(); err != nil {
				return fmt.Errorf("%s: %w", consumer, err)
			}
		}
		return nil
	})
	if err := testbed.ApplyHubConfig(ctx, ha.hub); err != nil {
		t.Fatal(err)
	}
	ha.identities(ctx, t)
	restored := time.Now()
	hubAdmin, err := ha.hub.Client()
	if err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "every member to publish again, marker included", republished(ctx, hubAdmin, ns))
	t.Logf("FIGURE wiped hub: republished %s after the wipe, %s after the identities were restored",
		time.Since(wiped).Round(time.Millisecond), time.Since(restored).Round(time.Millisecond))
	for _, consumer := range haConsumers {
		cl := bed.ClientOf(t, consumer)
		eventually(ctx, t, consumer+": web2 withdrawn", func() error {
			if _, err := identityOf(ctx, cl, ns, "web2"); !apierrors.IsNotFound(err) {
				return fmt.Errorf("web2 still imported (%v)", err)
			}
			return nil
		})
		t.Logf("%s: web2 withdrawn %s after the identities were restored", consumer, time.Since(restored).Round(time.Millisecond))
		eventually(ctx, t, consumer+": east's 2 endpoints", readyImported(ctx, cl, ns, map[string]int{"east": 2}))
	}
	for _, consumer := range haConsumers {
		if err := importedEndpoints(ctx, bed.ClientOf(t, consumer), ns, "web2", "east", 0)(); err != nil {
			t.Errorf("%s: web2 came back: %v", consumer, err)
		}
	}
	kept()
	ha.noneExited(t)
}
