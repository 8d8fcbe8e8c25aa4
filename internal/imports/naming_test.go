package imports

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestDerivedServiceName pins the name to the convention shared with the
// mcs-api reference controller and Cilium.
func TestDerivedServiceName(t *testing.T) {
	// Computed independently: python3 -c 'import hashlib,base64;
	// print(base64.b32hexencode(hashlib.sha256(b"default/nginx").digest()).decode().lower()[:10])'
	got := DerivedServiceName(types.NamespacedName{Namespace: "default", Name: "nginx"})
	if got != "derived-iuq6ea9f4j" {
		t.Fatalf("name %q, want derived-iuq6ea9f4j", got)
	}
	if again := DerivedServiceName(types.NamespacedName{Namespace: "default", Name: "nginx"}); again != got {
		t.Errorf("not deterministic: %s vs %s", got, again)
	}
	if other := DerivedServiceName(types.NamespacedName{Namespace: "default", Name: "nginx2"}); other == got {
		t.Errorf("two keys share %s", got)
	}
}
