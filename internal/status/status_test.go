package status

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/membership"
)

var web = types.NamespacedName{Namespace: "demo", Name: "web"}

func testScheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(s), mcsv1beta1.Install(s)); err != nil {
		t.Fatal(err)
	}
	return s
}

func export(ready metav1.ConditionStatus, conflict string) *mcsv1beta1.ServiceExport {
	se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: web.Namespace, Name: web.Name}}
	se.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: ready, Reason: "Exported", Message: "ok"}}
	if conflict != "" {
		se.Status.Conditions = append(se.Status.Conditions, metav1.Condition{Type: "Conflict", Status: metav1.ConditionTrue, Reason: "PortConflict", Message: conflict})
	}
	return se
}

func serviceImport(clusters ...string) *mcsv1beta1.ServiceImport {
	si := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: web.Namespace, Name: web.Name},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{"10.96.0.10"}}}
	for _, c := range clusters {
		si.Status.Clusters = append(si.Status.Clusters, mcsv1beta1.ClusterStatus{Cluster: c})
	}
	si.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"}}
	return si
}

// slice is a slice of web with ips: its own (source "") or imported from
// source.
func slice(name, source string, ips ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: web.Namespace, Name: name,
		Labels: map[string]string{discoveryv1.LabelServiceName: web.Name}}, AddressType: discoveryv1.AddressTypeIPv4}
	if source != "" {
		s.Labels = map[string]string{mcsv1beta1.LabelServiceName: web.Name, mcsv1beta1.LabelSourceCluster: source,
			discoveryv1.LabelServiceName: "derived-web"}
	}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}})
	}
	return s
}

func member(t *testing.T, id string, objs ...client.Object) Member {
	return Member{ID: id, Client: fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).Build()}
}

// converged is east exporting web (two endpoints) into itself and north.
func converged(t *testing.T) []client.Object {
	return []client.Object{export(metav1.ConditionTrue, ""), slice("web-own", "", "10.1.0.1", "10.1.0.2"), serviceImport("east"), slice("web-east", "east", "10.1.0.1", "10.1.0.2")}
}

func TestGather(t *testing.T) {
	for _, tc := range []struct {
		name     string
		members  func(t *testing.T) []Member
		only     *types.NamespacedName
		problems []string // each a part of one problem, in order
	}{
		{name: "converged", members: func(t *testing.T) []Member {
			return []Member{member(t, "east", converged(t)...), member(t, "north", serviceImport("east"), slice("web-east", "east", "10.1.0.1", "10.1.0.2"))}
		}},
		{name: "an endpoint not imported yet, and a member without the import", members: func(t *testing.T) []Member {
			return []Member{member(t, "east", converged(t)...), member(t, "north", serviceImport("east"), slice("web-east", "east", "10.1.0.1")), member(t, "west")}
		}, problems: []string{"north holds 1 endpoints imported from east, which exports 2", "demo/web: not imported into west"}},
		{name: "an export not Ready and in conflict; status.clusters behind", members: func(t *testing.T) []Member {
			return []Member{member(t, "east", export(metav1.ConditionFalse, "port http differs"), slice("web-own", "", "10.1.0.1"), serviceImport(), slice("web-east", "east", "10.1.0.1"))}
		}, problems: []string{"the export of east is not Ready", "imported into east from []; exported by [east]"}},
		{name: "an import nobody exports", members: func(t *testing.T) []Member {
			return []Member{member(t, "north", serviceImport("east"))}
		}, problems: []string{"imported into north, but no member exports it"}},
		{name: "one Service asked for, exported by none", members: func(t *testing.T) []Member {
			return []Member{member(t, "east", converged(t)...), member(t, "north")}
		}, only: &types.NamespacedName{Namespace: "demo", Name: "wbe"}, problems: []string{"demo/wbe is exported by no member and imported by none"}},
		{name: "one Service asked for, found", members: func(t *testing.T) []Member {
			return []Member{member(t, "east", converged(t)...), member(t, "north", serviceImport("east"), slice("web-east", "east", "10.1.0.1", "10.1.0.2"))}
		}, only: &web},
		{name: "a member that cannot be read; one read through the hub is left out", members: func(t *testing.T) []Member {
			broken := fake.NewClientBuilder().WithScheme(testScheme(t)).WithInterceptorFuncs(interceptor.Funcs{
				List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
					return errors.New("connection refused")
				}}).Build()
			return []Member{member(t, "east", converged(t)...), {ID: "west", Client: broken}, {ID: "south"}}
		}, problems: []string{"member west cannot be read: connection refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Gather(t.Context(), Input{Members: tc.members(t), Only: tc.only})
			if len(r.Problems) != len(tc.problems) {
				t.Fatalf("problems %q, want %d:\n%s", r.Problems, len(tc.problems), r.Text(false))
			}
			for i, want := range tc.problems {
				if !strings.Contains(r.Problems[i], want) {
					t.Errorf("problem %d is %q, want it to say %q", i, r.Problems[i], want)
				}
			}
			if r.Converged() != (len(tc.problems) == 0) {
				t.Errorf("converged %v with problems %v", r.Converged(), r.Problems)
			}
		})
	}
}

