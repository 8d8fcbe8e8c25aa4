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

// ManagedByLabel marks the ServiceImports and derived Services that
// mcs-syncer manages, with its --managed-by value.
const ManagedByLabel = "app.kubernetes.io/managed-by"

// ReservedLabel reports whether an exportedLabels key may not go onto a
// ServiceImport: a Reserved key, or ManagedByLabel, whose value mcs-syncer
// sets itself (an exported one was overwritten without a word). The
// export refuses it with a condition; readers of publications refuse only
// Reserved keys, so that a publication of an older mcs-syncer that
// carried the label is still imported (with the label overwritten, as
// then).
func ReservedLabel(key string) bool { return key == ManagedByLabel || Reserved(key) }

// ReservedPatterns names the reserved keys for messages:
// "multicluster.kubernetes.io/*, ..., kubernetes.io/service-name, the
// label app.kubernetes.io/managed-by".
func ReservedPatterns() string {
	var patterns []string
	for _, p := range reservedPrefixes {
		patterns = append(patterns, p+"*")
	}
	return strings.Join(append(append(patterns, reservedKeys...), "the label "+ManagedByLabel), ", ")
}

// WithoutReserved returns m without its reserved keys (m itself when it has
// none) and the keys it dropped, sorted.
func WithoutReserved(m map[string]string) (map[string]string, []string) {
	return withoutKeys(m, Reserved)
}

// WithoutReservedLabels is WithoutReserved for labels (ReservedLabel).
func WithoutReservedLabels(m map[string]string) (map[string]string, []string) {
	return withoutKeys(m, ReservedLabel)
}

// withoutKeys returns m without the keys refused (m itself when there are
// none) and those keys, sorted.
func withoutKeys(m map[string]string, refused func(string) bool) (map[string]string, []string) {
	var dropped []string
	for k := range m {
		if refused(k) {
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
