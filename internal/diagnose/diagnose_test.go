package diagnose

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// healthy is a member as kind makes one, with mcs-syncer installed: the
// CRDs, CoreDNS with multicluster, a node's pod CIDR and a ServiceCIDR of
// its own (10.1xx), its Deployment ready.
type memberSpec struct {
	id          string
	octet       int
	corefile    string // "" : no ConfigMap
	coreDNSMay  bool
	versions    []string // of the MCS CRDs
	stored      []string // their status.storedVersions; nil: the first of versions
	image       string   // "" : no Deployment
	ready       int32
	clockOffset time.Duration
}

func healthy(id string, octet int) memberSpec {
	return memberSpec{id: id, octet: octet, corefile: ".:53 {\n    kubernetes cluster.local\n    multicluster clusterset.local\n}\n", coreDNSMay: true,
		versions: []string{"v1alpha1", "v1beta1"}, image: "mcs-syncer:v0.1.0", ready: 2}
}

func (s memberSpec) member(t *testing.T) Member {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	objs := []client.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: s.id + "-node"}, Spec: corev1.NodeSpec{PodCIDRs: []string{fmt.Sprintf("10.%d.0.0/24", s.octet)}}},
		&networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{fmt.Sprintf("10.%d.0.0/16", s.octet+100)}}},
	}
	for _, crd := range s.crds() {
		objs = append(objs, crd)
	}
	if s.corefile != "" {
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns"}, Data: map[string]string{"Corefile": s.corefile}})
	}
	if s.image != "" {
		objs = append(objs, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "mcs-system", Name: "mcs-syncer", Labels: map[string]string{"app.kubernetes.io/name": "mcs-syncer"}},
			Spec:   appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "mcs-syncer", Image: s.image}}}}},
			Status: appsv1.DeploymentStatus{ReadyReplicas: s.ready}})
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&appsv1.Deployment{}).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if sar, ok := obj.(*authorizationv1.SubjectAccessReview); ok {
				sar.Status.Allowed = s.coreDNSMay && sar.Spec.User == "system:serviceaccount:kube-system:coredns" && sar.Spec.ResourceAttributes.Resource == "serviceimports"
				return nil
			}
			return c.Create(ctx, obj, opts...)
		}}).Build()
	fd := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	for _, v := range s.versions {
		fd.Resources = append(fd.Resources, &metav1.APIResourceList{GroupVersion: mcsGroup + "/" + v,
			APIResources: []metav1.APIResource{{Name: "serviceexports"}, {Name: "serviceimports"}}})
	}
	return Member{ID: s.id, Client: c, Discovery: fd, ServerTime: func(context.Context) (time.Time, error) { return t0.Add(s.clockOffset), nil }}
}

