package clusterset

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// DefaultDeniedNamespaces are never exported unless the clusterset config
// allows them by name: Kubernetes' own namespaces, whose Services (the
// cluster's DNS, its API server) a member must not impose on the others.
// The publication namespace (mcs-syncer's own) is denied besides, always.
var DefaultDeniedNamespaces = []string{"kube-system", "kube-public", "kube-node-lease"}

// ReasonRestrictedNamespace is the reason of Valid=False on a ServiceExport
// in a namespace the clusterset does not export from (the reason
// Submariner's Lighthouse gives the same refusal).
const ReasonRestrictedNamespace = "RestrictedNamespace"

// NamespacePolicy says which namespaces may be exported and imported. The
// zero policy denies the DefaultDeniedNamespaces only.
type NamespacePolicy struct {
	// Allow, if not empty, are the only namespaces exported; naming one of
	// DefaultDeniedNamespaces here allows it.
	Allow []string
	// Deny are namespaces never exported, besides the defaults.
	Deny []string
	// Own is mcs-syncer's own namespace, where it publishes: never
	// exported.
	Own string
}

// CheckNamespacePatterns checks the entries of an allow or deny list: a
// namespace name, or a prefix of one followed by "*" ("team-*"); field
// names the list in the error.
func CheckNamespacePatterns(field string, patterns []string) error {
	for i, p := range patterns {
		name := strings.TrimSuffix(p, "*")
		if name == "" && p == "*" {
			continue
		}
		// A prefix is checked as the namespace it begins would be.
		probe := name
		if strings.HasSuffix(p, "*") {
			probe = strings.TrimSuffix(name, "-") + "x"
		}
		if errs := validation.IsDNS1123Label(probe); len(errs) > 0 || strings.Contains(name, "*") {
			return fmt.Errorf("%s[%d]: %q is neither a namespace name nor one's prefix followed by \"*\"", field, i, p)
		}
	}
	return nil
}

// Refuses says why namespace may not be exported or imported, or "" if it
// may.
func (p NamespacePolicy) Refuses(namespace string) string {
	switch {
	case p.Own != "" && namespace == p.Own:
		return fmt.Sprintf("namespace %s is mcs-syncer's own, where it publishes; nothing in it is exported", namespace)
	case matchAny(p.Deny, namespace):
		return fmt.Sprintf("namespace %s is denied by the clusterset config's exportNamespaces.deny", namespace)
	case slices.Contains(p.Allow, namespace):
		return ""
	case slices.Contains(DefaultDeniedNamespaces, namespace):
		return fmt.Sprintf("namespace %s is one of Kubernetes' own, which are not exported unless the clusterset config's exportNamespaces.allow names it", namespace)
	case len(p.Allow) > 0 && !matchAny(p.Allow, namespace):
		return fmt.Sprintf("namespace %s is not in the clusterset config's exportNamespaces.allow", namespace)
	}
	return ""
}

// matchAny reports whether namespace is one of patterns, or begins with
// the prefix of one that ends in "*".
func matchAny(patterns []string, namespace string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(namespace, prefix) || p == namespace {
			return true
		}
	}
	return false
}
