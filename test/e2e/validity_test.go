package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/publish"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
	"github.com/mcs-syncer/mcs-syncer/test/testbed"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/audit"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/workloads"
)

// specialAddresses are IPv4 addresses that a publication can hold but an
// EndpointSlice cannot (unspecified, loopback, link-local, link-local
// multicast).
var specialAddresses = []string{"0.0.0.0", "127.0.0.1", "169.254.169.254", "224.0.0.1"}

// TestSpecialAddressesLeftOut (hub mode): north's API server refuses each
// of specialAddresses in an EndpointSlice (what the import side's rules
// say it does). East's mcs-syncer is stopped; its hub identity publishes
// web with those four endpoints beside a valid one, and keeps east's
// marker (written before it stopped) renewed. North imports the valid endpoint, counts the other four
// (mcs_syncer_unimportable_endpoints), and then writes nothing more for
// 20 s (before: 1,862 ServiceImport writes and 1,971 events in 65 s, and
// the valid endpoint never imported).
func TestSpecialAddressesLeftOut(t *testing.T) {
	ns := "hub-special-addresses"
	ctx, procs := hubFailureTest(t, ns, 4*time.Minute)
	north := bed.ClientOf(t, "north")
	for _, a := range specialAddresses {
		s := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{GenerateName: "special-", Namespace: ns},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{a}}},
		}
		if err := north.Create(ctx, s); !apierrors.IsInvalid(err) {
			t.Errorf("north's API server took %s in an EndpointSlice (%v): the import side's rules say it refuses it", a, err)
		}
	}

	// East's marker must be there before east stops: keepRenewing renews
	// it, and a member that never wrote one counts for the grace only
	// (east once stopped within its first second, and north withdrew its
	// endpoints 20 s after importing them).
	hubEast := hubClient(t, "east")
	eventually(ctx, t, "east's marker in the hub", func() error {
		return hubEast.Get(ctx, types.NamespacedName{Namespace: testbed.HubNamespace, Name: "east"}, &v1alpha1.PublishedExport{})
	})
	if err := procs["east"].stop(); err != nil {
		t.Fatal(err)
	}
	keepRenewing(ctx, t, hubEast, "east")
	http := []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](80)}}
	group := reconciler.EndpointGroup{AddressType: discoveryv1.AddressTypeIPv4, Ports: http}
	for _, a := range append(specialAddresses, "10.100.9.7") {
		group.Endpoints = append(group.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	pub := publish.Encode(&clusterset.ExportedService{
		Cluster: "east", Key: types.NamespacedName{Namespace: ns, Name: "web"}, ExportCreated: metav1.Now(),
		Spec: clusterset.ExportedSpec{Type: mcsv1beta1.ClusterSetIP, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
		Endpoints: []reconciler.EndpointGroup{group},
	}, testbed.HubNamespace)
	if err := hubEast.Create(ctx, pub); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "north to import the valid endpoint alone", func() error {
		var list discoveryv1.EndpointSliceList
		if err := north.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{mcsv1beta1.LabelServiceName: "web"}); err != nil {
			return err
		}
		var got []string
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				got = append(got, e.Addresses...)
			}
		}
		if len(got) != 1 || got[0] != "10.100.9.7" {
			return fmt.Errorf("imported %v", got)
		}
		return nil
	})
	eventually(ctx, t, "north to count the four left out", func() error {
		v, err := procs["north"].metric(ctx, `mcs_syncer_unimportable_endpoints{consumer_cluster="north",source_cluster="east"}`)
		if err == nil && v != 4 {
			err = fmt.Errorf("unimportable_endpoints = %v", v)
		}
		return err
	})
	// Nothing more is written: no loop.
	from := time.Now()
	holds(ctx, t, "north to keep the valid endpoint", 20*time.Second, importedEndpoints(ctx, north, ns, "web", "east", 1))
	writes, err := audit.ListWrites([]string{bed.Cluster("north").AuditLogPath}, from, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var ours []string
	for _, w := range writes {
		if strings.Contains(w, " "+ns+"/") {
			ours = append(ours, w)
		}
	}
	if len(ours) > 0 {
		t.Errorf("mcs-syncer wrote %d times in %s in the 20 s after the import: %v", len(ours), ns, ours)
	}
}

// keepRenewing renews member's marker in the hub every second with hub (the
// member's identity), as its stopped mcs-syncer would, until ctx ends.
func keepRenewing(ctx context.Context, t *testing.T, hub client.Client, member string) {
	t.Helper()
	go func() {
		for {
			marker := &v1alpha1.PublishedExport{}
			if err := hub.Get(ctx, types.NamespacedName{Namespace: testbed.HubNamespace, Name: member}, marker); err == nil {
				now := metav1.NowMicro()
				marker.Spec.RenewTime = &now
				_ = hub.Update(ctx, marker)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
}

// TestServiceNamesOfEveryForm: a Service whose name begins with a digit
// (KEP-5311: Kubernetes 1.36 takes it) is exported from east in central,
// per-cluster (direct) and hub mode, a new one in each, the hub's the
// longest name there is (63 characters); each is imported into west and
// north, and a pod in north reaches east's pod at its clusterset IP and at
// <name>.<ns>.svc.clusterset.local (before: readers in hub and per-cluster
// mode refused the publication while east said Ready=True).
func TestServiceNamesOfEveryForm(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	exclusive(t)
	dp := newDataPlane(ctx, t, "digit-names")
	longest := "9" + strings.Repeat("w", 62)
	for _, mode := range []struct {
		name, service string
		start         func() []*syncerProcess
	}{
		{"central", "1web", func() []*syncerProcess {
			s, err := startSyncerWith(ctx, syncer.stateDir, "--clusterset-config", bed.ConfigPath)
			if err != nil {
				t.Fatal(err)
			}
			return []*syncerProcess{s}
		}},
		{"direct", "2web", func() []*syncerProcess { return startDirectMode(ctx, t) }},
		{"hub", longest, func() []*syncerProcess {
			t.Cleanup(func() { clearHub(t) })
			return startHubMode(ctx, t)
		}},
	} {
		procs := mode.start()
		serve(ctx, t, "east", dp.ns, mode.service, 1, true, nil, port("tcp", corev1.ProtocolTCP, 80))
		for _, consumer := range []string{"west", "north"} {
			eventually(ctx, t, mode.name+": "+consumer+" to import "+mode.service,
				importedEndpoints(ctx, bed.ClientOf(t, consumer), dp.ns, mode.service, "east", 1))
		}
		ip := importIP(ctx, t, dp.ns, mode.service)
		dp.reaches(ctx, t, "tcp", ip+":80", 5, "east")
		dp.reaches(ctx, t, "tcp", mode.service+"."+dp.ns+".svc.clusterset.local:80", 5, "east")
		c, err := workloads.ExportCondition(ctx, bed.ClientOf(t, "east"), dp.ns, mode.service, mcsv1beta1.ServiceExportConditionReady)
		if err != nil {
			t.Errorf("%s: %v", mode.name, err)
		} else if c.Status != metav1.ConditionTrue {
			t.Errorf("%s: east's export of %s says Ready %s/%s: %s", mode.name, mode.service, c.Status, c.Reason, c.Message)
		}
		stopAll(t, procs)
	}
}
