package main

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// TestExportAndUnexport: export creates the ServiceExport of an existing
// Service with its exported labels, updates them, says when nothing
// changes, and refuses a Service that does not exist; unexport deletes it,
// and says when there is none.
func TestExportAndUnexport(t *testing.T) {
	web := types.NamespacedName{Namespace: "demo", Name: "web"}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"}}).Build()
	var out bytes.Buffer
	if err := export(t.Context(), c, web, map[string]string{"tier": "web"}, nil, &out); err != nil || !strings.Contains(out.String(), "created") {
		t.Fatalf("export: %v, %q", err, out.String())
	}
	se := &mcsv1beta1.ServiceExport{}
	if err := c.Get(t.Context(), web, se); err != nil || se.Spec.ExportedLabels["tier"] != "web" {
		t.Fatalf("the ServiceExport as held: %+v, %v", se.Spec, err)
	}
	out.Reset()
	if err := export(t.Context(), c, web, map[string]string{"tier": "web"}, nil, &out); err != nil || !strings.Contains(out.String(), "unchanged") {
		t.Errorf("the same export again: %v, %q", err, out.String())
	}
	out.Reset()
	if err := export(t.Context(), c, web, nil, map[string]string{"team": "a"}, &out); err != nil || !strings.Contains(out.String(), "updated") {
		t.Errorf("other labels: %v, %q", err, out.String())
	}
	if err := c.Get(t.Context(), web, se); err != nil || len(se.Spec.ExportedLabels) != 0 || se.Spec.ExportedAnnotations["team"] != "a" {
		t.Errorf("the updated ServiceExport: %+v, %v", se.Spec, err)
	}
	if err := export(t.Context(), c, types.NamespacedName{Namespace: "demo", Name: "api"}, nil, nil, &out); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("a Service that does not exist: %v", err)
	}
	out.Reset()
	if err := unexport(t.Context(), c, web, &out); err != nil || !strings.Contains(out.String(), "deleted") {
		t.Errorf("unexport: %v, %q", err, out.String())
	}
	if err := unexport(t.Context(), c, web, &out); err == nil || !strings.Contains(err.Error(), "not exported") {
		t.Errorf("unexport again: %v", err)
	}
}

// TestExportUsageErrors: bad input exits 2 and says why, before any
// cluster is asked.
func TestExportUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"export"}, "which Service?"},
		{[]string{"export", "web", "api"}, "one Service name"},
		{[]string{"export", "Web"}, "is no Service name"},
		{[]string{"export", "web", "--exported-labels", "tier"}, `"tier" is not key=value`},
		{[]string{"export", "web", "--exported-labels", "bad key=x"}, `"bad key" is no key`},
		{[]string{"unexport", "web", "--exported-labels", "a=b"}, "flag provided but not defined"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(t.Context(), tc.args, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), tc.says) {
			t.Errorf("%v: exit %d, %q; want %d and %q", tc.args, code, stderr.String(), exitUsage, tc.says)
		}
	}
}
