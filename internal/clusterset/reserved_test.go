package clusterset

import (
	"maps"
	"slices"
	"testing"
)

func TestReserved(t *testing.T) {
	for key, want := range map[string]bool{
		"multicluster.kubernetes.io/service-name":   true,
		"multicluster.kubernetes.io/source-cluster": true,
		"multicluster.x-k8s.io/anything":            true,
		"endpointslice.kubernetes.io/managed-by":    true,
		"kubernetes.io/service-name":                true,
		"mcs-syncer.io/real-node":                   true,
		"sub.mcs-syncer.io/x":                       true,
		"tier":                                      false,
		"example.com/tier":                          false,
		"kubernetes.io/arch":                        false,
		"notmcs-syncer.io/x":                        false,
		"app.kubernetes.io/name":                    false,
	} {
		if got := Reserved(key); got != want {
			t.Errorf("Reserved(%q) = %v, want %v", key, got, want)
		}
	}
}

// TestReservedLabel: the managed-by label is refused on export, where
// mcs-syncer would overwrite it, but is no Reserved key (a publication of
// an older mcs-syncer that carries it is still read); annotations keep it.
func TestReservedLabel(t *testing.T) {
	if !ReservedLabel(ManagedByLabel) || !ReservedLabel("multicluster.kubernetes.io/x") || ReservedLabel("tier") {
		t.Error("ReservedLabel")
	}
	if Reserved(ManagedByLabel) {
		t.Error("Reserved(managed-by): readers would refuse older publications")
	}
	in := map[string]string{ManagedByLabel: "me", "tier": "front"}
	kept, dropped := WithoutReservedLabels(in)
	if !maps.Equal(kept, map[string]string{"tier": "front"}) || !slices.Equal(dropped, []string{ManagedByLabel}) {
		t.Errorf("WithoutReservedLabels: kept %v, dropped %v", kept, dropped)
	}
	if kept, _ := WithoutReserved(in); !maps.Equal(kept, in) {
		t.Errorf("WithoutReserved dropped from %v: %v", in, kept)
	}
}

func TestWithoutReserved(t *testing.T) {
	in := map[string]string{"tier": "front", "multicluster.kubernetes.io/service-name": "x", "mcs-syncer.io/a": "b"}
	kept, dropped := WithoutReserved(in)
	if !maps.Equal(kept, map[string]string{"tier": "front"}) || !slices.Equal(dropped, []string{"mcs-syncer.io/a", "multicluster.kubernetes.io/service-name"}) {
		t.Errorf("kept %v, dropped %v", kept, dropped)
	}
	if len(in) != 3 {
		t.Errorf("the input was changed: %v", in)
	}
	clean := map[string]string{"tier": "front"}
	if kept, dropped := WithoutReserved(clean); dropped != nil || !maps.Equal(kept, clean) {
		t.Errorf("clean map: kept %v, dropped %v", kept, dropped)
	}
}
