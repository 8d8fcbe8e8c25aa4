package main

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/mcsapi"
)

// TestExportAndUnexport: export creates the ServiceExport of an existing
// Service with its exported labels, updates them, says when nothing
// changes, and refuses a Service that does not exist; unexport deletes it,
// and says when there is none.
func TestExportAndUnexport(t *testing.T) {
	web := types.NamespacedName{Namespace: "demo", Name: "web"}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web"}}).Build()
	se, op, err := export(t.Context(), c, web, map[string]string{"tier": "web"}, nil)
	if err != nil || op != "created" {
		t.Fatalf("export: %v, %q", err, op)
	}
	if err := c.Get(t.Context(), web, se); err != nil || se.Spec.ExportedLabels["tier"] != "web" {
		t.Fatalf("the ServiceExport as held: %+v, %v", se.Spec, err)
	}
	if _, op, err := export(t.Context(), c, web, map[string]string{"tier": "web"}, nil); err != nil || op != "unchanged" {
		t.Errorf("the same export again: %v, %q", err, op)
	}
	if _, op, err := export(t.Context(), c, web, nil, map[string]string{"team": "a"}); err != nil || op != "configured" {
		t.Errorf("other labels: %v, %q", err, op)
	}
	if err := c.Get(t.Context(), web, se); err != nil || len(se.Spec.ExportedLabels) != 0 || se.Spec.ExportedAnnotations["team"] != "a" {
		t.Errorf("the updated ServiceExport: %+v, %v", se.Spec, err)
	}
	if _, _, err := export(t.Context(), c, types.NamespacedName{Namespace: "demo", Name: "api"}, nil, nil); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("a Service that does not exist: %v", err)
	}
	if err := unexport(t.Context(), c, web); err != nil {
		t.Errorf("unexport: %v", err)
	}
	if err := c.Get(t.Context(), web, se); !apierrors.IsNotFound(err) {
		t.Errorf("after unexport: %v, want not found", err)
	}
	if err := unexport(t.Context(), c, web); err == nil || !strings.Contains(err.Error(), "not exported") {
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
		{[]string{"unexport", "web", "--exported-labels", "a=b"}, "unknown flag: --exported-labels"},
		{[]string{"export", "web", "-o", "jsonpath={.metadata.name}"}, `-o "jsonpath={.metadata.name}": want name, json or yaml`},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(t.Context(), tc.args, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), tc.says) {
			t.Errorf("%v: exit %d, %q; want %d and %q", tc.args, code, stderr.String(), exitUsage, tc.says)
		}
	}
}

// TestExportPrinted: export prints as kubectl create does: the name and
// what was done by default and with -o name, the object with -o json or
// yaml, in the version the cluster serves and without managedFields.
func TestExportPrinted(t *testing.T) {
	se := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl-mcs"}}}}
	for _, tc := range []struct {
		output string
		gv     schema.GroupVersion
		want   []string
	}{
		{"", mcsapi.V1beta1, []string{"serviceexport.multicluster.x-k8s.io/web created\n"}},
		{"name", mcsapi.V1beta1, []string{"serviceexport.multicluster.x-k8s.io/web created\n"}},
		{"yaml", mcsapi.V1beta1, []string{"apiVersion: multicluster.x-k8s.io/v1beta1\n", "kind: ServiceExport\n", "  namespace: demo\n"}},
		{"json", mcsapi.V1alpha1, []string{`"apiVersion": "multicluster.x-k8s.io/v1alpha1"`, `"name": "web"`}},
	} {
		var out bytes.Buffer
		if err := printExport(se.DeepCopy(), tc.output, "created", schemes[tc.gv], &out); err != nil {
			t.Fatalf("-o %q: %v", tc.output, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("-o %q (%s): %q lacks %q", tc.output, tc.gv, out.String(), w)
			}
		}
		if strings.Contains(out.String(), "managedFields") {
			t.Errorf("-o %q: %q prints managedFields", tc.output, out.String())
		}
	}
}
