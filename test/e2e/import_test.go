package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/imports"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/coredns"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/workloads"
)

func getImport(ctx context.Context, cl client.Client, ns string) (*mcsv1beta1.ServiceImport, error) {
	si := &mcsv1beta1.ServiceImport{}
	return si, cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, si)
}

// importedSlices lists the slices imported for ns/web in cl, by source
// cluster.
func importedSlices(ctx context.Context, cl client.Client, ns string) (map[string][]discoveryv1.EndpointSlice, error) {
	var list discoveryv1.EndpointSliceList
	if err := cl.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{mcsv1beta1.LabelServiceName: "web"}); err != nil {
		return nil, err
	}
	out := map[string][]discoveryv1.EndpointSlice{}
	for _, s := range list.Items {
		out[s.Labels[mcsv1beta1.LabelSourceCluster]] = append(out[s.Labels[mcsv1beta1.LabelSourceCluster]], s)
	}
	return out, nil
}

// readyImported returns a check that ns/web in cl holds exactly the given
// number of ready imported endpoints from each named source cluster.
func readyImported(ctx context.Context, cl client.Client, ns string, want map[string]int) func() error {
	return func() error {
		bySource, err := importedSlices(ctx, cl, ns)
		if err != nil {
			return err
		}
		for source, n := range want {
			if got := countReady(bySource[source]); got != n {
				return fmt.Errorf("%d ready endpoints from %s, want %d", got, source, n)
			}
		}
		return nil
	}
}

func countReady(slices []discoveryv1.EndpointSlice) int {
	n := 0
	for _, s := range slices {
		n += workloads.CountReady(s.Endpoints)
	}
	return n
}

