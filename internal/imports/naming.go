package imports

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// DerivedServiceAnnotation names, on a ServiceImport, the derived Service
// that gives it its clusterset IP (the mcs-api reference controller's and
// Cilium's convention).
const DerivedServiceAnnotation = "multicluster.kubernetes.io/derived-service"

// DerivedServiceName returns the name of the derived Service of the
// ServiceImport key: "derived-" + the first 10 characters of lower-case
// base32hex(sha256("<namespace>/<name>")).
func DerivedServiceName(key types.NamespacedName) string {
	sum := sha256.Sum256([]byte(key.Namespace + "/" + key.Name))
	return "derived-" + strings.ToLower(base32.HexEncoding.EncodeToString(sum[:]))[:10]
}