func TestGatherReportsTheCounts(t *testing.T) {
	r := Gather(t.Context(), Input{Members: []Member{
		member(t, "east", converged(t)...),
		member(t, "north", serviceImport("east"), slice("web-east", "east", "10.1.0.1", "10.1.0.2")),
		{ID: "south"},
	}, Only: &web})
	if len(r.Services) != 1 || len(r.Services[0].Imports) != 2 {
		t.Fatalf("services %+v", r.Services)
	}
	north := r.Services[0].Imports[1]
	if got := fmt.Sprintf("%s %v %v %+v", north.Consumer, north.Imported, north.IPs, north.Endpoints); got != "north true [10.96.0.10] [{Source:east Imported:2 Exported:2 Unimportable:0}]" {
		t.Errorf("north's import: %s", got)
	}
	if r.Members[2].Read || !strings.Contains(r.Members[2].Error, "through the hub") {
		t.Errorf("south: %+v", r.Members[2])
	}
	text := r.Text(false)
	for _, want := range []string{"demo/web", "east 2/2", "converged: every import"} {
		if !strings.Contains(text, want) {
			t.Errorf("the text lacks %q:\n%s", want, text)
		}
	}
	if other := Gather(t.Context(), Input{Members: []Member{member(t, "east", converged(t)...)}, Only: &types.NamespacedName{Namespace: "demo", Name: "api"}}); len(other.Services) != 0 {
		t.Errorf("limited to demo/api: %+v", other.Services)
	}
}

// TestGatherKeepsEachMemberItsOwn: members read at once (more than
// parallelReads) are reported in their order, each with what it holds.
func TestGatherKeepsEachMemberItsOwn(t *testing.T) {
	var members []Member
	for i := range 2*parallelReads + 3 {
		var objs []client.Object
		for j := range i % 4 {
			objs = append(objs, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: fmt.Sprintf("svc-%d", j)}})
		}
		members = append(members, member(t, fmt.Sprintf("m%02d", i), objs...))
	}
	r := Gather(t.Context(), Input{Members: members})
	for i, m := range r.Members {
		if m.ID != fmt.Sprintf("m%02d", i) || m.ServiceExports != i%4 {
			t.Errorf("member %d reported as %s with %d ServiceExports, want m%02d with %d", i, m.ID, m.ServiceExports, i, i%4)
		}
	}
}