// TestExportIsImportedEverywhere: a Service exported from east becomes a
// ServiceImport with its spec and a clusterset IP in all three clusters;
// west and north get slices of east's endpoints with the standard's labels
// and the endpoints' conditions, zone and node; the export's status is
// Valid, Ready, without conflict; north's CoreDNS answers the clusterset
// name with the clusterset IP.
func TestExportIsImportedEverywhere(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := "import-everywhere"
	bed.Namespace(ctx, t, ns)
	east := bed.ClientOf(t, "east")
	workloads.CreateApp(ctx, t, east, ns, 3, 80, true, func(s *corev1.Service) {
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
		s.Spec.TrafficDistribution = ptr.To(corev1.ServiceTrafficDistributionPreferClose)
	})

	derived := imports.DerivedServiceName(types.NamespacedName{Namespace: ns, Name: "web"})
	for _, c := range bed.Clusters {
		cl := bed.ClientOf(t, c.Name)
		var si *mcsv1beta1.ServiceImport
		eventually(ctx, t, c.Name+": the ServiceImport with a clusterset IP", func() (err error) {
			if si, err = getImport(ctx, cl, ns); err != nil {
				return err
			}
			if len(si.Spec.IPs) != 1 {
				return fmt.Errorf("ips %v", si.Spec.IPs)
			}
			return nil
		})
		s := si.Spec
		if s.Type != mcsv1beta1.ClusterSetIP || len(s.Ports) != 1 || s.Ports[0].Port != 80 || s.Ports[0].Name != "http" ||
			s.SessionAffinity != corev1.ServiceAffinityClientIP || ptr.Deref(s.InternalTrafficPolicy, "") != corev1.ServiceInternalTrafficPolicyLocal ||
			ptr.Deref(s.TrafficDistribution, "") != corev1.ServiceTrafficDistributionPreferClose || !slices.Equal(s.IPFamilies, []corev1.IPFamily{corev1.IPv4Protocol}) {
			t.Errorf("%s: ServiceImport spec %+v", c.Name, s)
		}
		if !inCIDR(s.IPs[0], c.ServiceCIDR) {
			t.Errorf("%s: clusterset IP %s outside the cluster's service CIDR %s", c.Name, s.IPs[0], c.ServiceCIDR)
		}
		svc := &corev1.Service{}
		if err := cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: derived}, svc); err != nil {
			t.Errorf("%s: derived Service %s: %v", c.Name, derived, err)
		} else if svc.Spec.ClusterIP != s.IPs[0] || svc.Spec.Selector != nil || !metav1.IsControlledBy(svc, si) || si.Annotations[imports.DerivedServiceAnnotation] != derived {
			t.Errorf("%s: derived Service %s: ip %s selector %v owners %v; annotation %q", c.Name, derived, svc.Spec.ClusterIP, svc.Spec.Selector, svc.OwnerReferences, si.Annotations[imports.DerivedServiceAnnotation])
		}
		if c.Name == "east" {
			continue
		}
		eventually(ctx, t, c.Name+": 3 ready endpoints from east", func() error {
			bySource, err := importedSlices(ctx, cl, ns)
			if err != nil {
				return err
			}
			if n := countReady(bySource["east"]); n != 3 || len(bySource) != 1 {
				return fmt.Errorf("%d ready endpoints from east, sources %d", n, len(bySource))
			}
			return nil
		})
		bySource, _ := importedSlices(ctx, cl, ns)
		for _, sl := range bySource["east"] {
			want := map[string]string{
				mcsv1beta1.LabelServiceName: "web", mcsv1beta1.LabelSourceCluster: "east",
				discoveryv1.LabelManagedBy: "mcs", discoveryv1.LabelServiceName: derived,
			}
			for k, v := range want {
				if sl.Labels[k] != v {
					t.Errorf("%s: slice %s label %s=%q, want %q", c.Name, sl.Name, k, sl.Labels[k], v)
				}
			}
			if ref := metav1.GetControllerOf(&sl); ref == nil || ref.Kind != "ServiceImport" {
				t.Errorf("%s: slice %s owner %v", c.Name, sl.Name, sl.OwnerReferences)
			}
			for _, ep := range sl.Endpoints {
				if !inCIDR(ep.Addresses[0], bed.Cluster("east").PodCIDR) || !contains(bed.Cluster("east").Zones, ptr.Deref(ep.Zone, "")) ||
					ptr.Deref(ep.NodeName, "") == "" || ep.Conditions.Serving == nil || ep.Conditions.Terminating == nil {
					t.Errorf("%s: endpoint %+v", c.Name, ep)
				}
			}
		}
	}
	for typ, want := range map[mcsv1beta1.ServiceExportConditionType]string{
		mcsv1beta1.ServiceExportConditionValid: "True/Valid", mcsv1beta1.ServiceExportConditionReady: "True/Exported", mcsv1beta1.ServiceExportConditionConflict: "False/NoConflicts",
	} {
		eventually(ctx, t, "ServiceExport "+string(typ)+"="+want, func() error {
			c, err := workloads.ExportCondition(ctx, east, ns, "web", typ)
			if err != nil {
				return err
			}
			if got := string(c.Status) + "/" + c.Reason; got != want {
				return fmt.Errorf("%s", got)
			}
			return nil
		})
	}

	for _, sample := range []string{
		`mcs_syncer_imported_endpoints{consumer_cluster="north",source_cluster="east"}`,
		`mcs_syncer_propagation_latency_seconds_count{consumer_cluster="north",source_cluster="east"}`,
		`mcs_syncer_exported_services{cluster="east"}`,
		`mcs_syncer_member_connected{cluster="north"}`,
	} {
		eventually(ctx, t, sample+" > 0", func() error {
			v, err := syncer.metric(ctx, sample)
			if err != nil {
				return err
			}
			if v <= 0 {
				return fmt.Errorf("%v", v)
			}
			return nil
		})
	}

	north := bed.Cluster("north")
	si, _ := getImport(ctx, bed.ClientOf(t, "north"), ns)
	name := "web." + ns + ".svc.clusterset.local"
	eventually(ctx, t, "north's CoreDNS to answer "+name, func() error {
		ips, err := coredns.Lookup(ctx, north.DNSAddr, name)
		if err != nil {
			return err
		}
		if !slices.Equal(ips, si.Spec.IPs) {
			return fmt.Errorf("answer %v, want %v", ips, si.Spec.IPs)
		}
		return nil
	})
}

