package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/publish"
	"github.com/mcs-syncer/mcs-syncer/internal/status"
	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/controlplane"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/workloads"
)

// The tests of this file run the clusterset in hub mode: one mcs-syncer
// per member (--local-cluster), each with the hub-mode config the testbed
// wrote (its own cluster through its admin kubeconfig, the hub through its
// member identity, every other member through the hub).

// startHubMode runs one mcs-syncer per member in hub mode.
func startHubMode(ctx context.Context, t *testing.T) []*syncerProcess {
	t.Helper()
	return startMembers(ctx, t, bed.HubConfigPath)
}

// startMembers runs one mcs-syncer per member, each with the clusterset
// config at config(member) and flags besides; if one cannot start, those
// started are stopped.
func startMembers(ctx context.Context, t *testing.T, config func(member string) string, flags ...string) []*syncerProcess {
	t.Helper()
	var procs []*syncerProcess
	for _, c := range bed.Clusters {
		p, err := startMemberSyncer(ctx, config(c.Name), c.Name, flags...)
		if err != nil {
			stopAll(t, procs)
			t.Fatal(err)
		}
		procs = append(procs, p)
	}
	return procs
}

// hubClient is a client of the hub: as its administrator, or, given a
// member, with that member's identity (the kubeconfig the testbed wrote).
func hubClient(t *testing.T, member string) client.Client {
	t.Helper()
	return hubClientQPS(t, member, 0)
}

