package publish

import (
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// TestIsDNSLabelIsIsDNS1123Label: the hand-written check of part IDs
// agrees with validation.IsDNS1123Label, on edge cases and random strings
// of the characters that matter.
func TestIsDNSLabelIsIsDNS1123Label(t *testing.T) {
	cases := []string{"", "a", "-", "a-", "-a", "a-b", "A", "p0001", "web-p0", "a.b", "a_b", "é", strings.Repeat("a", 63), strings.Repeat("a", 64), "0", "9-9"}
	r := rand.New(rand.NewPCG(56, 1))
	const chars = "az09-A._Z"
	for range 20000 {
		b := make([]byte, r.IntN(70))
		for i := range b {
			b[i] = chars[r.IntN(len(chars))]
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		if got, want := isDNSLabel(s), len(validation.IsDNS1123Label(s)) == 0; got != want {
			t.Errorf("isDNSLabel(%q) = %v, IsDNS1123Label says %v", s, got, want)
		}
	}
}