// TestImportFollowsScale: scaling east's Deployment 3 -> 10 -> 2 is
// followed by north's imported slices, which carry the source slices'
// last-change-trigger-time.
func TestImportFollowsScale(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := "import-scale"
	bed.Namespace(ctx, t, ns)
	east, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "north")
	d := workloads.CreateApp(ctx, t, east, ns, 3, 80, true, nil)
	for _, replicas := range []int32{3, 10, 2} {
		patch := client.MergeFrom(d.DeepCopy())
		d.Spec.Replicas = ptr.To(replicas)
		if err := east.Patch(ctx, d, patch); err != nil {
			t.Fatal(err)
		}
		eventually(ctx, t, fmt.Sprintf("north to import %d ready endpoints with the source's trigger time", replicas), func() error {
			bySource, err := importedSlices(ctx, north, ns)
			if err != nil {
				return err
			}
			if n := countReady(bySource["east"]); n != int(replicas) {
				return fmt.Errorf("%d ready endpoints", n)
			}
			var source discoveryv1.EndpointSliceList
			if err := east.List(ctx, &source, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: "web"}); err != nil {
				return err
			}
			newest := ""
			for _, s := range source.Items {
				if tt := s.Annotations[corev1.EndpointsLastChangeTriggerTime]; tt > newest {
					newest = tt
				}
			}
			for _, s := range bySource["east"] {
				if got := s.Annotations[corev1.EndpointsLastChangeTriggerTime]; got != newestRFC3339Nano(newest) {
					return fmt.Errorf("imported slice %s trigger time %q, source's newest %q", s.Name, got, newest)
				}
			}
			return nil
		})
	}
}

// newestRFC3339Nano normalizes a trigger time as the reconciler writes it
// (UTC, RFC 3339 with nanoseconds).
func newestRFC3339Nano(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// TestSameServiceFromTwoClusters: the same Service exported from west
// (first, port 80) and east (port 8080): status.clusters lists both; the
// different ports are a PortConflict on both exports, the older (west's)
// port is imported, and only west's endpoints serve it (KEP-1645: "network
// traffic to a conflicting port should only be directed to endpoints from
// constituent services that actually expose the port"). Once east's port
// matches, north imports from both.
func TestSameServiceFromTwoClusters(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := "import-two"
	bed.Namespace(ctx, t, ns)
	east, west, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "west"), bed.ClientOf(t, "north")
	workloads.CreateApp(ctx, t, west, ns, 2, 80, true, nil)
	eventually(ctx, t, "west's export to be older than a second", func() error {
		c, err := workloads.ExportCondition(ctx, west, ns, "web", mcsv1beta1.ServiceExportConditionReady)
		if err != nil {
			return err
		}
		if time.Since(c.LastTransitionTime.Time) < 1100*time.Millisecond {
			return fmt.Errorf("ready since %s", c.LastTransitionTime)
		}
		return nil
	})
	workloads.CreateApp(ctx, t, east, ns, 3, 8080, true, nil)

	eventually(ctx, t, "north to import west's endpoints, and none of east's", func() error {
		bySource, err := importedSlices(ctx, north, ns)
		if err != nil {
			return err
		}
		if countReady(bySource["east"]) != 0 || countReady(bySource["west"]) != 2 {
			return fmt.Errorf("ready: east %d, west %d", countReady(bySource["east"]), countReady(bySource["west"]))
		}
		si, err := getImport(ctx, north, ns)
		if err != nil {
			return err
		}
		var clusters []string
		for _, c := range si.Status.Clusters {
			clusters = append(clusters, c.Cluster)
		}
		if !slices.Equal(clusters, []string{"east", "west"}) {
			return fmt.Errorf("status.clusters %v", clusters)
		}
		if len(si.Spec.Ports) != 1 || si.Spec.Ports[0].Port != 80 {
			return fmt.Errorf("ports %v, want west's (older) 80", si.Spec.Ports)
		}
		return nil
	})
	portConflictOn(ctx, t, ns, map[string]client.Client{"east": east, "west": west}, "west (oldest export)",
		`the endpoints of east are left out of port "http"`)

	svc := &corev1.Service{}
	if err := east.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, svc); err != nil {
		t.Fatal(err)
	}
	svc.Spec.Ports[0].Port = 80
	if err := east.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "north to import from both once east's port matches", func() error {
		bySource, err := importedSlices(ctx, north, ns)
		if err != nil {
			return err
		}
		if countReady(bySource["east"]) != 3 || countReady(bySource["west"]) != 2 {
			return fmt.Errorf("ready: east %d, west %d", countReady(bySource["east"]), countReady(bySource["west"]))
		}
		return nil
	})
}

