package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/test/testbed/audit"
	"github.com/mcs-syncer/mcs-syncer/test/testbed/workloads"
)

// blockedBound is what docs/troubleshooting.md ("A write that is
// refused") promises for one Service whose import stays refused in one
// consumer, in the first minute of its export. Each consumer (east
// imports its own export, and may) writes the import once: the
// ServiceImport created, its clusterset IP and its status written, the
// derived Service created, the slices (east's one). In north the refused
// slice create is tried again on the backoff, from 5 ms doubling: 14
// tries in 60 s, then one a minute; its conditions are written once; the
// events of the refusal aggregate (client-go's series: one event per
// version of the ServiceImport, created, then patched). East's export
// status is written twice (Exported, then "not imported everywhere") with
// one ImportBlocked event. The audit logs count tries, refused ones too: a
// retry that read the object from a cache still behind our own write of it
// reads it as written (plumbing.Latest), and writes nothing again (before,
// each such retry was a write the API server refused with a 409: under
// load, two of the backoff's first retries, 5 and 10 ms apart, both).
var blockedBound = map[string]int{
	"north endpointslices create":        14,
	"north events":                       6,
	"north serviceimports create":        1,
	"north serviceimports update":        1,
	"north serviceimports/status update": 1,
	"north services create":              1,
	"east serviceexports/status update":  2,
	"east events":                        1,
	"east serviceimports create":         1,
	"east serviceimports update":         1,
	"east serviceimports/status update":  1,
	"east services create":               1,
	"east endpointslices create":         1,
}

// TestRefusedSliceWritesBackOff (central mode, the shared mcs-syncer): a
// quota of 0 EndpointSlices in north's namespace, then east exports web
// there. The API server refuses every slice create, naming the slice it
// generated a name for. For 60 s mcs-syncer's writes to north and east in
// the namespace, and their events, are counted from the audit logs and
// held to blockedBound (before: 459 ServiceImport writes and 538 events
// in north, 503 ImportBlocked events in east, in 30 s). Once the quota is
// removed, the import is written within the backoff's one-minute cap.
func TestRefusedSliceWritesBackOff(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const ns = "quota-blocked"
	bed.Namespace(ctx, t, ns)
	north, east := bed.ClientOf(t, "north"), bed.ClientOf(t, "east")
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-slices", Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/endpointslices.discovery.k8s.io": resource.MustParse("0")}},
	}
	if err := north.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "north's quota to be counted", func() error {
		if err := north.Get(ctx, types.NamespacedName{Namespace: ns, Name: quota.Name}, quota); err != nil {
			return err
		}
		if len(quota.Status.Hard) == 0 {
			return fmt.Errorf("status not computed yet")
		}
		return nil
	})

	start := time.Now()
	if err := manualExport(ctx, east, ns, "web", "10.100.9.7"); err != nil {
		t.Fatal(err)
	}
	eventually(ctx, t, "north's ServiceImport to say its slices were not written, and why", func() error {
		si := &mcsv1beta1.ServiceImport{}
		if err := north.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, si); err != nil {
			return err
		}
		c := meta.FindStatusCondition(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "exceeded quota") {
			return fmt.Errorf("Ready %+v", c)
		}
		return nil
	})
	eventually(ctx, t, "east's export to say where it is not imported", func() error {
		c, err := workloads.ExportCondition(ctx, east, ns, "web", mcsv1beta1.ServiceExportConditionReady)
		if err != nil {
			return err
		}
		if !strings.Contains(c.Message, "not imported everywhere") || !strings.Contains(c.Message, "exceeded quota") {
			return fmt.Errorf("Ready %s/%s: %s", c.Status, c.Reason, c.Message)
		}
		return nil
	})

	// The window measured is the first minute of the export.
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(time.Until(start.Add(time.Minute))):
	}
	got := map[string]int{}
	var listed []string
	for _, cluster := range []string{"north", "east"} {
		writes, err := audit.ListWrites([]string{bed.Cluster(cluster).AuditLogPath}, start, start.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range writes {
			// "<resource>[/<subresource>] <verb> <namespace>/<name> at <time>"
			f := strings.Fields(w)
			if len(f) < 3 || !strings.HasPrefix(f[2], ns+"/") {
				continue
			}
			kind := cluster + " " + f[0] + " " + f[1]
			if f[0] == "events" {
				kind = cluster + " events" // created or patched (a series)
			}
			got[kind]++
			listed = append(listed, cluster+": "+w)
		}
	}
	t.Logf("mcs-syncer's writes in %s in the first minute of an import refused by a quota: %v", ns, got)
	var over []string
	for kind, n := range got {
		if bound, ok := blockedBound[kind]; !ok || n > bound {
			over = append(over, fmt.Sprintf("%d %s in 60 s, the documented bound is %d", n, kind, bound))
		}
	}
	if len(over) > 0 {
		// The writes first, then what they broke: the end of a long
		// output is what a CI report shows.
		t.Logf("the writes (with the API server's answer):\n%s", strings.Join(listed, "\n"))
		for _, o := range over {
			t.Error(o)
		}
	}
	if got["north endpointslices create"] < 2 {
		t.Errorf("%d slice creates tried in 60 s: the backoff should have tried again", got["north endpointslices create"])
	}

	if err := north.Delete(ctx, quota); err != nil {
		t.Fatal(err)
	}
	removed := time.Now()
	eventually(ctx, t, "north to import web once the quota is gone", importedEndpoints(ctx, north, ns, "web", "east", 1))
	t.Logf("imported %s after the quota was removed", time.Since(removed).Round(time.Millisecond))
	eventually(ctx, t, "east's export to say it is imported everywhere", func() error {
		c, err := workloads.ExportCondition(ctx, east, ns, "web", mcsv1beta1.ServiceExportConditionReady)
		if err != nil {
			return err
		}
		if c.Status != metav1.ConditionTrue || strings.Contains(c.Message, "not imported everywhere") {
			return fmt.Errorf("Ready %s/%s: %s", c.Status, c.Reason, c.Message)
		}
		return nil
	})
}
