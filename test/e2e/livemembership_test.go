package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/mcs-syncer/mcs-syncer/test/testbed"
)

// importIdentity is what a consumer's users route through: the
// ServiceImport's UID and its clusterset IPs.
type importIdentity struct {
	uid string
	ips string
}

// importIdentities returns, by consumer and name, the identity of every
// ServiceImport in ns.
func importIdentities(ctx context.Context, t *testing.T, ns string, consumers ...string) (map[string]map[string]importIdentity, error) {
	out := map[string]map[string]importIdentity{}
	for _, consumer := range consumers {
		var list mcsv1beta1.ServiceImportList
		if err := bed.ClientOf(t, consumer).List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		out[consumer] = map[string]importIdentity{}
		for _, si := range list.Items {
			out[consumer][si.Name] = importIdentity{uid: string(si.UID), ips: strings.Join(si.Spec.IPs, ",")}
		}
	}
	return out, nil
}

// logSays returns a check that the mcs-syncer's log holds every part.
func logSays(s *syncerProcess, parts ...string) func() error {
	return func() error {
		raw, err := os.ReadFile(s.logPath)
		if err != nil {
			return err
		}
		for _, p := range parts {
			if !strings.Contains(string(raw), p) {
				return fmt.Errorf("the log (%s) lacks %q", s.logPath, p)
			}
		}
		return nil
	}
}