// TestUnimportableEndpointsAreNotMissing: an endpoint that a consumer's
// API server would refuse (a loopback address) is left out of the import
// on purpose: it counts apart, and the import is converged without it.
func TestUnimportableEndpointsAreNotMissing(t *testing.T) {
	r := Gather(t.Context(), Input{Members: []Member{
		member(t, "east", export(metav1.ConditionTrue, ""), slice("web-own", "", "10.1.0.1", "127.0.0.1"), serviceImport("east"), slice("web-east", "east", "10.1.0.1")),
	}})
	if !r.Converged() || fmt.Sprintf("%+v", r.Services[0].Imports[0].Endpoints) != "[{Source:east Imported:1 Exported:1 Unimportable:1}]" {
		t.Errorf("problems %q, endpoints %+v", r.Problems, r.Services[0].Imports[0].Endpoints)
	}
	if text := r.Text(false); !strings.Contains(text, "east 1/1 (+1 unimportable)") {
		t.Errorf("text:\n%s", text)
	}
}

// TestGatherReadsEveryPage: slices listed in pages (as a real API server
// pages a large namespace) are all read.
func TestGatherReadsEveryPage(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(export(metav1.ConditionTrue, ""), serviceImport("east")).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			l, ok := list.(*discoveryv1.EndpointSliceList)
			if !ok {
				return c.List(ctx, list, opts...)
			}
			o := &client.ListOptions{}
			o.ApplyOptions(opts)
			if o.Limit != pageSize {
				return fmt.Errorf("asked for %d at once", o.Limit)
			}
			if o.Continue == "" {
				l.Items, l.Continue = []discoveryv1.EndpointSlice{*slice("web-own", "", "10.1.0.1", "10.1.0.2")}, "page-2"
				return nil
			}
			l.Items = []discoveryv1.EndpointSlice{*slice("web-east", "east", "10.1.0.1", "10.1.0.2")}
			return nil
		},
	}).Build()
	r := Gather(t.Context(), Input{Members: []Member{{ID: "east", Client: c}}})
	if !r.Converged() || fmt.Sprintf("%+v", r.Services[0].Imports[0].Endpoints) != "[{Source:east Imported:2 Exported:2 Unimportable:0}]" {
		t.Errorf("problems %q, services %+v", r.Problems, r.Services)
	}
}

// TestGatherHeedsItsDeadline: a member whose client does not heed ctx (a
// client's discovery, bounded only by its own timeout) holds the report no
// longer than ctx allows; it is reported as not read, the others as read,
// and what a syncer named by the caller sees of it (down) is reported.
func TestGatherHeedsItsDeadline(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	hung := fake.NewClientBuilder().WithScheme(testScheme(t)).WithInterceptorFuncs(interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			<-release // ignores ctx, as a discovery request does
			return errors.New("too late")
		}}).Build()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	done := make(chan Report, 1)
	// A syncer named by the caller that sees west down: read beside the
	// members, so its view counts even though west held the deadline.
	westDown := membership.MemberView{ID: "west", State: membership.Unreachable, Health: membership.HealthDown, HealthSince: time.Now()}
	named := Syncer{Name: "central", Read: func(ctx context.Context) (membership.View, error) {
		return membership.View{Leading: true, Now: time.Now(), Members: []membership.MemberView{westDown}}, ctx.Err()
	}}
	go func() {
		done <- Gather(ctx, Input{Members: []Member{member(t, "east", converged(t)...), {ID: "west", Client: hung}}, Syncers: []Syncer{named}})
	}()
	var r Report
	select {
	case r = <-done:
	case <-time.After(time.Minute):
		t.Fatal("Gather still waits for the hung member a minute after its deadline")
	}
	if len(r.Problems) == 0 || !strings.Contains(r.Problems[0], "member west cannot be read: no answer within the timeout") ||
		!slices.ContainsFunc(r.Problems, func(p string) bool { return strings.Contains(p, "member west is down since") }) {
		t.Errorf("problems %q", r.Problems)
	}
	if !r.Members[0].Read || r.Members[1].Read {
		t.Errorf("members %+v", r.Members)
	}
}
