package clusterset

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ExportedAnnotationsBudget bounds the exportedAnnotations put onto a
// ServiceImport: half of the API's 256 KiB for all of an object's
// annotations, so that what other controllers (and kubectl's
// last-applied) add still fits. Over it, every ServiceImport update and
// the export's status update failed ("metadata.annotations: Too long"),
// and the import was blocked in every consumer.
const ExportedAnnotationsBudget = 128 << 10

// MaxConditionMessage is the API's bound on a condition's message.
const MaxConditionMessage = 32768

// CutMessage returns msg cut to fit a condition's message, saying so.
func CutMessage(msg string) string {
	if len(msg) <= MaxConditionMessage {
		return msg
	}
	const cut = " ... (cut)"
	end := MaxConditionMessage - len(cut)
	for end > 0 && !utf8RuneStart(msg[end]) {
		end-- // never split a character
	}
	return msg[:end] + cut
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// Refusal is a key of exportedLabels or exportedAnnotations left out of
// the import, and why.
type Refusal struct{ Key, Why string }

// String names the key (cut to 100 characters) and why.
func (r Refusal) String() string {
	k := r.Key
	if len(k) > 100 {
		k = k[:100] + "..."
	}
	return fmt.Sprintf("%s (%s)", k, r.Why)
}

// InvalidLabels returns labels without the keys that a ServiceImport
// cannot carry (a key that is not a qualified name, a value that is not a
// label value: the API server refuses them, and with them the whole
// import), and the refusals, in key order.
func InvalidLabels(labels map[string]string) (map[string]string, []Refusal) {
	var refused []Refusal
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			refused = append(refused, Refusal{k, "key: " + strings.Join(errs, "; ")})
		} else if errs := validation.IsValidLabelValue(labels[k]); len(errs) > 0 {
			refused = append(refused, Refusal{k, "value: " + strings.Join(errs, "; ")})
		}
	}
	return without(labels, refused), refused
}

// OversizedAnnotations returns annotations without the keys that a
// ServiceImport cannot carry: keys that are not qualified names, and,
// taken in key order, those that would make the whole exceed
// ExportedAnnotationsBudget; and the refusals.
func OversizedAnnotations(annotations map[string]string) (map[string]string, []Refusal) {
	var refused []Refusal
	size := 0
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			refused = append(refused, Refusal{k, "key: " + strings.Join(errs, "; ")})
			continue
		}
		if n := len(k) + len(annotations[k]); size+n > ExportedAnnotationsBudget {
			refused = append(refused, Refusal{k, fmt.Sprintf("%d bytes: over the %d bytes that all exported annotations may take", n, ExportedAnnotationsBudget)})
			continue
		}
		size += len(k) + len(annotations[k])
	}
	return without(annotations, refused), refused
}

// without returns m less the refused keys; m itself when none was.
func without(m map[string]string, refused []Refusal) map[string]string {
	if len(refused) == 0 {
		return m
	}
	kept := maps.Clone(m)
	for _, r := range refused {
		delete(kept, r.Key)
	}
	return kept
}
