package clusterset

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestCutMessage: a message over the API's bound is cut, on a character
// boundary, saying so; a shorter one is left alone.
func TestCutMessage(t *testing.T) {
	if got := CutMessage("short"); got != "short" {
		t.Errorf("%q", got)
	}
	long := strings.Repeat("é", MaxConditionMessage)
	got := CutMessage(long)
	if len(got) > MaxConditionMessage || !strings.HasSuffix(got, "(cut)") || !utf8.ValidString(got) {
		t.Errorf("cut to %d bytes, valid UTF-8 %v, ends %q", len(got), utf8.ValidString(got), got[len(got)-10:])
	}
}

// TestOversizedAnnotations: keys are taken in order until the budget is
// spent; later ones that do not fit are refused, smaller later ones that
// fit are kept; keys that are no qualified names are refused.
func TestOversizedAnnotations(t *testing.T) {
	in := map[string]string{
		"a/one":   strings.Repeat("x", ExportedAnnotationsBudget-100),
		"b/two":   strings.Repeat("x", 200),
		"c/three": "small",
		"bad key": "v",
	}
	kept, refused := OversizedAnnotations(in)
	var names []string
	for _, r := range refused {
		names = append(names, r.Key)
	}
	if len(kept) != 2 || kept["c/three"] != "small" || kept["a/one"] == "" || strings.Join(names, ",") != "b/two,bad key" {
		t.Errorf("kept %d keys, refused %v", len(kept), refused)
	}
	if kept, refused := OversizedAnnotations(map[string]string{"x/y": "z"}); len(refused) != 0 || kept["x/y"] != "z" {
		t.Errorf("a small map: %v %v", kept, refused)
	}
}