// portConflictOn waits until every named exporter's ServiceExport ns/web
// says Conflict=True/PortConflict with a message containing each of parts.
func portConflictOn(ctx context.Context, t *testing.T, ns string, exporters map[string]client.Client, parts ...string) {
	t.Helper()
	for name, cl := range exporters {
		eventually(ctx, t, name+": Conflict=True/PortConflict", func() error {
			c, err := workloads.ExportCondition(ctx, cl, ns, "web", mcsv1beta1.ServiceExportConditionConflict)
			if err != nil {
				return err
			}
			if c.Status != metav1.ConditionTrue || c.Reason != "PortConflict" {
				return fmt.Errorf("%s/%s: %s", c.Status, c.Reason, c.Message)
			}
			for _, part := range parts {
				if !strings.Contains(c.Message, part) {
					return fmt.Errorf("message %q lacks %q", c.Message, part)
				}
			}
			return nil
		})
	}
}

// TestPortSetsNotIdentical: east exports tcp/42 and udp/42, west tcp/42 and
// sctp/142 (mcs-api v1beta1: PortConflict applies "if the ports are not
// identical in all the constituent Services"): the import exposes the
// union, and both ServiceExports say PortConflict naming what is missing
// where.
func TestPortSetsNotIdentical(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := "import-portsets"
	bed.Namespace(ctx, t, ns)
	east, west, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "west"), bed.ClientOf(t, "north")
	withPorts := func(ports ...corev1.ServicePort) func(*corev1.Service) {
		return func(s *corev1.Service) { s.Spec.Ports = ports }
	}
	tcp := corev1.ServicePort{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 42}
	workloads.CreateApp(ctx, t, east, ns, 1, 42, true, withPorts(tcp, corev1.ServicePort{Name: "udp", Protocol: corev1.ProtocolUDP, Port: 42}))
	workloads.CreateApp(ctx, t, west, ns, 1, 42, true, withPorts(tcp, corev1.ServicePort{Name: "stcp", Protocol: corev1.ProtocolSCTP, Port: 142}))

	eventually(ctx, t, "north's ServiceImport to expose the union", func() error {
		si, err := getImport(ctx, north, ns)
		if err != nil {
			return err
		}
		var got []string
		for _, p := range si.Spec.Ports {
			got = append(got, fmt.Sprintf("%s/%s/%d", p.Name, p.Protocol, p.Port))
		}
		slices.Sort(got)
		if want := []string{"stcp/SCTP/142", "tcp/TCP/42", "udp/UDP/42"}; !slices.Equal(got, want) {
			return fmt.Errorf("ports %v, want %v", got, want)
		}
		return nil
	})
	portConflictOn(ctx, t, ns, map[string]client.Client{"east": east, "west": west},
		`"udp" udp/42 from east is missing in west`, `"stcp" sctp/142 from west is missing in east`)
}

