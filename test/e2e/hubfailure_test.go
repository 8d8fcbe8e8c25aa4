package e2e

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/export"
	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/workloads"
)

// The tests of this file break the hub, or one member's mcs-syncer, in hub
// mode, with a 20 s grace and a 2 s heartbeat: a hub that cannot be read
// withdraws nothing, however long; a member whose own mcs-syncer stopped
// is withdrawn once the grace after its last heartbeat has run out.

// hubFailureGrace is the grace of the processes these tests start.
const hubFailureGrace = 20 * time.Second

// hubFailureTest sets up a test of this file: the shared mcs-syncer
// stopped, namespace ns in every cluster, and one mcs-syncer per member in
// hub mode, which are stopped (and the hub cleared) when the test ends.
func hubFailureTest(t *testing.T, ns string, timeout time.Duration) (context.Context, map[string]*syncerProcess) {
	t.Helper()
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	exclusive(t)
	t.Cleanup(func() { clearHub(t) })
	bed.Namespace(ctx, t, ns)
	procs := startHubModeWithHeartbeat(ctx, t)
	t.Cleanup(func() { stopAll(t, slices.Collect(maps.Values(procs))) })
	return ctx, procs
}

// startHubModeWithHeartbeat runs one mcs-syncer per member in hub mode,
// with the tests' grace and a 2 s heartbeat.
func startHubModeWithHeartbeat(ctx context.Context, t *testing.T) map[string]*syncerProcess {
	t.Helper()
	procs := map[string]*syncerProcess{}
	for _, c := range bed.Clusters {
		p, err := startHubMember(ctx, c.Name)
		if err != nil {
			for _, p := range procs {
				p.Kill()
			}
			t.Fatal(err)
		}
		procs[c.Name] = p
	}
	return procs
}

func startHubMember(ctx context.Context, member string) (*syncerProcess, error) {
	return startHubMemberWith(ctx, member, bed.HubConfigPath(member))
}

// startHubMemberWith is startHubMember with the clusterset config at path.
func startHubMemberWith(ctx context.Context, member, path string) (*syncerProcess, error) {
	return startSyncerWith(ctx, syncer.stateDir, "--clusterset-config", path, "--local-cluster", member,
		"--leader-elect", "--leader-election-namespace", "mcs-system",
		"--cluster-unreachable-grace", hubFailureGrace.String(), "--heartbeat-interval", "2s")
}

// identityOf returns the identity of ServiceImport ns/name in a consumer.
func identityOf(ctx context.Context, cl client.Client, ns, name string) (importIdentity, error) {
	si := &mcsv1beta1.ServiceImport{}
	if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, si); err != nil {
		return importIdentity{}, err
	}
	return importIdentity{uid: string(si.UID), ips: strings.Join(si.Spec.IPs, ",")}, nil
}

// republished returns a check that the hub cl reaches holds every
// member's marker and east's publication of web in ns again.
func republished(ctx context.Context, cl client.Client, ns string) func() error {
	return func() error {
		got, err := publicationNames(ctx, cl)
		if err != nil {
			return err
		}
		for _, want := range []string{"east", "east." + ns + ".web", "north", "west"} {
			if !slices.Contains(got, want) {
				return fmt.Errorf("publications %v lack %s", got, want)
			}
		}
		return nil
	}
}

// addressedIdentityOf is identityOf, with an error while the ServiceImport
// has no clusterset IP yet.
func addressedIdentityOf(ctx context.Context, cl client.Client, ns, name string) (importIdentity, error) {
	id, err := identityOf(ctx, cl, ns, name)
	if err == nil && id.ips == "" {
		err = fmt.Errorf("ServiceImport %s/%s has no clusterset IP yet", ns, name)
	}
	return id, err
}

