package imports

import (
	"cmp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// The plan's stages are pure: these tables run them on objects as they
// would be read, with no client.

var planKey = types.NamespacedName{Namespace: "ns", Name: "web"}

func mergedOf(typ mcsv1beta1.ServiceImportType, labels map[string]string, clusters ...clusterset.ClusterID) clusterset.Merged {
	return clusterset.Merged{Clusters: clusters, Spec: clusterset.ExportedSpec{
		Type: typ, Labels: labels, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
		Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
	}}
}

func TestPlanServiceImport(t *testing.T) {
	fresh, write := planServiceImport(planKey, nil, mergedOf(mcsv1beta1.ClusterSetIP, map[string]string{"tier": "web"}, "east"), "mcs")
	if !write {
		t.Fatal("a new ServiceImport: nothing to write")
	}
	// As the API server holds it once spec.ips is written.
	held := fresh.DeepCopy()
	held.UID, held.Spec.IPs = "uid-1", []string{"10.96.0.7"}
	// Someone else's label, beside the exports' own.
	othersLabel := held.DeepCopy()
	othersLabel.Labels["team"] = "a"

	for _, tc := range []struct {
		name      string
		current   *mcsv1beta1.ServiceImport
		merged    clusterset.Merged
		write     bool
		check     func(*mcsv1beta1.ServiceImport) string
		managedBy string
	}{
		{name: "new: the exports' spec, labels and mcs-syncer's own", merged: mergedOf(mcsv1beta1.ClusterSetIP, map[string]string{"tier": "web"}, "east"), write: true,
			check: func(si *mcsv1beta1.ServiceImport) string {
				if si.Name != "web" || si.Namespace != "ns" || si.Spec.Type != mcsv1beta1.ClusterSetIP || len(si.Spec.Ports) != 1 ||
					si.Labels[ManagedByLabel] != "mcs" || si.Labels["tier"] != "web" ||
					si.Annotations[DerivedServiceAnnotation] != DerivedServiceName(planKey) ||
					si.Annotations[ExportedKeysAnnotation] != `{"labels":["tier"]}` {
					return "not the import's"
				}
				return ""
			}},
		{name: "held as planned, spec.ips kept: nothing to write", current: held, merged: mergedOf(mcsv1beta1.ClusterSetIP, map[string]string{"tier": "web"}, "east"),
			check: func(si *mcsv1beta1.ServiceImport) string {
				if len(si.Spec.IPs) != 1 || si.Spec.IPs[0] != "10.96.0.7" {
					return "spec.ips dropped"
				}
				return ""
			}},
		{name: "an exported label dropped; another tool's kept", current: othersLabel, merged: mergedOf(mcsv1beta1.ClusterSetIP, nil, "east"), write: true,
			check: func(si *mcsv1beta1.ServiceImport) string {
				if _, ok := si.Labels["tier"]; ok || si.Labels["team"] != "a" || si.Annotations[ExportedKeysAnnotation] != "" {
					return "labels " + strings.Join([]string{si.Labels["tier"], si.Labels["team"]}, ",")
				}
				return ""
			}},
		{name: "turned Headless: no spec.ips, no derived Service named", current: held, merged: mergedOf(mcsv1beta1.Headless, map[string]string{"tier": "web"}, "east"), write: true,
			check: func(si *mcsv1beta1.ServiceImport) string {
				if len(si.Spec.IPs) != 0 || si.Annotations[DerivedServiceAnnotation] != "" {
					return "still a ClusterSetIP import's"
				}
				return ""
			}},
		{name: "another --managed-by", current: held, merged: mergedOf(mcsv1beta1.ClusterSetIP, map[string]string{"tier": "web"}, "east"), write: true, managedBy: "other",
			check: func(si *mcsv1beta1.ServiceImport) string {
				if si.Labels[ManagedByLabel] != "other" {
					return "managed-by " + si.Labels[ManagedByLabel]
				}
				return ""
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.current.DeepCopy()
			want, write := planServiceImport(planKey, tc.current, tc.merged, cmp.Or(tc.managedBy, "mcs"))
			if write != tc.write {
				t.Errorf("write = %v, want %v", write, tc.write)
			}
			if why := tc.check(want); why != "" {
				t.Errorf("%s: %+v", why, want)
			}
			if tc.current != nil && (tc.current.Labels["tier"] != before.Labels["tier"] || len(tc.current.Spec.IPs) != len(before.Spec.IPs)) {
				t.Error("the object as read was changed")
			}
		})
	}
}

func TestPlanDerivedService(t *testing.T) {
	si := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1"}}
	name := types.NamespacedName{Namespace: "ns", Name: DerivedServiceName(planKey)}
	merged := mergedOf(mcsv1beta1.ClusterSetIP, nil, "east")
	fresh, write := planDerivedService(name, si, merged, nil, "mcs")
	if !write || !metav1.IsControlledBy(fresh, si) || fresh.Spec.Type != corev1.ServiceTypeClusterIP || fresh.Spec.Selector != nil ||
		len(fresh.Spec.Ports) != 1 || fresh.Spec.Ports[0].TargetPort.IntVal != 80 || fresh.Spec.SessionAffinity != corev1.ServiceAffinityNone ||
		ptr.Deref(fresh.Spec.IPFamilyPolicy, "") != corev1.IPFamilyPolicySingleStack || fresh.Labels[mcsv1beta1.LabelServiceName] != "web" {
		t.Fatalf("a new derived Service (write %v): %+v", write, fresh)
	}
	// As the API server holds it: a ClusterIP, and someone's annotation.
	held := fresh.DeepCopy()
	held.Spec.ClusterIP, held.Spec.ClusterIPs = "10.96.0.7", []string{"10.96.0.7"}
	held.Annotations = map[string]string{"note": "kept"}
	if want, write := planDerivedService(name, si, merged, held, "mcs"); write || want.Spec.ClusterIP != "10.96.0.7" || want.Annotations["note"] != "kept" {
		t.Errorf("held as planned: write %v, %+v", write, want)
	}
	dual := merged
	dual.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	if want, write := planDerivedService(name, si, dual, held, "mcs"); !write || ptr.Deref(want.Spec.IPFamilyPolicy, "") != corev1.IPFamilyPolicyRequireDualStack {
		t.Errorf("exports turned dual-stack: write %v, policy %v", write, want.Spec.IPFamilyPolicy)
	}
	otherOwner := held.DeepCopy()
	otherOwner.OwnerReferences[0].UID = "uid-0"
	if _, write := planDerivedService(name, si, merged, otherOwner, "mcs"); !write {
		t.Error("an owner reference to an earlier ServiceImport is not rewritten")
	}
}

func TestPlanStatus(t *testing.T) {
	si := &mcsv1beta1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", Generation: 3}}
	merged := mergedOf(mcsv1beta1.ClusterSetIP, nil, "east", "west")
	status, write := planStatus(si, merged, true, nil)
	ready := meta.FindStatusCondition(status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))
	if !write || len(status.Clusters) != 2 || status.Clusters[1].Cluster != "west" || status.EndpointSliceObjects != mcsv1beta1.EndpointSliceObjectsPresent ||
		ready == nil || ready.Status != metav1.ConditionTrue || ready.Message != "imported from [east west]" || ready.ObservedGeneration != 3 {
		t.Fatalf("a first status (write %v): %+v", write, status)
	}
	written := si.DeepCopy()
	written.Status = status
	if _, write := planStatus(written, merged, true, nil); write {
		t.Error("the same status again is written")
	}
	if status, write := planStatus(written, merged, false, nil); !write || status.EndpointSliceObjects != mcsv1beta1.EndpointSliceObjectsAbsent {
		t.Errorf("no slices left: write %v, %s", write, status.EndpointSliceObjects)
	}
	problem := slicesNotWrittenCondition(errorString(strings.Repeat("refused ", 1000)))
	status, write = planStatus(written, merged, true, problem)
	ready = meta.FindStatusCondition(status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))
	if !write || ready.Status != metav1.ConditionFalse || ready.Reason != string(ReasonEndpointSlicesNotWritten) || len(ready.Message) > clusterset.MaxConditionMessage {
		t.Errorf("a problem: write %v, Ready %s/%s, a message of %d bytes", write, ready.Status, ready.Reason, len(ready.Message))
	}
	if len(written.Status.Conditions) != 1 || written.Status.Conditions[0].Status != metav1.ConditionTrue {
		t.Error("the object as read was changed")
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }
