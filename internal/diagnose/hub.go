package diagnose

import (
	"context"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mcs-syncer/mcs-syncer/api/v1alpha1"
	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
	"github.com/mcs-syncer/mcs-syncer/internal/publish"
)

// Hub is the hub of hub mode, as the checks reach it.
type Hub struct {
	Client client.Client
	// Namespace is the publications' namespace.
	Namespace string
	// Members are the clusterset's members' IDs: each publishes with the
	// hub identity ServiceAccount <Namespace>/member-<ID>.
	Members []string
}

// The hub's admission policy and its binding (config/hub/admission.yaml).
const (
	admissionPolicy  = "mcs-syncer-publish-as-yourself"
	admissionBinding = "mcs-syncer-publish-as-yourself"
)

// applyHub is what to do about a hub that lacks what config/hub holds.
const applyHub = "kubectl apply -k config/hub, and a member identity per member (docs/user-guide.md, hub mode)"

// memberUser is the hub identity of member id.
func (h *Hub) memberUser(id string) string {
	return "system:serviceaccount:" + h.Namespace + ":member-" + id
}

// RunHub checks the hub: that its admission policy keeps each member from
// publishing as another, and that each member's identity may do with
// publications what RBAC should allow, and no more.
func RunHub(ctx context.Context, hub *Hub) []Check {
	self, err := whoAmI(ctx, hub.Client)
	if err != nil {
		return []Check{{Name: "hub reachable", Result: Fail, Detail: err.Error(), Fix: unreadable}}
	}
	checks := []Check{admission(ctx, hub, self)}
	for _, id := range hub.Members {
		checks = append(checks, memberAccess(ctx, hub, id, self))
	}
	return checks
}

// whoAmI returns the user the hub's client is (a SelfSubjectReview).
func whoAmI(ctx context.Context, c client.Client) (string, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return "", fmt.Errorf("who am I in the hub (SelfSubjectReview): %w", err)
	}
	return review.Status.UserInfo.Username, nil
}