// TestHubOutageWithdrawsNothing: the hub's API server is down for longer
// than the grace while every member stays healthy. Throughout, north and
// west keep east's endpoints and their ServiceImports (same UIDs, same
// clusterset IPs), and north reports the hub unreachable; web2, unexported
// in east during the outage, is withdrawn once the hub is back (east
// republishes) and never comes back; a change made in east after the
// hub's return reaches the consumers.
func TestHubOutageWithdrawsNothing(t *testing.T) {
	ns := "hub-outage"
	ctx, procs := hubFailureTest(t, ns, 6*time.Minute)

	east := bed.ClientOf(t, "east")
	d := workloads.CreateApp(ctx, t, east, ns, 2, 80, true, nil)
	if err := manualExport(ctx, east, ns, "web2", "10.100.9.2"); err != nil {
		t.Fatal(err)
	}
	consumers := []string{"north", "west"}
	before := map[string]importIdentity{}
	for _, consumer := range consumers {
		cl := bed.ClientOf(t, consumer)
		eventually(ctx, t, consumer+": east's web and web2", func() error {
			if err := readyImported(ctx, cl, ns, map[string]int{"east": 2})(); err != nil {
				return err
			}
			if err := importedEndpoints(ctx, cl, ns, "web2", "east", 1)(); err != nil {
				return err
			}
			id, err := addressedIdentityOf(ctx, cl, ns, "web")
			before[consumer] = id
			return err
		})
	}

	hubDown := false
	t.Cleanup(func() {
		if hubDown {
			_ = bed.Hub.StartAPIServer(context.Background())
		}
	})
	if err := bed.Hub.StopAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	hubDown = true
	stopped := time.Now()
	eventually(ctx, t, "north to report the hub unreachable", metricIs(ctx, procs["north"], "mcs_syncer_hub_connected", 0))
	// Its own heartbeat cannot reach the others: not ready, saying why.
	eventually(ctx, t, "north's /readyz to say east is held and north unheard", readyzAnswers(ctx, procs["north"], 503,
		"[+]member east ok: held", "[-]publisher failed: the other members do not hear from this one"))
	// East's exports say so, once: a Warning event.
	eventually(ctx, t, "east: a NotPublished Warning event on web", warningEvent(ctx, east, ns, "web", export.ReasonNotPublished))
	// Unexported while the hub is down: east cannot tell anyone yet.
	if err := east.Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web2"}}); err != nil {
		t.Fatal(err)
	}
	// Down for the grace and half as much again; every second, both
	// consumers still hold everything.
	holds(ctx, t, "the hub's outage", hubFailureGrace*3/2-time.Since(stopped), func() error {
		for _, consumer := range consumers {
			cl := bed.ClientOf(t, consumer)
			if err := readyImported(ctx, cl, ns, map[string]int{"east": 2})(); err != nil {
				return fmt.Errorf("%s: %w", consumer, err)
			}
			if id, err := identityOf(ctx, cl, ns, "web"); err != nil || id != before[consumer] {
				return fmt.Errorf("%s: ServiceImport %+v (%v), was %+v", consumer, id, err, before[consumer])
			}
		}
		return nil
	})

	if err := bed.Hub.StartAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	hubDown = false
	back := time.Now()
	eventually(ctx, t, "north to report the hub connected", metricIs(ctx, procs["north"], "mcs_syncer_hub_connected", 1))
	eventually(ctx, t, "north's /readyz to pass again", readyzSays(ctx, procs["north"], "[+]member east ok: engaged", "[+]publisher ok"))
	lowest := map[string]func() int{}
	for _, consumer := range consumers {
		cl := bed.ClientOf(t, consumer)
		eventually(ctx, t, consumer+": web2 withdrawn after the hub's return", func() error {
			if _, err := identityOf(ctx, cl, ns, "web2"); err == nil {
				return fmt.Errorf("web2 still imported")
			}
			return nil
		})
		t.Logf("%s: web2 withdrawn %s after the hub's return", consumer, time.Since(back).Round(time.Millisecond))
		lowest[consumer] = lowestReady(ctx, t, consumer, ns, "multicluster.kubernetes.io/source-cluster=east", 2)
	}
	scale(ctx, t, east, d, 3)
	for _, consumer := range consumers {
		cl := bed.ClientOf(t, consumer)
		eventually(ctx, t, consumer+": east's 3 endpoints after the hub's return", readyImported(ctx, cl, ns, map[string]int{"east": 3}))
		if id, err := identityOf(ctx, cl, ns, "web"); err != nil || id != before[consumer] {
			t.Errorf("%s: ServiceImport %+v (%v) after the outage, was %+v", consumer, id, err, before[consumer])
		}
		if n := lowest[consumer](); n < 2 {
			t.Errorf("%s held %d of east's ready endpoints after the hub's return, want never fewer than 2", consumer, n)
		}
		if err := importedEndpoints(ctx, cl, ns, "web2", "east", 0)(); err != nil {
			t.Errorf("%s: web2 came back: %v", consumer, err)
		}
	}
}

