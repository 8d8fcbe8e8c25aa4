package clusterset

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

var t0 = time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)

// export returns east's-style export of ns/web created at t0+age minutes,
// ClusterSetIP with port http tcp/80.
func export(cluster string, age int) *ExportedService {
	return &ExportedService{
		Cluster:       ClusterID(cluster),
		Key:           types.NamespacedName{Namespace: "ns", Name: "web"},
		ExportCreated: metav1.NewTime(t0.Add(time.Duration(age) * time.Minute)),
		Spec: ExportedSpec{
			Type:       mcsv1beta1.ClusterSetIP,
			Ports:      []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
		},
	}
}

func TestMergeConflicts(t *testing.T) {
	for _, tc := range []struct {
		name       string
		change     func(*ExportedSpec)
		wantReason string
		wantInMsg  string
	}{
		{"no conflict", func(*ExportedSpec) {}, "", ""},
		{"port", func(s *ExportedSpec) { s.Ports[0].Port = 81 }, "PortConflict", `west has "http" tcp/81, east has "http" tcp/80`},
		{"port protocol", func(s *ExportedSpec) { s.Ports[0].Protocol = corev1.ProtocolUDP }, "PortConflict", "udp/80"},
		{"port appProtocol", func(s *ExportedSpec) { s.Ports[0].AppProtocol = ptr.To("h2c") }, "PortConflict", "appProtocol h2c"},
		{"type", func(s *ExportedSpec) { s.Type = mcsv1beta1.Headless }, "TypeConflict", "type differs from east (oldest export): west has Headless vs ClusterSetIP"},
		{"session affinity", func(s *ExportedSpec) { s.SessionAffinity = corev1.ServiceAffinityClientIP }, "SessionAffinityConflict", "west has ClientIP vs None"},
		{"session affinity config", func(s *ExportedSpec) {
			s.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
		}, "SessionAffinityConfigConflict", "timeoutSeconds=60"},
		{"labels", func(s *ExportedSpec) { s.Labels = map[string]string{"tier": "web"} }, "LabelsConflict", "exportedLabels differs"},
		{"annotations", func(s *ExportedSpec) { s.Annotations = map[string]string{"a": "b"} }, "AnnotationsConflict", "exportedAnnotations differs"},
		{"internal traffic policy", func(s *ExportedSpec) { s.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal) }, "InternalTrafficPolicyConflict", "west has Local vs Cluster"},
		{"traffic distribution", func(s *ExportedSpec) { s.TrafficDistribution = ptr.To("PreferClose") }, "TrafficDistributionConflict", "west has PreferClose vs <unset>"},
		{"ip families", func(s *ExportedSpec) { s.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol} }, "IPFamilyConflict", "[IPv6] vs [IPv4]"},
		{"several, in the standard's order", func(s *ExportedSpec) {
			s.IPFamilies = nil
			s.Type = mcsv1beta1.Headless
			s.Ports[0].Port = 8080
		}, "PortConflict,TypeConflict,IPFamilyConflict", "ports differ"},
		{"defaults equal unset values", func(s *ExportedSpec) {
			s.SessionAffinity = corev1.ServiceAffinityNone
			s.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
		}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			east, west := export("east", 0), export("west", 5)
			tc.change(&west.Spec)
			m := Merge([]*ExportedService{west, east})
			if m.Oldest != "east" || !slices.Equal(m.Clusters, []ClusterID{"east", "west"}) {
				t.Errorf("oldest %s, clusters %v", m.Oldest, m.Clusters)
			}
			if tc.wantReason == "" {
				if m.Conflict != nil {
					t.Errorf("conflict %+v, want none", m.Conflict)
				}
				return
			}
			if m.Conflict == nil {
				t.Fatalf("no conflict, want %s", tc.wantReason)
			}
			if m.Conflict.Reason() != tc.wantReason || !strings.Contains(m.Conflict.Message, tc.wantInMsg) {
				t.Errorf("conflict %q: %q, want %q containing %q", m.Conflict.Reason(), m.Conflict.Message, tc.wantReason, tc.wantInMsg)
			}
			// The oldest export's definitions win.
			if m.Spec.Type != east.Spec.Type || m.Spec.Ports[0] != east.Spec.Ports[0] || !slices.Equal(m.Spec.IPFamilies, east.Spec.IPFamilies) {
				t.Errorf("merged spec %+v does not take east's (oldest) definitions", m.Spec)
			}
		})
	}
}

