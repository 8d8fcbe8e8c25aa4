package clusterset

import (
	"maps"
	"slices"
	"strings"
)

// reservedPrefixes are the label and annotation prefixes that the MCS
// standard, the EndpointSlice API and mcs-syncer itself set on the objects
// of an import: a ServiceExport's exportedLabels and exportedAnnotations
// may not carry them onto a ServiceImport, where they would pose as the
// controller's own (or steer kube-proxy and DNS providers).
var reservedPrefixes = []string{
	"multicluster.kubernetes.io/", "multicluster.x-k8s.io/",
	"endpointslice.kubernetes.io/", "mcs-syncer.io/",
}

// reservedKeys are single reserved keys outside those prefixes.
var reservedKeys = []string{"kubernetes.io/service-name"}

// Reserved reports whether a label or annotation key is reserved (see
// reservedPrefixes), also under a subdomain of a reserved prefix
// ("x.mcs-syncer.io/...").
func Reserved(key string) bool {
	if slices.Contains(reservedKeys, key) {
		return true
	}
	prefix, _, found := strings.Cut(key, "/")
	if !found {
		return false
	}
	for _, p := range reservedPrefixes {
		domain := strings.TrimSuffix(p, "/")
		if prefix == domain || strings.HasSuffix(prefix, "."+domain) {
			return true
		}
	}
	return false
}

// ReservedPatterns names the reserved keys for messages:
// "multicluster.kubernetes.io/*, ..., kubernetes.io/service-name".
func ReservedPatterns() string {
	var patterns []string
	for _, p := range reservedPrefixes {
		patterns = append(patterns, p+"*")
	}
	return strings.Join(append(patterns, reservedKeys...), ", ")
}

// WithoutReserved returns m without its reserved keys (m itself when it has
// none) and the keys it dropped, sorted.
func WithoutReserved(m map[string]string) (map[string]string, []string) {
	var dropped []string
	for k := range m {
		if Reserved(k) {
			dropped = append(dropped, k)
		}
	}
	if len(dropped) == 0 {
		return m, nil
	}
	kept := maps.Clone(m)
	for _, k := range dropped {
		delete(kept, k)
	}
	slices.Sort(dropped)
	return kept, dropped
}