// TestStoppedMemberIsWithdrawnThroughTheHub: east's mcs-syncer is killed
// while the hub and east's API server stay up. Its publications stay in
// the hub, but its heartbeat stops: north withdraws east's endpoints (and
// the import east alone exported) once the grace after east's last
// heartbeat has run out, not before; west's import of its own Service is
// untouched. East's mcs-syncer restarted, the import comes back.
func TestStoppedMemberIsWithdrawnThroughTheHub(t *testing.T) {
	ns := "hub-member-stopped"
	ctx, procs := hubFailureTest(t, ns, 5*time.Minute)

	east, west, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "west"), bed.ClientOf(t, "north")
	workloads.CreateApp(ctx, t, east, ns, 2, 80, true, nil)
	if err := manualExport(ctx, west, ns, "other", "10.101.9.3"); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "north: east's web and west's other", func() error {
		if err := readyImported(ctx, north, ns, map[string]int{"east": 2})(); err != nil {
			return err
		}
		return importedEndpoints(ctx, north, ns, "other", "west", 1)()
	})
	other, err := identityOf(ctx, north, ns, "other")
	if err != nil {
		t.Fatal(err)
	}

	procs["east"].Kill()
	killed := time.Now()
	eventually(ctx, t, "north to withdraw east's web", func() error {
		if _, err := identityOf(ctx, north, ns, "web"); err == nil {
			return fmt.Errorf("web still imported")
		}
		return nil
	})
	// The last heartbeat came at most one interval (2 s) before the kill.
	if waited := time.Since(killed); waited < hubFailureGrace-2*time.Second {
		t.Errorf("withdrawn %s after the kill, before the %s grace", waited, hubFailureGrace)
	}
	t.Logf("east's web withdrawn %s after its mcs-syncer was killed", time.Since(killed).Round(time.Millisecond))
	if id, err := identityOf(ctx, north, ns, "other"); err != nil || id.uid != other.uid {
		t.Errorf("west's import changed: %+v (%v), was %+v", id, err, other)
	}

	p, err := startHubMember(ctx, "east")
	if err != nil {
		t.Fatal(err)
	}
	procs["east"] = p
	eventually(ctx, t, "north: east's web back", readyImported(ctx, north, ns, map[string]int{"east": 2}))
}

// metricIs returns a check that a process's metric sample has value want.
func metricIs(ctx context.Context, p *syncerProcess, sample string, want float64) func() error {
	return func() error {
		v, err := p.metric(ctx, sample)
		if err != nil {
			return err
		}
		if v != want {
			return fmt.Errorf("%s = %v, want %v", sample, v, want)
		}
		return nil
	}
}

// TestWipedHubRepublishes: every publication in the hub is deleted at once,
// the markers among them (what a wiped hub's returning watches report).
// Each member publishes everything again, its marker last, on its own;
// meanwhile no consumer withdraws anything: north never holds fewer than
// east's 2 ready endpoints, and its ServiceImport keeps its UID and
// clusterset IP.
func TestWipedHubRepublishes(t *testing.T) {
	ns := "hub-wiped"
	ctx, procs := hubFailureTest(t, ns, 4*time.Minute)

	east, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "north")
	workloads.CreateApp(ctx, t, east, ns, 2, 80, true, nil)
	var before importIdentity
	eventually(ctx, t, "north: east's web with a clusterset IP", func() error {
		if err := readyImported(ctx, north, ns, map[string]int{"east": 2})(); err != nil {
			return err
		}
		id, err := addressedIdentityOf(ctx, north, ns, "web")
		before = id
		return err
	})
	lowest := lowestReady(ctx, t, "north", ns, "multicluster.kubernetes.io/source-cluster=east", 2)

	clearHub(t)
	wiped := time.Now()
	eventually(ctx, t, "every member to publish again, marker included", republished(ctx, hubClient(t, ""), ns))
	t.Logf("republished %s after the wipe", time.Since(wiped).Round(time.Millisecond))
	eventually(ctx, t, "north: east's 2 endpoints", readyImported(ctx, north, ns, map[string]int{"east": 2}))
	if n := lowest(); n < 2 {
		t.Errorf("north held %d of east's ready endpoints while the hub was rebuilt, want never fewer than 2", n)
	}
	if id, err := identityOf(ctx, north, ns, "web"); err != nil || id != before {
		t.Errorf("ServiceImport %+v (%v) after the wipe, was %+v", id, err, before)
	}
	for member, p := range procs {
		if err := p.Exited(); err != nil {
			t.Errorf("%s's mcs-syncer did not recover on its own: %v", member, err)
		}
	}
}