// hubClientQPS is hubClient with a client-side limit of qps requests a
// second, negative for none; 0 keeps the config's (the testbed's 200 for
// the administrator, client-go's default of 5 for a member's kubeconfig).
func hubClientQPS(t *testing.T, member string, qps float32) client.Client {
	t.Helper()
	rc := bed.Hub.RESTConfig()
	if member != "" {
		var err error
		rc, err = clientcmd.BuildConfigFromFlags("", filepath.Join(bed.StateDir, "hub", member+".kubeconfig"))
		if err != nil {
			t.Fatal(err)
		}
	}
	if qps != 0 {
		rc.QPS = qps
	}
	cl, err := client.New(rc, client.Options{Scheme: controlplane.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// hubPublications returns the names of the publications in the hub.
func hubPublications(ctx context.Context, t *testing.T) ([]string, error) {
	return publicationNames(ctx, hubClient(t, ""))
}

// publicationNames returns the names of the publications in the hub that
// cl (its administrator) reaches, sorted.
func publicationNames(ctx context.Context, cl client.Client) ([]string, error) {
	var list v1alpha1.PublishedExportList
	if err := cl.List(ctx, &list, client.InNamespace(testbed.HubNamespace)); err != nil {
		return nil, err
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names, nil
}

// clearHub removes every publication from the hub, so that the next hub
// test starts from an empty hub.
func clearHub(t *testing.T) {
	t.Helper()
	if err := hubClient(t, "").DeleteAllOf(context.Background(), &v1alpha1.PublishedExport{}, client.InNamespace(testbed.HubNamespace)); err != nil {
		t.Errorf("clear the hub: %v", err)
	}
}

// TestHubMode: in hub mode, web exported from east is published into the
// hub (with every member's marker), imported by west and north with
// east's endpoints, and a pod in north reaches east's pods through the
// clusterset IP. The member API servers are never read by another
// member's mcs-syncer (their only clients are their own mcs-syncer's).
func TestHubMode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	exclusive(t)
	dp := newDataPlane(ctx, t, "hub-mode")
	procs := startHubMode(ctx, t)
	defer stopAll(t, procs)
	t.Cleanup(func() { clearHub(t) })

	serve(ctx, t, "east", dp.ns, "web", 2, true, nil, port("tcp", corev1.ProtocolTCP, 80))
	for _, consumer := range []string{"west", "north"} {
		eventually(ctx, t, consumer+": the import of east's 2 endpoints", readyImported(ctx, bed.ClientOf(t, consumer), dp.ns, map[string]int{"east": 2}))
	}
	eventually(ctx, t, "east's publication and every member's marker in the hub", func() error {
		got, err := hubPublications(ctx, t)
		if err != nil {
			return err
		}
		for _, want := range []string{"east", "east." + dp.ns + ".web", "north", "west"} {
			if !slices.Contains(got, want) {
				return fmt.Errorf("publications %v lack %s", got, want)
			}
		}
		return nil
	})
	ip := importIP(ctx, t, dp.ns, "web")
	dp.reaches(ctx, t, "tcp", ip+":80", 10, "east")
	dp.reaches(ctx, t, "tcp", "web."+dp.ns+".svc.clusterset.local:80", 10, "east")
	statusThroughTheHub(ctx, t, procs, dp.ns)
}

// statusThroughTheHub: kubectl mcs status, given north's own hub-mode
// config, reads east and west through their publications in the hub
// (north's hub identity) and north directly: converged, north's import
// holding east's 2 endpoints, every member up as the three mcs-syncers
// (--syncer) see it, each at its own mcs-syncer's version.
func statusThroughTheHub(ctx context.Context, t *testing.T, procs []*syncerProcess, ns string) {
	t.Helper()
	bin := buildKubectlMCS(ctx, t)
	args := []string{"status", ns + "/web", "--clusterset-config", bed.HubConfigPath("north"), "-o", "json"}
	for _, p := range procs {
		args = append(args, "--syncer", p.ProbeAddr)
	}
	var r status.Report
	eventually(ctx, t, "kubectl mcs status through the hub to report web converged", func() error {
		if code, stderr := runJSON(ctx, t, &r, bin, args...); code != 0 {
			return fmt.Errorf("exit %d: %s", code, stderr)
		}
		return nil
	})
	if len(r.Services) != 1 || len(r.Services[0].Imports) != 1 || fmt.Sprintf("%+v", r.Services[0].Imports[0].Endpoints) != "[{Source:east Imported:2 Exported:2 Unimportable:0}]" {
		t.Fatalf("services %+v", r.Services)
	}
	for _, m := range r.Members {
		if !m.Read || m.ThroughHub != (m.ID != "north") || m.Health != "up" || m.Version == "" || len(m.SeenBy) != 3 {
			t.Errorf("member %s: %+v", m.ID, m)
		}
	}
}

// TestHubRefusesPublishingAsAnother: the hub's admission policy
// (config/hub/admission.yaml) lets a member's identity write only its own
// publications. east's identity may not create a publication as west,
// change or delete west's, relabel its own as west's, or pass off a
// publication named for west as its own; west's publications stay exactly
// as they were. east's own publication goes through.
func TestHubRefusesPublishingAsAnother(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, east := hubClient(t, ""), hubClient(t, "east")
	ns := testbed.HubNamespace
	t.Cleanup(func() { clearHub(t) })

	// west's marker, as west's own mcs-syncer would write it.
	west := hubClient(t, "west")
	if err := west.Create(ctx, publish.Marker("west", ns, 0)); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("west cannot write its own marker: %v", err)
	}
	before := &v1alpha1.PublishedExport{}
	if err := admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: "west"}, before); err != nil {
		t.Fatal(err)
	}

	asWest := publish.Marker("west", ns, 0)
	asWest.Name = "west.intruder.web"
	asWest.Spec.Namespace, asWest.Spec.Name = "intruder", "web"
	if err := east.Create(ctx, asWest); !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Errorf("east published as west: %v", err)
	}
	changed := before.DeepCopy()
	changed.Spec.Cluster = "east"
	changed.Labels["multicluster.kubernetes.io/source-cluster"] = "east"
	if err := east.Update(ctx, changed); !apierrors.IsForbidden(err) {
		t.Errorf("east changed west's marker: %v", err)
	}
	if err := east.Delete(ctx, before.DeepCopy()); !apierrors.IsForbidden(err) {
		t.Errorf("east deleted west's marker: %v", err)
	}
	mislabelled := publish.Marker("east", ns, 0)
	mislabelled.Name = "east.mislabelled.web"
	mislabelled.Spec.Namespace, mislabelled.Spec.Name = "mislabelled", "web"
	mislabelled.Labels["multicluster.kubernetes.io/source-cluster"] = "west"
	if err := east.Create(ctx, mislabelled); err == nil {
		t.Errorf("east published with west's label")
	}
	misnamed := publish.Marker("east", ns, 0)
	misnamed.Name = "west.misnamed.web"
	if err := east.Create(ctx, misnamed); err == nil {
		t.Errorf("east published under west's name")
	}
	// A cluster ID may have two labels: the name of member east.fleet-a's
	// publication of own/web starts with "east." too.
	squatting := publish.Marker("east", ns, 0)
	squatting.Name = "east.fleet-a.own.web"
	squatting.Spec.Namespace, squatting.Spec.Name = "own", "web"
	if err := east.Create(ctx, squatting); err == nil {
		t.Errorf("east published under the name of east.fleet-a's publication")
	}

	after := &v1alpha1.PublishedExport{}
	if err := admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: "west"}, after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != before.ResourceVersion {
		t.Errorf("west's marker changed: resourceVersion %s, was %s", after.ResourceVersion, before.ResourceVersion)
	}
	for _, name := range []string{"west.intruder.web", "east.mislabelled.web", "west.misnamed.web", "east.fleet-a.own.web", "west.own.web.part.0"} {
		if err := admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &v1alpha1.PublishedExport{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s exists: %v", name, err)
		}
	}

	// Parts are bound as heads are: none as west, none named as a head
	// (east's part "web" of fleet-a/own would take the name of member
	// east.fleet-a's head of own/web), none of west's deleted.
	part := func(cluster, name string) *v1alpha1.PublishedExport {
		p := publish.Marker(clusterset.ClusterID(cluster), ns, 0)
		p.Spec.Namespace, p.Spec.Name, p.Spec.Part, p.Spec.ReadsParts = "own", "web", "0", false
		p.Name = name
		p.Labels[mcsv1beta1.LabelSourceCluster] = cluster
		return p
	}
	if err := east.Create(ctx, part("west", "west.own.web.part.0")); !apierrors.IsForbidden(err) {
		t.Errorf("east wrote a part as west: %v", err)
	}
	squattingPart := part("east", "east.fleet-a.own.web")
	squattingPart.Spec.Namespace, squattingPart.Spec.Name, squattingPart.Spec.Part = "fleet-a", "own", "web"
	if err := east.Create(ctx, squattingPart); err == nil {
		t.Errorf("east wrote a part under the name of east.fleet-a's head")
	}
	westPart := part("west", "west.own.web.part.0")
	if err := west.Create(ctx, westPart); err != nil {
		t.Fatalf("west cannot write its own part: %v", err)
	}
	if err := east.Delete(ctx, westPart.DeepCopy()); !apierrors.IsForbidden(err) {
		t.Errorf("east deleted west's part: %v", err)
	}
	relabelled := westPart.DeepCopy()
	relabelled.Labels[mcsv1beta1.LabelSourceCluster] = "east"
	relabelled.Spec.Cluster = "east"
	if err := east.Update(ctx, relabelled); !apierrors.IsForbidden(err) {
		t.Errorf("east took west's part: %v", err)
	}
	if err := west.Delete(ctx, westPart); err != nil {
		t.Errorf("west cannot withdraw its own part: %v", err)
	}

	// Its own: allowed.
	own := publish.Marker("east", ns, 0)
	own.Name = "east.own.web"
	own.Spec.Namespace, own.Spec.Name = "own", "web"
	if err := east.Create(ctx, own); err != nil {
		t.Errorf("east cannot publish as itself: %v", err)
	}
	if err := east.Delete(ctx, own); err != nil {
		t.Errorf("east cannot withdraw its own publication: %v", err)
	}
	ownPart := part("east", "east.own.web.part.0")
	if err := east.Create(ctx, ownPart); err != nil {
		t.Errorf("east cannot write its own part: %v", err)
	}
	if err := east.Delete(ctx, ownPart); err != nil {
		t.Errorf("east cannot withdraw its own part: %v", err)
	}
}