// TestPersonsServiceImportIsNamed: a ServiceImport a person created in
// north (without mcs-syncer's label) is left alone, and the exporter's
// ServiceExport says where the import is blocked and by what.
func TestPersonsServiceImportIsNamed(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := "import-persons"
	bed.Namespace(ctx, t, ns)
	east, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "north")
	person := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, Ports: []mcsv1beta1.ServicePort{}}}
	if err := north.Create(ctx, person); err != nil {
		t.Fatal(err)
	}
	workloads.CreateApp(ctx, t, east, ns, 1, 80, true, nil)
	eventually(ctx, t, "east's ServiceExport to name north's ServiceImport", func() error {
		c, err := workloads.ExportCondition(ctx, east, ns, "web", mcsv1beta1.ServiceExportConditionReady)
		if err != nil {
			return err
		}
		if !strings.Contains(c.Message, "ServiceImport "+ns+"/web in cluster north is not managed by mcs-syncer") {
			return fmt.Errorf("%s/%s: %s", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	si, err := getImport(ctx, north, ns)
	if err != nil {
		t.Fatal(err)
	}
	if si.ResourceVersion != person.ResourceVersion || len(si.Status.Conditions) != 0 {
		t.Errorf("the person's ServiceImport was written: %+v", si)
	}
	if err := north.Delete(ctx, si); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "north to import once it is gone", readyImported(ctx, north, ns, map[string]int{"east": 1}))
	eventually(ctx, t, "east's Ready message to drop the block", func() error {
		c, err := workloads.ExportCondition(ctx, east, ns, "web", mcsv1beta1.ServiceExportConditionReady)
		if err != nil {
			return err
		}
		if strings.Contains(c.Message, "not imported everywhere") {
			return fmt.Errorf("%s", c.Message)
		}
		return nil
	})
}

// TestRestartWritesNothing: an unchanged world costs no write, also right
// after mcs-syncer restarts and reconciles everything again: a watch of
// every object mcs-syncer writes, in every cluster, opened before the
// restart, sees nothing.
func TestRestartWritesNothing(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := "import-restart"
	bed.Namespace(ctx, t, ns)
	east, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "north")
	workloads.CreateApp(ctx, t, east, ns, 3, 80, true, nil)
	eventually(ctx, t, "north to import 3 endpoints", readyImported(ctx, north, ns, map[string]int{"east": 3}))
	eventually(ctx, t, "the export's status to settle", func() error {
		c, err := workloads.ExportCondition(ctx, east, ns, "web", mcsv1beta1.ServiceExportConditionConflict)
		if err != nil {
			return err
		}
		if c.Reason != "NoConflicts" {
			return fmt.Errorf("conflict %s", c.Reason)
		}
		return nil
	})
	quiet(ctx, t)
	if err := syncer.stop(); err != nil {
		t.Fatal(err)
	}
	writes := watchWrites(ctx, t)
	if err := syncer.restart(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the restarted mcs-syncer to reconcile every import and export", reconciledEverything(ctx, t))
	if w := writes.seen(); len(w) > 0 {
		t.Errorf("%d writes after the restart:\n%s", len(w), strings.Join(w, "\n"))
	}
}

// TestImportsAreRepaired: a person deleting the ServiceImport, an imported
// slice or the derived Service in a consumer gets it back.
func TestImportsAreRepaired(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := "import-repair"
	bed.Namespace(ctx, t, ns)
	east, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "north")
	workloads.CreateApp(ctx, t, east, ns, 2, 80, true, nil)
	imported := func() error {
		si, err := getImport(ctx, north, ns)
		if err != nil {
			return err
		}
		if len(si.Spec.IPs) != 1 {
			return fmt.Errorf("ips %v", si.Spec.IPs)
		}
		return readyImported(ctx, north, ns, map[string]int{"east": 2})()
	}
	eventually(ctx, t, "the import", imported)

	bySource, _ := importedSlices(ctx, north, ns)
	if err := north.Delete(ctx, &bySource["east"][0]); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the deleted slice to be replaced", imported)

	derived := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: imports.DerivedServiceName(types.NamespacedName{Namespace: ns, Name: "web"})}}
	if err := north.Delete(ctx, derived); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the derived Service to be recreated and its IP imported", func() error {
		svc := &corev1.Service{}
		if err := north.Get(ctx, client.ObjectKeyFromObject(derived), svc); err != nil {
			return err
		}
		si, err := getImport(ctx, north, ns)
		if err != nil {
			return err
		}
		if !slices.Equal(si.Spec.IPs, svc.Spec.ClusterIPs) {
			return fmt.Errorf("ips %v, derived Service has %v", si.Spec.IPs, svc.Spec.ClusterIPs)
		}
		return nil
	})

	si, _ := getImport(ctx, north, ns)
	if err := north.Delete(ctx, si); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the ServiceImport to be recreated", func() error {
		again, err := getImport(ctx, north, ns)
		if err != nil {
			return err
		}
		if again.UID == si.UID {
			return fmt.Errorf("still the deleted one")
		}
		return imported()
	})
}

