package membership

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcs-syncer/mcs-syncer/internal/clusterset"
)

// kubeconfig writes a kubeconfig for server into dir and returns its name.
func kubeconfig(t *testing.T, dir, name, server string) string {
	t.Helper()
	raw := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %s}
users:
- name: u
  user: {token: abc}
contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
`, server)
	// Written aside and renamed: a Set polls its members' kubeconfigs,
	// and one read half written restarted a member without an address.
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path+".tmp", []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	return name
}

// configHeader is the schema every clusterset config begins with.
const configHeader = "apiVersion: " + ConfigAPIVersion + "\nkind: " + ConfigKind + "\n"

func TestParseConfig(t *testing.T) {
	dir := t.TempDir()
	kubeconfig(t, dir, "east.kubeconfig", "https://127.0.0.1:6443")
	kubeconfig(t, dir, "west.kubeconfig", "https://127.0.0.1:7443")
	kubeconfig(t, dir, "west-again.kubeconfig", "https://127.0.0.1:7443")

	cfg, err := ParseConfig([]byte(configHeader+"clusterset: prod\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n- id: west\n  kubeconfig: west.kubeconfig\n  context: ctx\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Members) != 2 || cfg.Member("west") == nil || cfg.Member("west").Kubeconfig != filepath.Join(dir, "west.kubeconfig") {
		t.Errorf("config %+v", cfg)
	}
	rc, err := cfg.Member("east").RESTConfig()
	if err != nil || rc.Host != "https://127.0.0.1:6443" {
		t.Errorf("east rest config %v, %v", rc, err)
	}

	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown field", configHeader + "clusterset: prod\nmember: []\n", `unknown field "member"`},
		{"no name", configHeader + "members:\n- id: east\n  kubeconfig: east.kubeconfig\n", "clusterset: name is missing"},
		{"bad name", configHeader + "clusterset: Prod\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n", `name "Prod" is not a DNS-1123 label`},
		{"no members", configHeader + "clusterset: prod\n", "members: no member clusters"},
		{"bad id", configHeader + "clusterset: prod\nmembers:\n- id: East_1\n  kubeconfig: east.kubeconfig\n", `members[0]: cluster ID "East_1" is not a DNS-1123 label`},
		{"duplicate id", configHeader + "clusterset: prod\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n- id: east\n  kubeconfig: west.kubeconfig\n", `members[1]: cluster ID "east" appears twice`},
		{"duplicate target", configHeader + "clusterset: prod\nmembers:\n- id: west\n  kubeconfig: west.kubeconfig\n- id: west2\n  kubeconfig: west-again.kubeconfig\n", "member west2: reaches the same API server (https://127.0.0.1:7443) as member west"},
		{"no kubeconfig", configHeader + "clusterset: prod\nmembers:\n- id: east\n", "member east: kubeconfig is missing (or set inCluster: true, or read it through a hub)"},
		{"both", configHeader + "clusterset: prod\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n  inCluster: true\n", "member east: set kubeconfig or inCluster, not both"},
		{"hub without kubeconfig", configHeader + "clusterset: prod\nhub: {context: x}\nmembers:\n- id: east\n", "hub: kubeconfig is missing"},
		{"context without kubeconfig", configHeader + "clusterset: prod\nhub: {kubeconfig: east.kubeconfig}\nmembers:\n- id: east\n  context: ctx\n", "member east: context needs a kubeconfig"},
		{"bad publication namespace", configHeader + "clusterset: prod\npublicationNamespace: MCS\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n", `publicationNamespace: "MCS" is not a namespace name`},
		{"bad exportNamespaces", configHeader + "clusterset: prod\nexportNamespaces: {allow: [demo], deny: [ok, Team_*]}\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n", `exportNamespaces.deny[1]: "Team_*" is neither a namespace name nor one's prefix followed by "*"`},
		{"addressRanges not a CIDR", configHeader + "clusterset: prod\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n  addressRanges: [10.100.0.0/16, 10.1.2.3/16]\n", `members[0].addressRanges[1]: "10.1.2.3/16" is not a CIDR`},
		{"addressRanges without id", configHeader + "clusterset: prod\nmembers:\n- kubeconfig: east.kubeconfig\n  addressRanges: [10.100.0.0/16]\n", "members[0]: addressRanges needs an id"},
		{"two in-cluster", configHeader + "clusterset: prod\nmembers:\n- id: east\n  inCluster: true\n- id: west\n  inCluster: true\n", "member west: inCluster is already member east"},
		// The schema is checked before the fields: a file without it (as
		// they were before it was required) is told what to add.
		{"no schema", "clusterset: prod\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n",
			`apiVersion and kind are missing: a clusterset config begins with the lines "apiVersion: mcs-syncer.io/v1alpha1" and "kind: ClusterSetConfiguration"`},
		{"other apiVersion", "apiVersion: mcs-syncer.io/v2\nkind: ClusterSetConfiguration\nclusterset: prod\nnewField: x\n",
			`apiVersion "mcs-syncer.io/v2" is not one this mcs-syncer reads: it reads mcs-syncer.io/v1alpha1`},
		{"other kind", "apiVersion: mcs-syncer.io/v1alpha1\nkind: Config\nclusterset: prod\n", `kind "Config": a clusterset config is of kind ClusterSetConfiguration`},
		{"kind only", "kind: ClusterSetConfiguration\nclusterset: prod\n", `apiVersion "" is not one this mcs-syncer reads`},
		{"schema unparsable", "apiVersion: [\n", "parse:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.yaml), dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestParseHubConfig: with a hub, members without connection settings are
// read through it (many members may share its address), and the default
// publication namespace is mcs-system.
// TestParseExportNamespaces: the file's exportNamespaces become the
// policy, with the publication namespace as mcs-syncer's own.
func TestParseExportNamespaces(t *testing.T) {
	dir := t.TempDir()
	kubeconfig(t, dir, "east.kubeconfig", "https://127.0.0.1:6443")
	cfg, err := ParseConfig([]byte(configHeader+"clusterset: prod\npublicationNamespace: mcs\nexportNamespaces: {allow: [kube-system, team-*], deny: [team-x]}\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AddressRanges != nil {
		t.Errorf("address ranges %v, want none", cfg.AddressRanges)
	}
	for ns, allowed := range map[string]bool{"kube-system": true, "team-a": true, "team-x": false, "mcs": false, "demo": false} {
		if why := cfg.Namespaces.Refuses(ns); (why == "") != allowed {
			t.Errorf("%s: refused %q, want allowed %v", ns, why, allowed)
		}
	}
}

// TestParseAddressRanges: a member's addressRanges are parsed, by ID.
func TestParseAddressRanges(t *testing.T) {
	dir := t.TempDir()
	kubeconfig(t, dir, "east.kubeconfig", "https://127.0.0.1:6443")
	cfg, err := ParseConfig([]byte(configHeader+"clusterset: prod\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n  addressRanges: [10.100.0.0/16, \"fd00:100::/64\"]\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(cfg.AddressRanges); got != "map[east:[10.100.0.0/16 fd00:100::/64]]" {
		t.Errorf("address ranges %s", got)
	}
}

func TestParseHubConfig(t *testing.T) {
	dir := t.TempDir()
	kubeconfig(t, dir, "east.kubeconfig", "https://127.0.0.1:6443")
	kubeconfig(t, dir, "hub.kubeconfig", "https://127.0.0.1:9443")
	cfg, err := ParseConfig([]byte(configHeader+"clusterset: prod\nhub:\n  kubeconfig: hub.kubeconfig\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n- id: west\n- id: north\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PublicationNamespace != DefaultPublicationNamespace {
		t.Errorf("publication namespace %q", cfg.PublicationNamespace)
	}
	if m := cfg.Member("east"); m.ThroughHub {
		t.Errorf("east has a kubeconfig of its own, yet is read through the hub")
	}
	for _, id := range []clusterset.ClusterID{"west", "north"} {
		m := cfg.Member(id)
		rc, err := m.RESTConfig()
		if !m.ThroughHub || err != nil || rc.Host != "https://127.0.0.1:9443" {
			t.Errorf("%s: through the hub %v, rest config %v, %v", id, m.ThroughHub, rc, err)
		}
	}
	if f := cfg.Member("west").fingerprint(); f == cfg.Member("north").fingerprint() {
		t.Error("two members through the hub have the same fingerprint")
	}
}

func TestLoadConfigNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clusterset.yaml")
	if err := os.WriteFile(path, []byte(configHeader+"clusterset: prod\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("error %v does not name %s", err, path)
	}
	if _, err := LoadConfig(path + ".missing"); err == nil {
		t.Error("no error for a missing file")
	}
}

// TestSampleConfigParses: the documented sample is valid apart from its
// kubeconfig files.
func TestSampleConfigParses(t *testing.T) {
	raw, err := os.ReadFile("../../config/samples/clusterset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kubeconfig(t, dir, "east.kubeconfig", "https://east.example:6443")
	kubeconfig(t, dir, "west.kubeconfig", "https://west.example:6443")
	if _, err := ParseConfig(raw, dir); err != nil {
		t.Fatal(err)
	}
}

// TestMemberProblemsAreTheMembers: a member whose kubeconfig is missing or
// lacks its context does not make the config invalid; the member's
// RESTConfig says what is wrong, and Usable fails only when no member can
// be reached at all.
func TestMemberProblemsAreTheMembers(t *testing.T) {
	dir := t.TempDir()
	kubeconfig(t, dir, "east.kubeconfig", "https://127.0.0.1:6443")
	cfg, err := ParseConfig([]byte(configHeader+"clusterset: prod\nmembers:\n- id: east\n  kubeconfig: east.kubeconfig\n  context: nope\n- id: west\n  kubeconfig: nope.kubeconfig\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{
		"east": `member east: kubeconfig ` + filepath.Join(dir, "east.kubeconfig") + ` (context "nope")`,
		"west": "member west: kubeconfig " + filepath.Join(dir, "nope.kubeconfig"),
	} {
		if _, err := cfg.Member(clusterset.ClusterID(id)).RESTConfig(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", id, err, want)
		}
	}
	if err := cfg.Usable(); err == nil || !strings.Contains(err.Error(), "no member can be reached") || !strings.Contains(err.Error(), "member west") {
		t.Errorf("Usable: %v", err)
	}
	// The file appears: the member is usable, and its fingerprint changed.
	before := cfg.Member("west").fingerprint()
	kubeconfig(t, dir, "nope.kubeconfig", "https://127.0.0.1:7443")
	if err := cfg.Usable(); err != nil {
		t.Error(err)
	}
	if cfg.Member("west").fingerprint() == before {
		t.Error("the fingerprint did not change with the kubeconfig")
	}
}
