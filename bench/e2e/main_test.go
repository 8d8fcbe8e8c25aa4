package main

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFlagsRejectBadValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-scenarios", "lat2,nope"}, `-scenarios: unknown scenario "nope"`},
		{[]string{"-services", "0"}, "-services: 0 is not positive"},
		{[]string{"-endpoints", "1001"}, "-endpoints: 1001 is outside 1..1000"},
		{[]string{"-duration", "0s"}, "-duration: 0s is not positive"},
		{[]string{"-idle", "-1s"}, "-idle: -1s is not positive"},
		{[]string{"-services", "50", "-churn-services", "51"}, "-churn-services: 51 is outside 1..50"},
		{[]string{"-churn-rate", "0"}, "-churn-rate: 0 is not positive"},
		{[]string{"-churn-rate", "NaN"}, "-churn-rate: NaN is not positive"},
		{[]string{"-services", "many"}, "services"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		_, err := parseFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

func TestQuickIsSmall(t *testing.T) {
	f, err := parseFlags([]string{"-quick"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if f.services > 50 || f.duration.Seconds() > 10 || f.idle.Seconds() > 10 || f.churnServices > f.services {
		t.Errorf("-quick: %+v", f)
	}
	for _, s := range allScenarios {
		if !f.has(s) {
			t.Errorf("-quick leaves out %s", s)
		}
	}
}

// TestStateFolderMustBeOurs: the benchmark runs in a folder that does not
// exist, is empty, or carries its marker; never in another.
func TestStateFolderMustBeOurs(t *testing.T) {
	root := t.TempDir()
	fresh := filepath.Join(root, "new")
	if err := prepareState(fresh); err != nil {
		t.Fatalf("a new folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(fresh, stateMarker)); err != nil {
		t.Fatalf("no marker written: %v", err)
	}
	if err := os.WriteFile(filepath.Join(fresh, "leftover"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := prepareState(fresh); err != nil {
		t.Errorf("a folder of an earlier run: %v", err)
	}
	foreign := filepath.Join(root, "foreign")
	if err := os.MkdirAll(foreign, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(foreign, "precious"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := prepareState(foreign); err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Errorf("a foreign folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(foreign, stateMarker)); err == nil {
		t.Error("a marker was written into a foreign folder")
	}
}

func TestBenchIPsDoNotCollide(t *testing.T) {
	seen := map[string]bool{}
	for _, o := range []int{0, 1, 9} {
		for i := 0; i < 5000; i += 499 {
			for j := range 1000 {
				ip := benchIP(o, i, j)
				if seen[ip] {
					t.Fatalf("%s twice", ip)
				}
				seen[ip] = true
			}
		}
	}
	if got := benchIP(9, 4999, 999); got != "10.235.75.63" {
		t.Errorf("benchIP(9, 4999, 999) = %s", got)
	}
}

func TestGrowthHubLoads(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-hub-members", "255,3"}, `-hub-members: "3" is not in 4..1000 (more than its 3 importers)`},
		{[]string{"-hub-members", "1001"}, `-hub-members: "1001" is not in 4..1000`},
		{[]string{"-hub-members", "lots"}, `-hub-members: "lots" is not a number of members`},
		{[]string{"-hub-members", "255:0"}, `-hub-members: "255:0": importers "0" are not in 1..10 (the largest -members)`},
		{[]string{"-hub-members", "255:11"}, `importers "11" are not in 1..10`},
		{[]string{"-hub-members", "255:x"}, `importers "x" are not in 1..10`},
		{[]string{"-hub-members", "2:2"}, `"2:2" is not in 3..1000 (more than its 2 importers)`},
		{[]string{"-hub-members", "0:1"}, `"0:1" is not in 2..1000`},
	} {
		if _, err := parseGrowthFlags(tc.args, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		want []hubLoad
	}{
		// The default: 1,000 members with one real importer, which a
		// 2-core machine can carry (three write 3 x 99,900 slices).
		{nil, []hubLoad{{hubSize{255, 3}, false}, {hubSize{255, 3}, true}, {hubSize{1000, 1}, false}}},
		{[]string{"-hub-members", "255,1000"}, []hubLoad{{hubSize{255, 3}, false}, {hubSize{255, 3}, true}, {hubSize{1000, 3}, false}}},
		{[]string{"-hub-members", "255:2, 1000:1", "-importers", "1", "-generic-hub=false"}, []hubLoad{{hubSize{255, 2}, false}, {hubSize{1000, 1}, false}}},
		{[]string{"-hub-members", "0"}, nil},
		// -quick: once, on kube-apiserver (make e2e proves the generic hub).
		{[]string{"-quick"}, []hubLoad{{hubSize{12, 3}, false}}},
		{[]string{"-quick", "-generic-hub"}, []hubLoad{{hubSize{12, 3}, false}, {hubSize{12, 3}, true}}},
	} {
		f, err := parseGrowthFlags(tc.args, io.Discard)
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if got := hubLoads(f); !slices.Equal(got, tc.want) {
			t.Errorf("%v: hub loads %v, want %v (each size on kube-apiserver, the first also on the generic control plane)", tc.args, got, tc.want)
		}
	}
}

// TestHubGrowthFitsLikeWithLike: a size fit across hub loads of different
// real importers fits what grows with the members only (RSS), and leaves
// out what the importers' number moves too (latency, the hub's CPU).
func TestHubGrowthFitsLikeWithLike(t *testing.T) {
	load := func(members, importers int, rss int64, latency time.Duration) *hubLoadResult {
		return &hubLoadResult{Server: hubServer(false), Converged: true, Members: members, Importers: importers,
			ImporterRSS: []int64{rss}, ImportedEndpoints: members * 1000, HubRSS: rss * 4, HubCPU: 0.3,
			MCS: []time.Duration{latency}, Floor: []time.Duration{latency / 2}, Converge: time.Minute}
	}
	for _, tc := range []struct {
		importers [2]int
		latency   string
	}{
		{[2]int{3, 1}, `change latency p50\s+ms\s+100\s+200\s+-\s+-\s+-\s+-\s+-\n`},
		{[2]int{1, 1}, `change latency p50\s+ms\s+100\s+200\s+66.67\s+0.1333\s+1.000\s+333.3\s+733.3\n`},
	} {
		r := &growthReport{hubLoads: []*hubLoadResult{
			load(250, tc.importers[0], 250<<20, 100*time.Millisecond), load(1000, tc.importers[1], 1000<<20, 200*time.Millisecond)}}
		var out strings.Builder
		r.printHubGrowth(&out)
		if !regexp.MustCompile(tc.latency).MatchString(out.String()) {
			t.Errorf("importers %v: latency row not %q in\n%s", tc.importers, tc.latency, out.String())
		}
		// RSS grows with the members alone: fitted either way.
		if rss := `importer RSS \(largest\)\s+MiB\s+250\s+1000\s+0\s+1\s+1.000\s+2000\s+5000\n`; !regexp.MustCompile(rss).MatchString(out.String()) {
			t.Errorf("importers %v: RSS row not %q in\n%s", tc.importers, rss, out.String())
		}
	}
}

// TestRelayCarriesOnePart: the relay floor carries, of a change, the
// part-sized run of endpoints that holds the changed endpoint.
func TestRelayCarriesOnePart(t *testing.T) {
	s := endpointSlice("ns", "s", "svc", benchIP(9, 0, 0), 250)
	before := slices.Clone(s.Endpoints)
	after, address, _ := flip(before, 130)
	i := changedAt(before, after)
	if i != 130 {
		t.Fatalf("changed at %d, want 130", i)
	}
	part := partOf(after, i)
	if len(part) != partSize || part[0].Addresses[0] != after[100].Addresses[0] || part[30].Addresses[0] != address {
		t.Errorf("part of %d endpoints from %s, want the 100 from %s holding %s", len(part), part[0].Addresses[0], after[100].Addresses[0], address)
	}
	if last := partOf(after, 249); len(last) != 50 {
		t.Errorf("the last part holds %d endpoints, want 50", len(last))
	}
	if changedAt(before, before) != -1 {
		t.Error("a change found where there is none")
	}
}

// TestSizesFlags: the sizes phase's flags refuse what it cannot run, and
// -quick keeps it small.
func TestSizesFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-sizes", "10,0"}, `-sizes: "0" is not a number of endpoints in 1..60000`},
		{[]string{"-sizes", "70000"}, `-sizes: "70000" is not a number`},
		{[]string{"-size-import", "-1"}, "-size-import: -1 is outside 0..60000"},
	} {
		_, err := parseGrowthFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
	f, err := parseGrowthFlags([]string{"-quick"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.sizes) == 0 || slices.Max(f.sizes) > 1000 || f.sizeImport > 5000 {
		t.Errorf("-quick: sizes %v, import %d", f.sizes, f.sizeImport)
	}
	if f, err = parseGrowthFlags([]string{"-sizes", "", "-size-import", "0"}, io.Discard); err != nil || len(f.sizes) != 0 {
		t.Errorf("no sizes phase: %v, %v", f, err)
	}
}
