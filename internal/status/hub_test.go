package status

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/publish"
	"github.com/mcs-syncer/mcs-syncer/pkg/reconciler"
)

// exportOf is cluster's export of web with n endpoints 10.<i>.0.x.
func exportOf(cluster string, i, n int) *clusterset.ExportedService {
	g := reconciler.EndpointGroup{AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80), Protocol: ptr.To(corev1.ProtocolTCP)}}}
	for j := range n {
		g.Endpoints = append(g.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.0.%d", i, j+1)}})
	}
	return &clusterset.ExportedService{Cluster: clusterset.ClusterID(cluster), Key: web,
		Spec:      clusterset.ExportedSpec{Type: "ClusterSetIP", Ports: []mcsv1beta1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
		Endpoints: []reconciler.EndpointGroup{g}}
}

// importedSlice is web's slice in a consumer imported from source with
// n endpoints 10.<i>.0.x.
func importedSlice(source string, i, n int) *discoveryv1.EndpointSlice {
	var ips []string
	for j := range n {
		ips = append(ips, fmt.Sprintf("10.%d.0.%d", i, j+1))
	}
	return slice("web-"+source, source, ips...)
}

// TestGatherReadsThroughTheHub: members without a client of their own are
// read through their publications in the hub, as the importers read them:
// a head in one object and a head in parts both count, each endpoint
// once; a consumer that holds them all is converged, one that lacks an
// endpoint is not; a refused publication is named; a hub that cannot be
// read makes those members unread.
func TestGatherReadsThroughTheHub(t *testing.T) {
	const ns = "mcs-system"
	whole := publish.Encode(exportOf("sim-1", 1, 2), ns)
	head, parts := publish.EncodeParts(exportOf("sim-2", 2, 250), ns, 100)
	bad := publish.Encode(exportOf("sim-3", 3, 1), ns)
	bad.Spec.Ports[0].Port = 0
	objs := []client.Object{whole, head, bad, publish.Marker("sim-1", ns, 0)}
	for _, p := range parts {
		objs = append(objs, p)
	}
	scheme := testScheme(t)
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	hub := &Hub{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build(), Namespace: ns}
	members := []Member{
		{ID: "sim-1"}, {ID: "sim-2"}, {ID: "sim-3"},
		member(t, "north", serviceImport("sim-1", "sim-2"), importedSlice("sim-1", 1, 2), importedSlice("sim-2", 2, 250)),
		member(t, "south", serviceImport("sim-1", "sim-2"), importedSlice("sim-1", 1, 2), importedSlice("sim-2", 2, 249)),
	}
	r := Gather(t.Context(), Input{Members: members, Hub: hub})
	if len(parts) < 3 || len(r.Services) != 1 || strings.Join(r.Services[0].ExportedBy, ",") != "sim-1,sim-2" || len(r.Services[0].Imports) != 2 {
		t.Fatalf("%d parts; services %+v", len(parts), r.Services)
	}
	for i, want := range []string{"[{Source:sim-1 Imported:2 Exported:2 Unimportable:0} {Source:sim-2 Imported:250 Exported:250 Unimportable:0}]", "[{Source:sim-1 Imported:2 Exported:2 Unimportable:0} {Source:sim-2 Imported:249 Exported:250 Unimportable:0}]"} {
		if got := fmt.Sprintf("%+v", r.Services[0].Imports[i].Endpoints); got != want {
			t.Errorf("%s: %s, want %s", r.Services[0].Imports[i].Consumer, got, want)
		}
	}
	if m := r.Members[1]; !m.Read || !m.ThroughHub || m.ServiceExports != 1 {
		t.Errorf("sim-2: %+v", m)
	}
	if len(r.Problems) != 2 || !strings.Contains(r.Problems[0], "publication sim-3.demo.web in the hub is refused") ||
		!strings.Contains(r.Problems[1], "south holds 249 endpoints imported from sim-2, which exports 250") {
		t.Errorf("problems %q", r.Problems)
	}

	broken := &Hub{Client: fake.NewClientBuilder().WithScheme(testScheme(t)).Build(), Namespace: ns} // knows no PublishedExport
	r = Gather(t.Context(), Input{Members: members[:1], Hub: broken})
	if m := r.Members[0]; m.Read || !strings.Contains(m.Error, "the hub cannot be read") || r.Converged() {
		t.Errorf("hub unreadable: %+v, problems %q", m, r.Problems)
	}
}