// TestMergePortsUnion: ports merge by name; each name's oldest definition
// wins.
func TestMergePortsUnion(t *testing.T) {
	east, west, north := export("east", 0), export("west", 1), export("north", 2)
	west.Spec.Ports = append(west.Spec.Ports, mcsv1beta1.ServicePort{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9090})
	north.Spec.Ports = []mcsv1beta1.ServicePort{{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9191}, {Name: "grpc", Protocol: corev1.ProtocolTCP, Port: 50051}}
	m := Merge([]*ExportedService{north, west, east})
	var got []string
	for _, p := range m.Spec.Ports {
		got = append(got, showPort(p))
	}
	want := []string{`"http" tcp/80`, `"metrics" tcp/9090`, `"grpc" tcp/50051`}
	if !slices.Equal(got, want) {
		t.Errorf("ports %v, want %v", got, want)
	}
	if m.Conflict == nil || m.Conflict.Reason() != "PortConflict" ||
		!strings.Contains(m.Conflict.Message, `north has "metrics" tcp/9191, west has "metrics" tcp/9090: the endpoints of north are left out of port "metrics"`) {
		t.Errorf("conflict %+v", m.Conflict)
	}
	// KEP-1645: "network traffic to a conflicting port should only be
	// directed to endpoints from constituent services that actually expose
	// the port."
	for _, tc := range []struct {
		es   *ExportedService
		want []string
	}{
		{east, []string{"http"}},
		{west, []string{"http", "metrics"}},
		{north, []string{"grpc"}},
	} {
		if got := slices.Sorted(maps.Keys(m.ExposedPorts(tc.es))); !slices.Equal(got, tc.want) {
			t.Errorf("%s exposes %v of the import's ports, want %v", tc.es.Cluster, got, tc.want)
		}
	}
	// appProtocol and protocol count: a port that differs only there is
	// not exposed.
	west.Spec.Ports[0].AppProtocol = ptr.To("h2c")
	if got := Merge([]*ExportedService{east, west}).ExposedPorts(west); got["http"] {
		t.Errorf("west's http with another appProtocol counts as exposed: %v", got)
	}
}

// TestMergeTiesGoToLowestClusterID: exports of the same age: the lowest
// cluster ID wins.
func TestMergeTiesGoToLowestClusterID(t *testing.T) {
	b, a := export("b-cluster", 0), export("a-cluster", 0)
	b.Spec.Type = mcsv1beta1.Headless
	m := Merge([]*ExportedService{b, a})
	if m.Oldest != "a-cluster" || m.Spec.Type != mcsv1beta1.ClusterSetIP {
		t.Errorf("oldest %s type %s, want a-cluster's ClusterSetIP", m.Oldest, m.Spec.Type)
	}
}

// TestMergeIsOrderIndependent: any order of the same exports merges the
// same.
func TestMergeIsOrderIndependent(t *testing.T) {
	var exports []*ExportedService
	for i, c := range []string{"east", "west", "north", "south", "central"} {
		e := export(c, (i*7)%5)
		e.Spec.Ports[0].Port = int32(80 + i)
		e.Spec.SessionAffinity = []corev1.ServiceAffinity{"", corev1.ServiceAffinityClientIP}[i%2]
		e.Spec.Labels = map[string]string{"v": c}
		exports = append(exports, e)
	}
	want := Merge(exports)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		shuffled := slices.Clone(exports)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		got := Merge(shuffled)
		if got.Oldest != want.Oldest || got.Conflict.Message != want.Conflict.Message || !slices.Equal(got.Spec.Ports, want.Spec.Ports) {
			t.Fatalf("merge depends on order:\n%+v\nvs\n%+v", got, want)
		}
	}
}

func TestMergeOfNothing(t *testing.T) {
	if m := Merge(nil); m.Conflict != nil || len(m.Clusters) != 0 {
		t.Errorf("Merge(nil) = %+v", m)
	}
}

// TestMergePortSetsNotIdentical: mcs-api v1beta1's PortConflict applies "if
// the ports are not identical in all the constituent Services": a port one
// export lacks is a conflict too, while the import still gets the union.
func TestMergePortSetsNotIdentical(t *testing.T) {
	east, west := export("east", 0), export("west", 1)
	east.Spec.Ports = []mcsv1beta1.ServicePort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 42}, {Name: "udp", Protocol: corev1.ProtocolUDP, Port: 42}}
	west.Spec.Ports = []mcsv1beta1.ServicePort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 42}, {Name: "stcp", Protocol: corev1.ProtocolSCTP, Port: 142}}
	m := Merge([]*ExportedService{west, east})
	var got []string
	for _, p := range m.Spec.Ports {
		got = append(got, showPort(p))
	}
	if want := []string{`"tcp" tcp/42`, `"udp" udp/42`, `"stcp" sctp/142`}; !slices.Equal(got, want) {
		t.Errorf("ports %v, want the union %v", got, want)
	}
	if m.Conflict == nil || m.Conflict.Reason() != "PortConflict" {
		t.Fatalf("conflict %+v, want PortConflict", m.Conflict)
	}
	for _, part := range []string{`"udp" udp/42 from east is missing in west`, `"stcp" sctp/142 from west is missing in east`} {
		if !strings.Contains(m.Conflict.Message, part) {
			t.Errorf("message %q does not say %q", m.Conflict.Message, part)
		}
	}

	// The same set in another order is identical.
	west.Spec.Ports = slices.Clone(east.Spec.Ports)
	slices.Reverse(west.Spec.Ports)
	if m := Merge([]*ExportedService{west, east}); m.Conflict != nil {
		t.Errorf("same ports in another order: conflict %+v", m.Conflict)
	}
}
