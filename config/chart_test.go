package config_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"
)

// chart is the Helm chart, relative to config/.
const chart = "../charts/mcs-syncer"

// helmLabels are the labels Helm's conventions put on every object of the
// chart (_helpers.tpl's mcs-syncer.labels) that kustomize's objects do not
// have: the chart's one documented difference on every object.
var helmLabels = []string{
	"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
	"app.kubernetes.io/managed-by", "helm.sh/chart",
}

// helm returns the helm that make tools builds (MCS_TOOLS_DIR), or skips
// the test under -short (make unit) when there is none.
func helm(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MCS_TOOLS_DIR")
	bin := filepath.Join(dir, "helm")
	if _, err := os.Stat(bin); dir == "" || err != nil {
		if testing.Short() {
			t.Skip("no helm in MCS_TOOLS_DIR (make tools builds it; make chart-test runs this test)")
		}
		t.Fatalf("no helm in MCS_TOOLS_DIR=%q: make tools builds it (make chart-test runs this test with it)", dir)
	}
	return bin
}

// helmTemplate renders the chart in namespace mcs-system with the values
// files and --set values given, or returns helm's error and output.
func helmTemplate(t *testing.T, values []string, set ...string) (map[string][]byte, error) {
	t.Helper()
	args := []string{"template", "mcs-syncer", chart, "--namespace", "mcs-system"}
	for _, v := range values {
		args = append(args, "--values", v)
	}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helm(t), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return documents(t, stdout.Bytes()), nil
}

