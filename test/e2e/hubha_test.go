package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/mcs-syncer/mcs-syncer/internal/publish"
	"github.com/mcs-syncer/mcs-syncer/test/testbed"
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
	dir := t.TempDir()
	var procs []*syncerProcess
	t.Cleanup(func() { stopAll(t, procs) })
	for _, c := range bed.Clusters {
		kubeconfig, config := filepath.Join(dir, c.Name+".kubeconfig"), filepath.Join(dir, c.Name+".yaml")
		if err := testbed.HubIdentityIn(ctx, hub, c.Name, kubeconfig); err != nil {
			t.Fatal(err)
		}
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
		procs = append(procs, p)
	}

	hubAdmin, err := hub.Client()
	if err != nil {
		t.Fatal(err)
	}
	east := bed.ClientOf(t, "east")
	d := workloads.CreateApp(ctx, t, east, ns, 2, 80, true, nil)
	consumers := []string{"north", "west"}
	before := map[string]importIdentity{}
	lowest := map[string]func() int{}
	for _, consumer := range consumers {
		cl := bed.ClientOf(t, consumer)
		eventually(ctx, t, consumer+": east's web through the HA hub", func() error {
			if err := readyImported(ctx, cl, ns, map[string]int{"east": 2})(); err != nil {
				return err
			}
			id, err := identityOf(ctx, cl, ns, "web")
			if err == nil && id.ips == "" {
				err = fmt.Errorf("no clusterset IP yet")
			}
			before[consumer] = id
			return err
		})
		lowest[consumer] = lowestReady(ctx, t, consumer, ns, "multicluster.kubernetes.io/source-cluster=east", 2)
	}

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
			p := &publish.PublishedExport{}
			if err := hubAdmin.Get(ctx, types.NamespacedName{Namespace: testbed.HubNamespace, Name: "east." + ns + ".web"}, p); err != nil {
				return err
			}
			if n := publishedReady(p); n != replicas {
				return fmt.Errorf("%d ready endpoints published", n)
			}
			return nil
		})
		published := time.Since(killed)
		for _, consumer := range consumers {
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
	for _, consumer := range consumers {
		if id, err := identityOf(ctx, bed.ClientOf(t, consumer), ns, "web"); err != nil || id != before[consumer] {
			t.Errorf("%s: ServiceImport %+v (%v) after the failovers, was %+v", consumer, id, err, before[consumer])
		}
		if n := lowest[consumer](); n < 2 {
			t.Errorf("%s held %d of east's ready endpoints during the failovers, want never fewer than 2", consumer, n)
		}
	}
	for _, p := range procs {
		if err := p.Exited(); err != nil {
			t.Errorf("an mcs-syncer exited during the failovers: %v", err)
		}
	}
}

// publishedReady counts the ready endpoints of a publication.
func publishedReady(p *publish.PublishedExport) int {
	n := 0
	for _, g := range p.Spec.Endpoints {
		n += workloads.CountReady(g.Endpoints)
	}
	return n
}

// mebibytes rounds each process's resident bytes to MiB.
func mebibytes(rss map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for name, n := range rss {
		out[name] = n >> 20
	}
	return out
}
