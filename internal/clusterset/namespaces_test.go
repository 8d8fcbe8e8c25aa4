package clusterset

import (
	"strings"
	"testing"
)

// TestNamespacePolicy: Kubernetes' own namespaces and mcs-syncer's are
// refused by default; an allow list limits what is exported and allows a
// default-denied namespace by name (not by pattern); a deny list refuses
// names and prefixes; mcs-syncer's own is refused whatever the lists say.
func TestNamespacePolicy(t *testing.T) {
	for _, tc := range []struct {
		name      string
		policy    NamespacePolicy
		namespace string
		want      string // a word of the refusal; "" for allowed
	}{
		{"an application namespace", NamespacePolicy{Own: "mcs-system"}, "demo", ""},
		{"kube-system", NamespacePolicy{Own: "mcs-system"}, "kube-system", "Kubernetes' own"},
		{"kube-public", NamespacePolicy{}, "kube-public", "Kubernetes' own"},
		{"kube-node-lease", NamespacePolicy{}, "kube-node-lease", "Kubernetes' own"},
		{"kube-prefixed, not Kubernetes' own", NamespacePolicy{}, "kube-flannel", ""},
		{"mcs-syncer's own", NamespacePolicy{Own: "mcs-system"}, "mcs-system", "mcs-syncer's own"},
		{"mcs-syncer's own, allowed by name", NamespacePolicy{Own: "mcs-system", Allow: []string{"mcs-system"}}, "mcs-system", "mcs-syncer's own"},
		{"kube-system allowed by name", NamespacePolicy{Allow: []string{"kube-system"}}, "kube-system", ""},
		{"kube-system not allowed by a pattern", NamespacePolicy{Allow: []string{"kube-*"}}, "kube-system", "Kubernetes' own"},
		{"outside the allow list", NamespacePolicy{Allow: []string{"team-*"}}, "demo", "not in the clusterset config's exportNamespaces.allow"},
		{"inside the allow list", NamespacePolicy{Allow: []string{"team-*"}}, "team-a", ""},
		{"denied by name", NamespacePolicy{Deny: []string{"secret"}}, "secret", "exportNamespaces.deny"},
		{"denied by prefix", NamespacePolicy{Deny: []string{"openshift-*"}}, "openshift-dns", "exportNamespaces.deny"},
		{"deny wins over allow", NamespacePolicy{Allow: []string{"team-*"}, Deny: []string{"team-x"}}, "team-x", "exportNamespaces.deny"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.policy.Refuses(tc.namespace)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("Refuses(%q) = %q, want %q", tc.namespace, got, tc.want)
			}
		})
	}
}

func TestCheckNamespacePatterns(t *testing.T) {
	if err := CheckNamespacePatterns("allow", []string{"demo", "team-*", "kube-system", "a*", "*"}); err != nil {
		t.Errorf("valid patterns refused: %v", err)
	}
	for _, bad := range []string{"Demo", "a*b", "-x", "*x", "team_*", ""} {
		if err := CheckNamespacePatterns("deny", []string{bad}); err == nil || !strings.Contains(err.Error(), "deny[0]") {
			t.Errorf("%q: got %v, want an error naming deny[0]", bad, err)
		}
	}
}