// lowestReady watches consumer's EndpointSlices of ns matching selector
// and returns a function that reports the lowest number of ready
// endpoints they held together since they first held from (the initial
// list may come slice by slice), as of its call; -1 if they never held
// from. The watch is ended by ctx.
func lowestReady(ctx context.Context, t *testing.T, consumer, ns, selector string, from int) func() int {
	t.Helper()
	var mu sync.Mutex
	lowest := -1
	watchReady(ctx, t, consumer, ns, selector, func(_ watch.EventType, total int) bool {
		mu.Lock()
		defer mu.Unlock()
		if (lowest < 0 && total >= from) || (lowest >= 0 && total < lowest) {
			lowest = total
		}
		return true
	})
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return lowest
	}
}

// TestDirectToHubSwitch: a clusterset in per-cluster direct mode is
// switched to hub mode one member at a time, the consumers first (so
// that, for a while, north reads east through the hub while east still
// publishes only in its own cluster). No ServiceImport's clusterset IP
// changes and no consumer ever holds fewer of east's ready endpoints than
// before (watched throughout); afterwards a change of east's endpoints
// reaches the consumers through the hub.
func TestDirectToHubSwitch(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	exclusive(t)
	t.Cleanup(func() { clearHub(t) })
	ns := "direct-to-hub"
	bed.Namespace(ctx, t, ns)

	direct := map[string]*syncerProcess{}
	for _, c := range bed.Clusters {
		p, err := startMemberSyncer(ctx, bed.ConfigPath, c.Name)
		if err != nil {
			t.Fatal(err)
		}
		direct[c.Name] = p
	}
	var procs []*syncerProcess
	defer func() {
		for _, p := range direct {
			procs = append(procs, p)
		}
		stopAll(t, procs)
	}()

	east := bed.ClientOf(t, "east")
	d := workloads.CreateApp(ctx, t, east, ns, 2, 80, true, nil)
	consumers := []string{"north", "west"}
	ips := map[string][]string{}
	lowest := map[string]func() int{}
	for _, consumer := range consumers {
		cl := bed.ClientOf(t, consumer)
		eventually(ctx, t, consumer+": the import of east's 2 endpoints with a clusterset IP", func() error {
			si, err := getImport(ctx, cl, ns)
			if err != nil {
				return err
			}
			if len(si.Spec.IPs) == 0 {
				return fmt.Errorf("no IP yet")
			}
			ips[consumer] = si.Spec.IPs
			return readyImported(ctx, cl, ns, map[string]int{"east": 2})()
		})
		lowest[consumer] = lowestReady(ctx, t, consumer, ns, "multicluster.kubernetes.io/source-cluster=east", 2)
	}

	for _, id := range []string{"north", "west", "east"} {
		if err := direct[id].stop(); err != nil {
			t.Error(err)
		}
		delete(direct, id)
		p, err := startMemberSyncer(ctx, bed.HubConfigPath(id), id)
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
	}
	eventually(ctx, t, "east's publication in the hub", func() error {
		got, err := hubPublications(ctx, t)
		if err != nil {
			return err
		}
		if !slices.Contains(got, "east."+ns+".web") || !slices.Contains(got, "east") {
			return fmt.Errorf("publications %v", got)
		}
		return nil
	})
	scale(ctx, t, east, d, 3)
	for _, consumer := range consumers {
		cl := bed.ClientOf(t, consumer)
		eventually(ctx, t, consumer+": east's 3 endpoints through the hub", readyImported(ctx, cl, ns, map[string]int{"east": 3}))
		si, err := getImport(ctx, cl, ns)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(si.Spec.IPs, ips[consumer]) {
			t.Errorf("%s: clusterset IP %v, was %v before the switch", consumer, si.Spec.IPs, ips[consumer])
		}
		if n := lowest[consumer](); n < 2 {
			t.Errorf("%s held %d of east's ready endpoints during the switch, want never fewer than 2", consumer, n)
		}
	}
	// What the direct mode published in the members stays there until
	// removed by hand (docs/user-guide.md); the tests after this one run
	// in central mode, which reads none of it.
	for _, c := range bed.Clusters {
		if err := bed.ClientOf(t, c.Name).DeleteAllOf(ctx, &v1alpha1.PublishedExport{}, client.InNamespace("mcs-system")); err != nil {
			t.Error(err)
		}
	}
}