// crds are the MCS CRDs as the member serves them: s.versions served,
// the last the storage version, s.stored stored; none without versions.
func (s memberSpec) crds() []*apiextensionsv1.CustomResourceDefinition {
	if len(s.versions) == 0 {
		return nil
	}
	stored := s.stored
	if stored == nil {
		stored = s.versions[:1]
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, plural := range []string{"serviceexports", "serviceimports"} {
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: plural + "." + mcsGroup},
			Spec:   apiextensionsv1.CustomResourceDefinitionSpec{Group: mcsGroup, Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural}},
			Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: stored}}
		for i, v := range s.versions {
			crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v, Served: true, Storage: i == len(s.versions)-1})
		}
		out = append(out, crd)
	}
	return out
}

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name  string
		specs func() []memberSpec
		fails []string // the failed checks: "name/member: part of the detail"
		skips []string // the skipped checks, likewise (nil: not asserted)
	}{
		{name: "healthy", specs: func() []memberSpec { return []memberSpec{healthy("east", 1), healthy("west", 2)} }},
		{name: "CoreDNS without multicluster, or not allowed to list ServiceImports", specs: func() []memberSpec {
			east, west := healthy("east", 1), healthy("west", 2)
			east.corefile = ".:53 {\n    kubernetes cluster.local\n}\n"
			west.coreDNSMay = false
			return []memberSpec{east, west}
		}, fails: []string{"CoreDNS answers clusterset.local/east: no multicluster plugin", "CoreDNS answers clusterset.local/west: may not list ServiceImports"}},
		{name: "overlapping pod CIDRs", specs: func() []memberSpec { return []memberSpec{healthy("east", 1), healthy("west", 1)} },
			fails: []string{"pod and service CIDRs do not overlap between members/: east's pod CIDR (node east-node) 10.1.0.0/24 and west's pod CIDR (node west-node) 10.1.0.0/24"}},
		{name: "one CRD version served, or none", specs: func() []memberSpec {
			east, west := healthy("east", 1), healthy("west", 2)
			east.versions = []string{"v1alpha1"} // mcs-api before v0.5.0: it does
			west.versions = nil
			return []memberSpec{east, west}
		}, fails: []string{"MCS CRDs/west: not served in any version mcs-syncer speaks (v1beta1, v1alpha1): serviceexports.multicluster.x-k8s.io"}},
		{name: "a stored version no longer served", specs: func() []memberSpec {
			east := healthy("east", 1)
			east.versions, east.stored = []string{"v1beta1"}, []string{"v1alpha1", "v1beta1"}
			return []memberSpec{east, healthy("west", 2)}
		}, fails: []string{"CRD stored versions/east: serviceexports.multicluster.x-k8s.io stores v1alpha1, no longer served; serviceimports.multicluster.x-k8s.io stores v1alpha1"}},
		{name: "a replica not ready, two versions", specs: func() []memberSpec {
			east, west := healthy("east", 1), healthy("west", 2)
			east.ready, west.image = 1, "mcs-syncer:v0.2.0"
			return []memberSpec{east, west}
		}, fails: []string{"mcs-syncer running and ready/east: 1 of 2 replicas ready", "one mcs-syncer version in the clusterset/: mcs-syncer:v0.1.0 in east; mcs-syncer:v0.2.0 in west"}},
		{name: "a clock behind", specs: func() []memberSpec {
			west := healthy("west", 2)
			west.clockOffset = -time.Minute
			return []memberSpec{healthy("east", 1), west}
		}, fails: []string{"members' clocks agree/: east's clock is 1m0s ahead of west's"}},
		{name: "neither kind's CoreDNS nor a Deployment of mcs-syncer: skipped", specs: func() []memberSpec {
			east := healthy("east", 1)
			east.corefile, east.image = "", ""
			return []memberSpec{east}
		}, skips: []string{"CoreDNS answers clusterset.local/east: no ConfigMap kube-system/coredns",
			"credentials not about to expire/east: no client config",
			"one mcs-syncer version in the clusterset/: no member runs mcs-syncer as a Deployment"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var members []Member
			for _, s := range tc.specs() {
				members = append(members, s.member(t))
			}
			checks := Run(t.Context(), members, func() time.Time { return t0 })
			var failed []string
			for _, c := range checks {
				if c.Result == Fail {
					failed = append(failed, c.Name+"/"+c.Member+": "+c.Detail)
					if c.Fix == "" {
						t.Errorf("%s/%s fails without saying what to do", c.Name, c.Member)
					}
				}
			}
			if len(failed) != len(tc.fails) {
				t.Fatalf("failed %q, want %d", failed, len(tc.fails))
			}
			for i, want := range tc.fails {
				name, part, _ := strings.Cut(want, ": ")
				if !strings.HasPrefix(failed[i], name+": ") || !strings.Contains(failed[i], part) {
					t.Errorf("failure %d: %q, want %q", i, failed[i], want)
				}
			}
			if Failed(checks) != (len(tc.fails) > 0) {
				t.Errorf("Failed %v", Failed(checks))
			}
			var skipped []string
			for _, c := range checks {
				if c.Result == Skip {
					skipped = append(skipped, c.Name+"/"+c.Member+": "+c.Detail)
				}
			}
			for _, want := range tc.skips {
				name, part, _ := strings.Cut(want, ": ")
				if !slices.ContainsFunc(skipped, func(s string) bool { return strings.HasPrefix(s, name+": ") && strings.Contains(s, part) }) {
					t.Errorf("%s not skipped; skipped: %q", want, skipped)
				}
			}
			if tc.skips != nil && len(skipped) != len(tc.skips) {
				t.Errorf("skipped %q, want %d", skipped, len(tc.skips))
			}
		})
	}
}

func TestClockErrorsFail(t *testing.T) {
	east := healthy("east", 1).member(t)
	east.ServerTime = func(context.Context) (time.Time, error) { return time.Time{}, errors.New("no Date header") }
	c := clocks(t.Context(), []Member{east}, func() time.Time { return t0 })
	if c.Result != Fail || !strings.Contains(c.Detail, "east: no Date header") || c.Fix == "" {
		t.Errorf("%+v", c)
	}
}

// TestAddressRangesToPaste: diagnose says each member's pod CIDRs and
// ServiceCIDRs as its clusterset config entry's addressRanges, and the
// line parses as the config reads it.
func TestAddressRangesToPaste(t *testing.T) {
	checks := Run(t.Context(), []Member{healthy("east", 1).member(t)}, func() time.Time { return t0 })
	i := slices.IndexFunc(checks, func(c Check) bool { return c.Name == "address ranges" && c.Member == "east" })
	if i < 0 {
		t.Fatalf("no address ranges check in %+v", checks)
	}
	line, _, _ := strings.Cut(checks[i].Detail, " (")
	if line != "addressRanges: [10.1.0.0/24, 10.101.0.0/16]" || checks[i].Result != Pass {
		t.Errorf("%s %q", checks[i].Result, checks[i].Detail)
	}
}

// TestServedWith: the multicluster plugin counts only in a server block
// whose zones cover clusterset.local (the root, local, clusterset.local
// itself), not in another block, a nested plugin block or a comment.
func TestServedWith(t *testing.T) {
	for _, tc := range []struct {
		name, corefile string
		want           bool
	}{
		{"kubeadm's root block", ".:53 {\n    errors\n    kubernetes cluster.local in-addr.arpa {\n       pods insecure\n    }\n    multicluster clusterset.local\n    forward . /etc/resolv.conf\n}\n", true},
		{"a block of its own", ".:53 {\n    kubernetes cluster.local\n}\nclusterset.local:53 {\n    multicluster clusterset.local\n}\n", true},
		{"dns:// and several keys", "dns://example.com:53 dns://clusterset.local:53 {\n    multicluster clusterset.local\n}\n", true},
		{"another zone's block", ".:53 {\n    kubernetes cluster.local\n}\nexample.com:53 {\n    multicluster clusterset.local\n}\n", false},
		{"a nested block", ".:53 {\n    hosts {\n        multicluster\n    }\n}\n", false},
		{"a comment", ".:53 {\n    # multicluster clusterset.local\n    kubernetes cluster.local\n}\n", false},
		{"none", ".:53 {\n    kubernetes cluster.local\n}\n", false},
	} {
		if got := servedWith(tc.corefile, "clusterset.local", "multicluster"); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
