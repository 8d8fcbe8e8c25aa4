package diagnose

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
)

// hubSpec is a hub as the fake serves it.
type hubSpec struct {
	user string // who the client is
	// policyDenies: a member's publication as another cluster is refused
	// by the admission policy.
	policyDenies bool
	objects      []client.Object
	// rbac says whether user may do attrs; canReview whether the client
	// may create SubjectAccessReviews.
	rbac      func(user string, attrs *authorizationv1.ResourceAttributes) bool
	canReview bool
}

// memberRBAC is config/hub's Role: publications in mcs-system, nothing
// else; extra grants more.
func memberRBAC(extra string) func(string, *authorizationv1.ResourceAttributes) bool {
	return func(user string, a *authorizationv1.ResourceAttributes) bool {
		if strings.HasSuffix(user, ":"+extra) && a.Resource == "secrets" {
			return true
		}
		return a.Resource == "publishedexports" && a.Namespace == "mcs-system"
	}
}

func fakeHub(t *testing.T, h hubSpec) *Hub {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(h.objects...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			switch o := obj.(type) {
			case *authenticationv1.SelfSubjectReview:
				o.Status.UserInfo.Username = h.user
				return nil
			case *authorizationv1.SelfSubjectAccessReview:
				o.Status.Allowed = h.rbac(h.user, o.Spec.ResourceAttributes)
				return nil
			case *authorizationv1.SubjectAccessReview:
				if !h.canReview {
					return apierrors.NewForbidden(schema.GroupResource{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}, "", nil)
				}
				o.Status.Allowed = h.rbac(o.Spec.User, o.Spec.ResourceAttributes)
				return nil
			case *v1alpha1.PublishedExport:
				if h.policyDenies {
					return apierrors.NewForbidden(schema.GroupResource{Group: "mcs-syncer.io", Resource: "publishedexports"}, o.Name,
						errorString("ValidatingAdmissionPolicy 'mcs-syncer-publish-as-yourself' with binding 'mcs-syncer-publish-as-yourself' denied request"))
				}
				return nil // a dry run: nothing is stored
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	return &Hub{Client: c, Namespace: "mcs-system", Members: []string{"east", "west"}}
}

type errorString string

func (e errorString) Error() string { return string(e) }

func resultsOf(checks []Check) string {
	var out []string
	for _, c := range checks {
		out = append(out, string(c.Result)+" "+c.Member)
	}
	return strings.Join(out, ", ")
}

// TestRunHub: as a member's identity, the admission policy is checked by
// a dry run of a publication as another cluster, and that identity's own
// access by SelfSubjectAccessReviews (the others' are skipped: it may not
// review them); as an administrator, the policy and its binding are read,
// and every member's access is reviewed, naming what is too much.
func TestRunHub(t *testing.T) {
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: admissionPolicy}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: admissionBinding},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: admissionPolicy, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
	const east = "system:serviceaccount:mcs-system:member-east"
	for _, tc := range []struct {
		name string
		hub  hubSpec
		want string
		// detail is in the first failed check's detail.
		detail string
	}{
		{"member, healthy", hubSpec{user: east, policyDenies: true, rbac: memberRBAC("")}, "pass , pass east, skip west", ""},
		{"member, no policy", hubSpec{user: east, rbac: memberRBAC("")}, "fail , pass east, skip west", "member east may publish as cluster mcs-diagnose-other"},
		{"member, may read Secrets", hubSpec{user: east, policyDenies: true, rbac: memberRBAC("member-east")}, "pass , fail east, skip west", "may get secrets in mcs-system, and must not"},
		{"administrator, healthy", hubSpec{user: "kubernetes-admin", objects: []client.Object{policy, binding}, rbac: memberRBAC(""), canReview: true}, "pass , pass east, pass west", ""},
		{"administrator, west may read Secrets", hubSpec{user: "kubernetes-admin", objects: []client.Object{policy, binding}, rbac: memberRBAC("member-west"), canReview: true}, "pass , pass east, fail west", "member-west: may get secrets in mcs-system, and must not"},
		{"administrator, no binding", hubSpec{user: "kubernetes-admin", objects: []client.Object{policy}, rbac: memberRBAC(""), canReview: true}, "fail , pass east, pass west", "ValidatingAdmissionPolicyBinding mcs-syncer-publish-as-yourself"},
		{"administrator, publications nowhere", hubSpec{user: "kubernetes-admin", objects: []client.Object{policy, binding}, rbac: func(string, *authorizationv1.ResourceAttributes) bool { return false }, canReview: true}, "pass , fail east, fail west", "may not get publishedexports.mcs-syncer.io in mcs-system"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checks := RunHub(t.Context(), fakeHub(t, tc.hub))
			if got := resultsOf(checks); got != tc.want {
				t.Fatalf("%s, want %s: %+v", got, tc.want, checks)
			}
			for _, c := range checks {
				if c.Result == Fail {
					if !strings.Contains(c.Detail, tc.detail) || c.Fix == "" {
						t.Errorf("%s: %q, want %q and a fix", c.Name, c.Detail, tc.detail)
					}
					break
				}
			}
		})
	}
}