// admission checks the hub's admission policy. As a member's identity,
// by what the hub does: a publication as another cluster, sent as a dry
// run, must be refused. As another identity (an administrator, exempt
// from the policy), by reading the policy and its binding.
func admission(ctx context.Context, hub *Hub, self string) Check {
	c := Check{Name: "hub admission: members publish only as themselves"}
	if id, ok := strings.CutPrefix(self, "system:serviceaccount:"+hub.Namespace+":member-"); ok {
		other := "mcs-diagnose-other"
		if id == other {
			other += "-2"
		}
		p := publish.Marker(clusterset.ClusterID(other), hub.Namespace, 0)
		err := hub.Client.Create(ctx, p, client.DryRunAll)
		switch {
		case err == nil:
			c.Result, c.Detail, c.Fix = Fail, fmt.Sprintf("member %s may publish as cluster %s (a dry run was accepted): the admission policy %s is missing or not bound", id, other, admissionPolicy), applyHub
		case apierrors.IsForbidden(err) && strings.Contains(err.Error(), admissionPolicy):
			c.Result, c.Detail = Pass, fmt.Sprintf("member %s's publication as cluster %s is refused by %s", id, other, admissionPolicy)
		default:
			c.Result, c.Detail, c.Fix = Fail, fmt.Sprintf("a dry run of member %s publishing as cluster %s: %v", id, other, err), applyHub
		}
		return c
	}
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	if err := hub.Client.Get(ctx, types.NamespacedName{Name: admissionPolicy}, policy); err != nil {
		c.Result, c.Detail, c.Fix = Fail, fmt.Sprintf("ValidatingAdmissionPolicy %s: %v", admissionPolicy, err), applyHub
		return c
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	if err := hub.Client.Get(ctx, types.NamespacedName{Name: admissionBinding}, binding); err != nil {
		c.Result, c.Detail, c.Fix = Fail, fmt.Sprintf("ValidatingAdmissionPolicyBinding %s: %v", admissionBinding, err), applyHub
		return c
	}
	if binding.Spec.PolicyName != admissionPolicy || !slices.Contains(binding.Spec.ValidationActions, admissionregistrationv1.Deny) {
		c.Result, c.Detail, c.Fix = Fail, fmt.Sprintf("binding %s binds %q with %v: want %s with Deny", admissionBinding, binding.Spec.PolicyName, binding.Spec.ValidationActions, admissionPolicy), applyHub
		return c
	}
	c.Result, c.Detail = Pass, fmt.Sprintf("%s present and bound with Deny (read as %s)", admissionPolicy, self)
	return c
}

// access is one request a member's hub identity must (or must not) be
// allowed.
type access struct {
	verb, group, resource, namespace string
	allowed                          bool
}

// memberAccesses are what RBAC should allow a member's hub identity
// (config/hub/role.yaml): every verb a publisher and a reader use on
// publications in their namespace, and, as samples of what it must not do,
// reading them elsewhere, Secrets, and granting itself more.
func (h *Hub) memberAccesses() []access {
	group := v1alpha1.GroupVersion.Group
	var out []access
	for _, verb := range []string{"get", "list", "watch", "create", "update", "delete"} {
		out = append(out, access{verb, group, "publishedexports", h.Namespace, true})
	}
	return append(out,
		access{"list", group, "publishedexports", "", false},
		access{"get", "", "secrets", h.Namespace, false},
		access{"create", "rbac.authorization.k8s.io", "rolebindings", h.Namespace, false},
	)
}

// memberAccess checks what member id's hub identity may do: through a
// SubjectAccessReview when self may create those, through a
// SelfSubjectAccessReview when self is that identity; else skipped.
func memberAccess(ctx context.Context, hub *Hub, id, self string) Check {
	user := hub.memberUser(id)
	c := Check{Name: "hub identity allowed what RBAC should allow", Member: id}
	var wrong []string
	for _, a := range hub.memberAccesses() {
		attrs := &authorizationv1.ResourceAttributes{Verb: a.verb, Group: a.group, Resource: a.resource, Namespace: a.namespace}
		var allowed bool
		if self == user {
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attrs}}
			if err := hub.Client.Create(ctx, review); err != nil {
				c.Result, c.Detail, c.Fix = Fail, fmt.Sprintf("SelfSubjectAccessReview: %v", err), unreadable
				return c
			}
			allowed = review.Status.Allowed
		} else {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + hub.Namespace, "system:authenticated"}, ResourceAttributes: attrs}}
			if err := hub.Client.Create(ctx, review); err != nil {
				if apierrors.IsForbidden(err) {
					c.Result, c.Detail = Skip, fmt.Sprintf("%s may not create SubjectAccessReviews in the hub: give --hub-kubeconfig of a hub administrator to check %s", self, user)
					return c
				}
				c.Result, c.Detail, c.Fix = Fail, fmt.Sprintf("SubjectAccessReview: %v", err), unreadable
				return c
			}
			allowed = review.Status.Allowed
		}
		if allowed != a.allowed {
			wrong = append(wrong, describe(a, allowed))
		}
	}
	if len(wrong) > 0 {
		c.Result, c.Detail = Fail, user+": "+strings.Join(wrong, "; ")
		c.Fix = "bind " + user + " to Role mcs-syncer-member only (config/hub/member-binding.yaml), and nothing else"
		return c
	}
	c.Result, c.Detail = Pass, fmt.Sprintf("%s may read and write publications in %s, and not read Secrets, publications elsewhere or grant itself more", user, hub.Namespace)
	return c
}

// describe says what is wrong with access a: allowed when it must not
// be, or the other way round.
func describe(a access, allowed bool) string {
	what := a.verb + " " + a.resource
	if a.group != "" {
		what += "." + a.group
	}
	if a.namespace != "" {
		what += " in " + a.namespace
	} else {
		what += " in every namespace"
	}
	if allowed {
		return "may " + what + ", and must not"
	}
	return "may not " + what
}