func mustTemplate(t *testing.T, values []string, set ...string) map[string][]byte {
	t.Helper()
	docs, err := helmTemplate(t, values, set...)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// asMap decodes a YAML document into the plain map that JSON would give,
// so that two renderings compare by content, not by layout or key order.
func asMap(t *testing.T, doc []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := sigsyaml.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// withoutHelmsMarks removes from a chart's object what the chart adds on
// purpose to every object (helmLabels, unless kustomize's has the same
// label) and to the CRDs (helm.sh/resource-policy: keep).
func withoutHelmsMarks(obj, kustomized map[string]any) {
	meta, _ := obj["metadata"].(map[string]any)
	want, _ := kustomized["metadata"].(map[string]any)
	labels, _ := meta["labels"].(map[string]any)
	wantLabels, _ := want["labels"].(map[string]any)
	for _, l := range helmLabels {
		if v, ok := wantLabels[l]; !ok || v != labels[l] {
			delete(labels, l)
		}
	}
	if len(labels) == 0 {
		delete(meta, "labels")
	}
	if annotations, ok := meta["annotations"].(map[string]any); ok && obj["kind"] == "CustomResourceDefinition" {
		delete(annotations, "helm.sh/resource-policy")
		if len(annotations) == 0 {
			delete(meta, "annotations")
		}
	}
}

// TestChartRendersWhatKustomizeRenders: config/ is the one source of the
// objects; the chart, in each mode with its ci/ values, renders the same
// objects as kustomize renders that mode from config/, with Helm's labels
// and the CRDs' keep annotation as the only differences. In hub mode the
// members' identities are config/hub/member-binding.yaml's, once per
// member.
func TestChartRendersWhatKustomizeRenders(t *testing.T) {
	memberBinding, err := os.ReadFile("hub/member-binding.yaml")
	if err != nil {
		t.Fatal(err)
	}
	hub := kustomize(t, "hub")
	for _, id := range []string{"east", "west"} {
		for key, doc := range documents(t, bytes.ReplaceAll(memberBinding, []byte("CLUSTER_ID"), []byte(id))) {
			hub[key] = doc
		}
	}
	for mode, kustomized := range map[string]map[string][]byte{
		"central":     render(t, "central"),
		"per-cluster": render(t, "per-cluster"),
		"member":      render(t, "member"),
		"hub":         hub,
	} {
		t.Run(mode, func(t *testing.T) {
			// config/manager's image is mcs-syncer:latest, its tag set
			// where the image is chosen (your kustomization's images:);
			// the chart's is its appVersion.
			charted := mustTemplate(t, []string{filepath.Join(chart, "ci", mode+"-values.yaml")}, "image.tag=latest")
			compareRenderings(t, kustomized, charted)
		})
	}
}

func compareRenderings(t *testing.T, kustomized, charted map[string][]byte) {
	t.Helper()
	for _, key := range slices.Sorted(maps.Keys(kustomized)) {
		if charted[key] == nil {
			t.Errorf("the chart renders no %s", key)
			continue
		}
		want := asMap(t, kustomized[key])
		got := asMap(t, charted[key])
		withoutHelmsMarks(got, want)
		if !reflect.DeepEqual(got, want) {
			wantJSON, _ := json.MarshalIndent(want, "", " ")
			gotJSON, _ := json.MarshalIndent(got, "", " ")
			t.Errorf("%s differs (Helm's labels aside):\nkustomize: %s\nchart:     %s", key, wantJSON, gotJSON)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(charted)) {
		if kustomized[key] == nil {
			t.Errorf("the chart renders %s, which kustomize does not", key)
		}
	}
}

// TestChartOptions: what the values add to a mode's objects, each against
// what it stands for.
func TestChartOptions(t *testing.T) {
	central := []string{filepath.Join(chart, "ci", "central-values.yaml")}

	t.Run("the clusterset Secret, per-cluster", func(t *testing.T) {
		docs := mustTemplate(t, []string{filepath.Join(chart, "ci", "per-cluster-values.yaml")},
			"clusterset.create=true", "localCluster=east", "clusterset.config.clusterset=demo",
			"clusterset.files.hub\\.kubeconfig=kubeconfig of the hub")
		var s corev1.Secret
		if err := sigsyaml.UnmarshalStrict(docs["Secret/mcs-syncer-clusterset"], &s); err != nil {
			t.Fatal(err)
		}
		if s.StringData["local-cluster"] != "east" || s.StringData["hub.kubeconfig"] != "kubeconfig of the hub" ||
			asMap(t, []byte(s.StringData["clusterset.yaml"]))["clusterset"] != "demo" {
			t.Errorf("Secret %v: want local-cluster east, hub.kubeconfig and clusterset.yaml of clusterset demo", s.StringData)
		}
	})

	t.Run("image, replicas, flags", func(t *testing.T) {
		docs := mustTemplate(t, central, "image.repository=registry.example/mcs-syncer", "image.tag=v9.9.9",
			"replicas=3", "extraArgs={--cluster-unreachable-grace=30s}")
		deployment := asMap(t, docs["Deployment/mcs-syncer"])
		spec := deployment["spec"].(map[string]any)
		container := spec["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		args := fmt.Sprint(container["args"])
		if container["image"] != "registry.example/mcs-syncer:v9.9.9" || spec["replicas"] != float64(3) ||
			!strings.Contains(args, "--cluster-unreachable-grace=30s") || !strings.Contains(args, "--leader-elect") {
			t.Errorf("Deployment: image %v, replicas %v, args %v", container["image"], spec["replicas"], args)
		}
	})

	t.Run("monitoring", func(t *testing.T) {
		docs := mustTemplate(t, central, "monitoring.prometheusRule.enabled=true", "monitoring.prometheusRule.labels.release=kps",
			"monitoring.dashboard.enabled=true")
		kustomized := kustomize(t, "monitoring")["PrometheusRule/mcs-syncer"]
		rule := asMap(t, docs["PrometheusRule/mcs-syncer"])
		if rule["metadata"].(map[string]any)["labels"].(map[string]any)["release"] != "kps" {
			t.Errorf("PrometheusRule's labels %v lack release=kps", rule["metadata"])
		}
		delete(rule["metadata"].(map[string]any)["labels"].(map[string]any), "release")
		compareRenderings(t, map[string][]byte{"PrometheusRule/mcs-syncer": kustomized},
			map[string][]byte{"PrometheusRule/mcs-syncer": mustJSON(t, rule)})
		var dashboard corev1.ConfigMap
		if err := sigsyaml.UnmarshalStrict(docs["ConfigMap/mcs-syncer-dashboard"], &dashboard); err != nil {
			t.Fatal(err)
		}
		file, err := os.ReadFile("monitoring/dashboard.json")
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(dashboard.Data["mcs-syncer.json"]) != strings.TrimSpace(string(file)) || dashboard.Labels["grafana_dashboard"] != "1" {
			t.Errorf("dashboard ConfigMap: labels %v, its JSON equal to config/monitoring/dashboard.json: %v",
				dashboard.Labels, strings.TrimSpace(dashboard.Data["mcs-syncer.json"]) == strings.TrimSpace(string(file)))
		}
	})

	t.Run("ClusterProfiles read", func(t *testing.T) {
		docs := mustTemplate(t, central, "inventory.clusterProfileNamespaces={fleet}")
		role := asMap(t, docs["Role/mcs-syncer-inventory-reader"])
		binding := asMap(t, docs["RoleBinding/mcs-syncer-inventory-reader"])
		rules := fmt.Sprint(role["rules"])
		if role["metadata"].(map[string]any)["namespace"] != "fleet" || binding["metadata"].(map[string]any)["namespace"] != "fleet" ||
			!strings.Contains(rules, "clusterprofiles") || !strings.Contains(rules, "watch") ||
			!strings.Contains(fmt.Sprint(binding["subjects"]), "mcs-syncer") {
			t.Errorf("inventory reader: Role %v, RoleBinding %v", role, binding)
		}
	})

	// helm install keeps the release in its namespace, which must exist
	// first: by default the chart renders none.
	t.Run("no namespace by default; without leader election or CRDs", func(t *testing.T) {
		docs := mustTemplate(t, nil, "leaderElection.enabled=false", "replicas=1", "crds.install=false")
		for key := range docs {
			if strings.HasPrefix(key, "CustomResourceDefinition/") || strings.HasPrefix(key, "Namespace/") {
				t.Errorf("renders %s", key)
			}
		}
		if strings.Contains(string(docs["Deployment/mcs-syncer"]), "--leader-elect") {
			t.Error("the Deployment elects a leader with leaderElection.enabled=false")
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestChartRefusesBadValues: a value that cannot work fails the render
// (helm install, upgrade and template alike) with what to set, before any
// object reaches a cluster.
func TestChartRefusesBadValues(t *testing.T) {
	for _, c := range []struct {
		name string
		set  []string
		want string
	}{
		{"an unknown mode", []string{"mode=centrol"}, "mode"},
		{"a value the chart does not have", []string{"replica=3"}, "replica"},
		{"per-cluster without its ID", []string{"mode=per-cluster", "clusterset.create=true", "clusterset.config.clusterset=demo"}, "localCluster"},
		{"a Secret without a config", []string{"clusterset.create=true"}, "clusterset.config"},
		{"a member ID that is no cluster ID", []string{"mode=hub", "hub.members={East_1}"}, "hub.members"},
		{"members' identities outside the hub", []string{"hub.members={east}"}, "hub.members"},
		{"a flag that is no flag", []string{"extraArgs={verbose}"}, "extraArgs"},
		{"no replica", []string{"replicas=0"}, "replicas"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := helmTemplate(t, nil, c.set...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("helm template --set %v: %v, want an error naming %s", c.set, err, c.want)
			}
		})
	}
}

// TestChartValuesDocumented: the chart's README lists every value of
// values.schema.json, with the schema's description and values.yaml's
// default, and values.yaml has no value that the schema lacks (the schema
// refuses unknown values).
func TestChartValuesDocumented(t *testing.T) {
	schemaJSON, err := os.ReadFile(filepath.Join(chart, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema property
	if err := json.Unmarshal(schemaJSON, &schema); err != nil {
		t.Fatal(err)
	}
	valuesYAML, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := sigsyaml.Unmarshal(valuesYAML, &values); err != nil {
		t.Fatal(err)
	}
	var rows []string
	schema.rows(t, "", values, &rows)
	table := "| Value | Type | Default | Description |\n|---|---|---|---|\n" + strings.Join(rows, "\n") + "\n"
	readme, err := os.ReadFile(filepath.Join(chart, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), table) {
		t.Errorf("charts/mcs-syncer/README.md's table of values is not the schema's and values.yaml's; it should read:\n%s", table)
	}
}

// property is the part of a JSON schema that the values' table shows.
type property struct {
	Type        string              `json:"type"`
	Description string              `json:"description"`
	Enum        []any               `json:"enum"`
	Properties  map[string]property `json:"properties"`
}

// rows appends a table row for each leaf value under prefix, in the order
// of the keys, with its default from values.
func (p property) rows(t *testing.T, prefix string, values map[string]any, rows *[]string) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(p.Properties)) {
		child := p.Properties[k]
		v, ok := values[k]
		if !ok {
			t.Errorf("values.yaml has no %s%s, which values.schema.json lists", prefix, k)
		}
		if child.Properties != nil {
			sub, _ := v.(map[string]any)
			child.rows(t, prefix+k+".", sub, rows)
			continue
		}
		if child.Description == "" {
			t.Errorf("values.schema.json: %s%s has no description", prefix, k)
		}
		typ := child.Type
		if len(child.Enum) > 0 {
			var names []string
			for _, e := range child.Enum {
				names = append(names, fmt.Sprintf("%q", e))
			}
			typ += " (" + strings.Join(slices.Compact(names), ", ") + ")"
		}
		def, _ := json.Marshal(v)
		*rows = append(*rows, fmt.Sprintf("| `%s%s` | %s | `%s` | %s |", prefix, k, typ, def, child.Description))
	}
	for k := range values {
		if _, ok := p.Properties[k]; !ok {
			t.Errorf("values.yaml has %s%s, which values.schema.json lacks", prefix, k)
		}
	}
}