// TestLiveMembershipChanges: while mcs-syncer runs (central mode), the
// member north is renamed (same API server, new ID), its kubeconfig is
// rotated, its context changed, and it is removed and added back. None of
// these moves a clusterset IP or replaces a ServiceImport in any consumer,
// and no ServiceImport is deleted along the way: a renamed member's
// clean-up keeps what the new ID imports, and a clean-up of a member that
// is back stops before it deletes anything.
func TestLiveMembershipChanges(t *testing.T) {
	needTestbed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	exclusive(t)
	const ns, services = "live-membership", 20
	bed.Namespace(ctx, t, ns)
	east, north := bed.ClientOf(t, "east"), bed.ClientOf(t, "north")
	for i := range services {
		if err := manualExport(ctx, east, ns, fmt.Sprintf("svc-%02d", i), fmt.Sprintf("10.100.%d.%d", 200+i/250, 1+i%250)); err != nil {
			t.Fatal(err)
		}
	}
	// One Service exported by north itself: the rename changes its source.
	if err := manualExport(ctx, north, ns, "from-north", "10.102.200.1"); err != nil {
		t.Fatal(err)
	}
	consumers := []string{"east", "west", "north"}

	// north's kubeconfig, copied so that it can be rotated, with a second
	// context for the same cluster.
	dir := t.TempDir()
	northKubeconfig := filepath.Join(dir, "north.kubeconfig")
	writeKubeconfig := func(user string) {
		t.Helper()
		kc, err := clientcmd.LoadFromFile(bed.Cluster("north").KubeconfigPath)
		if err != nil {
			t.Fatal(err)
		}
		current := kc.Contexts[bed.Cluster("north").Context]
		if current == nil {
			t.Fatalf("north's kubeconfig has no context %s", bed.Cluster("north").Context)
		}
		// Rotated: the same credentials under another user entry.
		kc.AuthInfos[user] = kc.AuthInfos[current.AuthInfo]
		current.AuthInfo = user
		alt := *current
		kc.Contexts["alt"] = &alt
		if err := clientcmd.WriteToFile(*kc, northKubeconfig+".tmp"); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(northKubeconfig+".tmp", northKubeconfig); err != nil {
			t.Fatal(err)
		}
	}
	writeKubeconfig("first")
	path := filepath.Join(dir, "clusterset.yaml")
	write := func(north *testbed.Member) {
		t.Helper()
		var members []testbed.Member
		for _, id := range []string{"east", "west"} {
			members = append(members, testbed.Member{ID: id, Kubeconfig: bed.Cluster(id).KubeconfigPath, Context: bed.Cluster(id).Context})
		}
		if north != nil {
			members = append(members, *north)
		}
		writeMembers(t, path, members...)
	}
	northAs := func(id, context string) *testbed.Member {
		return &testbed.Member{ID: id, Kubeconfig: northKubeconfig, Context: context}
	}
	write(northAs("north", bed.Cluster("north").Context))
	s := ownSyncer(ctx, t, path)

	// converged checks that every consumer imports every Service, from the
	// expected source.
	converged := func(northID string) func() error {
		return func() error {
			for _, consumer := range consumers {
				cl := bed.ClientOf(t, consumer)
				var list mcsv1beta1.ServiceImportList
				if err := cl.List(ctx, &list, client.InNamespace(ns)); err != nil {
					return err
				}
				if len(list.Items) != services+1 {
					return fmt.Errorf("%s: %d ServiceImports, want %d", consumer, len(list.Items), services+1)
				}
				for _, si := range list.Items {
					want := "east"
					if si.Name == "from-north" {
						want = northID
					}
					if len(si.Status.Clusters) != 1 || si.Status.Clusters[0].Cluster != want || len(si.Spec.IPs) == 0 {
						return fmt.Errorf("%s: %s imported from %v, ips %v; want from %s", consumer, si.Name, si.Status.Clusters, si.Spec.IPs, want)
					}
				}
				if err := importedEndpoints(ctx, cl, ns, "from-north", northID, 1)(); err != nil {
					return fmt.Errorf("%s: %w", consumer, err)
				}
			}
			return nil
		}
	}
	eventually(ctx, t, "every consumer to import everything", converged("north"))
	before, err := importIdentities(ctx, t, ns, consumers...)
	if err != nil {
		t.Fatal(err)
	}
	// Every change in every cluster from now on; read step by step.
	changes, read := watchWrites(ctx, t), 0
	// unchanged compares every import with before; except names imports
	// that may be replaced in the consumers other than north.
	unchanged := func(step string, except ...string) {
		t.Helper()
		after, err := importIdentities(ctx, t, ns, consumers...)
		if err != nil {
			t.Fatal(err)
		}
		for _, consumer := range consumers {
			for name, was := range before[consumer] {
				if consumer != "north" && slices.Contains(except, name) {
					continue
				}
				if now := after[consumer][name]; now != was {
					t.Errorf("%s: %s's ServiceImport %s changed from %+v to %+v", step, consumer, name, was, now)
				}
			}
		}
		var deleted []string
		seen := changes.seen()
		for _, c := range seen[read:] {
			// "<cluster>: DELETED *v1beta1.ServiceImport <ns>/<name>"
			consumer, rest, _ := strings.Cut(c, ": ")
			name, isImport := strings.CutPrefix(rest, "DELETED *v1beta1.ServiceImport "+ns+"/")
			if isImport && (consumer == "north" || !slices.Contains(except, name)) {
				deleted = append(deleted, c)
			}
		}
		read = len(seen)
		if len(deleted) > 0 {
			t.Errorf("%s: ServiceImports deleted: %v", step, deleted)
		}
	}

	t.Run("rename", func(t *testing.T) {
		write(northAs("polar", bed.Cluster("north").Context))
		eventually(ctx, t, "polar engaged", readyzSays(ctx, s, "[+]member polar ok: engaged"))
		eventually(ctx, t, "every consumer to import from polar", converged("polar"))
		eventually(ctx, t, "north's departure to keep polar's imports", logSays(s, "its cluster is still a member under another ID"))
		unchanged("rename")
	})
	t.Run("kubeconfig rotation", func(t *testing.T) {
		writeKubeconfig("second")
		eventually(ctx, t, "polar reconnected", logSays(s, `"msg":"Member's settings changed; connecting anew","cluster":"polar"`))
		eventually(ctx, t, "polar engaged", readyzSays(ctx, s, "[+]member polar ok: engaged"))
		eventually(ctx, t, "every consumer to import from polar", converged("polar"))
		unchanged("kubeconfig rotation")
	})
	t.Run("context change", func(t *testing.T) {
		write(northAs("polar", "alt"))
		eventually(ctx, t, "polar reconnected twice", func() error {
			raw, err := os.ReadFile(s.logPath)
			if err != nil {
				return err
			}
			if n := strings.Count(string(raw), `"msg":"Member's settings changed; connecting anew","cluster":"polar"`); n < 2 {
				return fmt.Errorf("%d reconnections", n)
			}
			return nil
		})
		eventually(ctx, t, "polar engaged", readyzSays(ctx, s, "[+]member polar ok: engaged"))
		eventually(ctx, t, "every consumer to import from polar", converged("polar"))
		unchanged("context change")
	})
	t.Run("remove then add", func(t *testing.T) {
		write(nil)
		eventually(ctx, t, "polar gone", func() error {
			_, body, err := s.Readyz(ctx)
			if err != nil || strings.Contains(body, "member polar") {
				return fmt.Errorf("/readyz (%v):\n%s", err, body)
			}
			return nil
		})
		write(northAs("polar", "alt"))
		eventually(ctx, t, "the clean-up to stop", logSays(s, "Member's cluster is a member again: what mcs-syncer wrote there stays"))
		eventually(ctx, t, "every consumer to import from polar", converged("polar"))
		// from-north was exported by polar alone: while polar was away,
		// the other consumers withdrew it, as they must.
		unchanged("remove then add", "from-north")
	})
}
