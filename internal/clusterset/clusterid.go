package clusterset

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ClusterID identifies a member cluster of the clusterset: a DNS-1123
// label (lower-case letters, digits and '-', at most 63 characters), as the
// multicluster.kubernetes.io/source-cluster label value needs.
type ClusterID string

// ParseClusterID validates s as a cluster ID.
func ParseClusterID(s string) (ClusterID, error) {
	if errs := validation.IsDNS1123Label(s); len(errs) > 0 {
		return "", fmt.Errorf("cluster ID %q is not a DNS-1123 label: %s", s, strings.Join(errs, "; "))
	}
	return ClusterID(s), nil
}
