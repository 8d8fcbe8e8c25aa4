package membership

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// TestParseConfigIDLessMembers: a member with kubeconfig or inCluster may
// leave out its id (its cluster names it); one read through the hub, which
// has no connection of its own to read a property through, may not.
func TestParseConfigIDLessMembers(t *testing.T) {
	dir := t.TempDir()
	kubeconfig(t, dir, "far.kubeconfig", "https://127.0.0.1:6443")
	cfg, err := ParseConfig([]byte(configHeader+"clusterset: prod\nmembers:\n- kubeconfig: far.kubeconfig\n- inCluster: true\n- id: east\n  kubeconfig: east.kubeconfig\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, false} {
		if m := cfg.Members[i]; m.IDFromCluster != want || m.IDFromCluster && m.ID != "" {
			t.Errorf("members[%d]: %+v, want IDFromCluster %v", i, m, want)
		}
	}
	if got, want := cfg.Members[0].name(), "without id (kubeconfig "+filepath.Join(dir, "far.kubeconfig")+")"; got != want {
		t.Errorf("name %q, want %q", got, want)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"through the hub", configHeader + "clusterset: prod\nhub: {kubeconfig: far.kubeconfig}\nmembers:\n- id: east\n  kubeconfig: far.kubeconfig\n- {}\n",
			"members[1]: id is missing: only a member with kubeconfig or inCluster may leave it to its cluster's ClusterProperty cluster.clusterset.k8s.io"},
		{"nothing", configHeader + "clusterset: prod\nmembers:\n- context: x\n", "members[0]: id is missing"},
		{"same server", configHeader + "clusterset: prod\nmembers:\n- id: east\n  kubeconfig: far.kubeconfig\n- kubeconfig: far.kubeconfig\n",
			"member without id (kubeconfig " + filepath.Join(dir, "far.kubeconfig") + "): reaches the same API server (https://127.0.0.1:6443) as member east"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.yaml), dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
		})
	}
}

// TestIDFromClusterProperty: KEP-2149. A member whose entry leaves out its
// id joins under the ID its ClusterProperty cluster.clusterset.k8s.io
// gives; until it gives one it is left out, named on /readyz with why. It
// may not take another member's ID. An ID once read is kept while the
// cluster cannot be read (it does not leave, so its exports are not
// cleaned up), and follows the property when it names another ID (a
// rename: the old ID departs as the same cluster as the new).
func TestIDFromClusterProperty(t *testing.T) {
	const a, b, c = "https://10.0.0.1:6443", "https://10.0.0.2:6443", "https://10.0.0.3:6443"
	probers := map[string]*fakeProber{
		a: {state: Engaged, uid: "uid-a", says: claims{id: "far.fleet-a"}},
		b: {state: Engaged, uid: "uid-b"},
		c: {state: Engaged, uid: "uid-c", says: claims{id: "north"}},
	}
	ts := newTestSet(t, probers, "="+a, "="+b, "north="+c)
	readyz := func(want ...string) func() error {
		return func() error {
			_, lines := ts.set.Readiness()
			text := strings.Join(lines, "\n")
			for _, w := range want {
				if !strings.Contains(text, w) {
					return fmt.Errorf("/readyz without %q:\n%s", w, text)
				}
			}
			return nil
		}
	}
	bName := "member without id (kubeconfig " + filepath.Join(ts.dir, "https___10.0.0.2_6443.kubeconfig") + ")"
	poll(t, "far.fleet-a engaged under its property's ID", wantState(ts.set, "far.fleet-a", Engaged, ""))
	poll(t, "b left out, named with why", readyz("[+]"+bName+" ok: left out until its cluster names it: its cluster has no ClusterProperty cluster.clusterset.k8s.io"))
	if ids := ts.set.IDs(); !slices.Equal(ids, []clusterset.ClusterID{"far.fleet-a", "north"}) {
		t.Errorf("members %v", ids)
	}

	probers[b].say(claims{id: "north"}, nil)
	poll(t, "b may not be north", readyz(bName+` ok: left out until its cluster names it: its ClusterProperty cluster.clusterset.k8s.io names it "north", which is the config's member already`))
	probers[b].say(claims{id: "Not_An_ID"}, nil)
	poll(t, "b's bad ID", readyz(bName+" ok: left out until its cluster names it: its ClusterProperty cluster.clusterset.k8s.io is not a cluster ID"))
	probers[b].say(claims{id: "south"}, nil)
	poll(t, "south engaged", wantState(ts.set, "south", Engaged, ""))
	if err := readyz("left out")(); err == nil {
		t.Error("a member is still left out")
	}

	// a's cluster cannot be read: far.fleet-a stays a member.
	probers[a].say(claims{}, errors.New("connection refused"))
	probers[a].set(Unreachable, errors.New("connection refused"))
	failedFrom := probers[a].readCount()
	poll(t, "reads of a's property to fail a few times", func() error {
		if n := probers[a].readCount() - failedFrom; n < 5 {
			return fmt.Errorf("%d failed reads", n)
		}
		return nil
	})
	if _, ok := ts.set.Status("far.fleet-a"); !ok {
		t.Fatal("far.fleet-a left the clusterset while its cluster could not be read")
	}

	// a's cluster back, under another ID: a rename.
	probers[a].say(claims{id: "far.fleet-b"}, nil)
	probers[a].set(Engaged, nil)
	d := ts.departed("far.fleet-a")
	if d.SameClusterAs != "far.fleet-b" {
		t.Errorf("far.fleet-a departed as %+v, want the same cluster as far.fleet-b", d)
	}
	poll(t, "far.fleet-b engaged", wantState(ts.set, "far.fleet-b", Engaged, ""))
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, x := range ts.departures {
		if x.ID != "far.fleet-a" {
			t.Errorf("departure of %s", x.ID)
		}
	}
}