// TestRevokedThenRotatedHubToken: west's identity in the hub is deleted
// (its token revoked). A change of west's export cannot be published:
// west's ServiceExport says Ready=False with the hub's answer, and its
// /readyz fails naming the publisher. A new token written into west's hub
// kubeconfig reaches the publisher without a restart: the change is
// published and imported by north, and west's status recovers.
func TestRevokedThenRotatedHubToken(t *testing.T) {
	ns := "hub-token"
	ctx, procs := hubFailureTest(t, ns, 4*time.Minute)
	kubeconfig := filepath.Join(bed.StateDir, "hub", "west.kubeconfig")
	// Whatever happens here, west's identity is back for the tests after.
	t.Cleanup(func() {
		if err := bed.HubIdentity(context.Background(), "west", kubeconfig); err != nil {
			t.Error(err)
		}
	})

	west, north := bed.ClientOf(t, "west"), bed.ClientOf(t, "north")
	if err := manualExport(ctx, west, ns, "w", "10.101.9.4"); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "north: west's w", importedEndpoints(ctx, north, ns, "w", "west", 1))

	hub, err := bed.Hub.Kubernetes()
	if err != nil {
		t.Fatal(err)
	}
	if err := hub.CoreV1().ServiceAccounts(testbed.HubNamespace).Delete(ctx, "member-west", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Its heartbeat is refused within one interval: then a change cannot
	// be published either.
	eventually(ctx, t, "west's /readyz to fail naming the publisher", readyzAnswers(ctx, procs["west"], 503, "[-]publisher failed", "Unauthorized"))
	addEndpoint(ctx, t, west, ns, "w-manual", "10.101.9.5")
	eventually(ctx, t, "west's ServiceExport to say it is not published", func() error {
		cond, err := workloads.ExportCondition(ctx, west, ns, "w", mcsv1beta1.ServiceExportConditionReady)
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, "Unauthorized") {
			return fmt.Errorf("Ready %s %s: %s", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
	if err := importedEndpoints(ctx, north, ns, "w", "west", 1)(); err != nil {
		t.Errorf("north imported west's unpublished change: %v", err)
	}

	if err := bed.HubIdentity(ctx, "west", kubeconfig); err != nil {
		t.Fatal(err)
	}
	rotated := time.Now()
	eventually(ctx, t, "north: west's change, published with the new token", importedEndpoints(ctx, north, ns, "w", "west", 2))
	t.Logf("west's change imported %s after the new token was written", time.Since(rotated).Round(time.Millisecond))
	eventually(ctx, t, "west's ServiceExport Ready again", func() error {
		cond, err := workloads.ExportCondition(ctx, west, ns, "w", mcsv1beta1.ServiceExportConditionReady)
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready %s %s: %s", cond.Status, cond.Reason, cond.Message)
		}
		return nil
	})
	eventually(ctx, t, "west's /readyz to pass", readyzSays(ctx, procs["west"], "[+]publisher ok"))
	if err := procs["west"].Exited(); err != nil {
		t.Fatalf("west's mcs-syncer restarted: %v", err)
	}
}

// addEndpoint adds a ready endpoint to an EndpointSlice.
func addEndpoint(ctx context.Context, t *testing.T, cl client.Client, ns, name, ip string) {
	t.Helper()
	slice := &discoveryv1.EndpointSlice{}
	if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, slice); err != nil {
		t.Fatal(err)
	}
	slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	if err := cl.Update(ctx, slice); err != nil {
		t.Fatal(err)
	}
}

// warningEvent returns a check that a Warning event with reason is
// recorded for object ns/name.
func warningEvent(ctx context.Context, cl client.Client, ns, name, reason string) func() error {
	return func() error {
		var list eventsv1.EventList
		if err := cl.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Type == corev1.EventTypeWarning && e.Reason == reason {
				return nil
			}
			seen = append(seen, e.Type+" "+e.Reason+" "+e.Regarding.Name)
		}
		return fmt.Errorf("no Warning %s event for %s/%s among %v", reason, ns, name, seen)
	}
}
