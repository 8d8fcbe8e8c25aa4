package clusterset

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ClusterID identifies a member cluster of the clusterset. KEP-1645 ("cluster
// id"): it "must be either equal to cluster name, or composed of two valid
// RFC 1123 DNS labels separated with a dot", the first being the cluster's
// name and the second a context such as its registry ("east" or
// "east.fleet-a"). It is the value of the
// multicluster.kubernetes.io/source-cluster label, so it has at most 63
// characters, as every label value.
type ClusterID string

// ParseClusterID validates s as a cluster ID.
func ParseClusterID(s string) (ClusterID, error) {
	labels := strings.Split(s, ".")
	if len(labels) > 2 {
		return "", fmt.Errorf("cluster ID %q has %d dot-separated parts: a cluster ID is a cluster name (a DNS-1123 label) or a name and one more DNS-1123 label joined by a dot", s, len(labels))
	}
	for _, l := range labels {
		errs := validation.IsDNS1123Label(l)
		switch {
		case len(errs) > 0 && len(labels) == 1:
			return "", fmt.Errorf("cluster ID %q is not a DNS-1123 label: %s", s, strings.Join(errs, "; "))
		case len(errs) > 0:
			return "", fmt.Errorf("cluster ID %q: %q is not a DNS-1123 label: %s", s, l, strings.Join(errs, "; "))
		}
	}
	if len(s) > validation.LabelValueMaxLength {
		return "", fmt.Errorf("cluster ID %q has %d characters: it is the value of the label multicluster.kubernetes.io/source-cluster, which has at most %d", s, len(s), validation.LabelValueMaxLength)
	}
	return ClusterID(s), nil
}