// TestMissingNamespaceIsNotCreated: a consumer without the namespace gets
// no ServiceImport (and the namespace is not created); once the namespace
// exists, the import appears.
func TestMissingNamespaceIsNotCreated(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := "import-nsmissing"
	east, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "north")
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if err := east.Create(ctx, nsObj.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = east.Delete(context.Background(), nsObj.DeepCopy())
		_ = north.Delete(context.Background(), nsObj.DeepCopy())
	})
	workloads.CreateApp(ctx, t, east, ns, 1, 80, true, nil)
	eventually(ctx, t, "north to count the missing namespace", func() error {
		v, err := syncer.metric(ctx, `mcs_syncer_import_namespace_missing_total{consumer_cluster="north"}`)
		if err != nil {
			return err
		}
		if v < 1 {
			return fmt.Errorf("%v", v)
		}
		return nil
	})
	if err := north.Get(ctx, types.NamespacedName{Name: ns}, &corev1.Namespace{}); err == nil {
		t.Fatal("mcs-syncer created the namespace")
	}
	if err := north.Create(ctx, nsObj.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "the import once the namespace exists", func() error {
		_, err := getImport(ctx, north, ns)
		return err
	})
}

// TestStoppedExportIsRemoved: when one of two exporters deletes its
// ServiceExport, its slices leave the consumers and the ServiceImport lists
// only the other cluster.
func TestStoppedExportIsRemoved(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := "import-stopped"
	bed.Namespace(ctx, t, ns)
	east, west, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "west"), bed.ClientOf(t, "north")
	workloads.CreateApp(ctx, t, east, ns, 1, 80, true, nil)
	workloads.CreateApp(ctx, t, west, ns, 1, 80, true, nil)
	eventually(ctx, t, "slices from both", readyImported(ctx, north, ns, map[string]int{"east": 1, "west": 1}))
	if err := east.Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "east's slices gone and the import from west only", func() error {
		bySource, err := importedSlices(ctx, north, ns)
		if err != nil {
			return err
		}
		if len(bySource["east"]) != 0 || countReady(bySource["west"]) != 1 {
			return fmt.Errorf("slices from east %d, ready from west %d", len(bySource["east"]), countReady(bySource["west"]))
		}
		si, err := getImport(ctx, north, ns)
		if err != nil {
			return err
		}
		if len(si.Status.Clusters) != 1 || si.Status.Clusters[0].Cluster != "west" {
			return fmt.Errorf("status.clusters %v", si.Status.Clusters)
		}
		return nil
	})
}
