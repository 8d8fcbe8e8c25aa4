{{/*
The labels Helm's conventions put on every object of a release, beside
the app.kubernetes.io/name the kustomize manifests have (and that the
Deployment selects on, so that it never changes between versions).
*/}}
{{- define "mcs-syncer.labels" -}}
app.kubernetes.io/name: mcs-syncer
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The modes that run mcs-syncer's Deployment. */}}
{{- define "mcs-syncer.runs" -}}
{{- if has .Values.mode (list "central" "per-cluster") }}true{{ end }}
{{- end }}

{{/* The modes of a member cluster: mcs-syncer's roles and identities. */}}
{{- define "mcs-syncer.member" -}}
{{- if has .Values.mode (list "central" "per-cluster" "member") }}true{{ end }}
{{- end }}

{{/*
Checks the values the schema cannot: it fails the render with what to
set.
*/}}
{{- define "mcs-syncer.validate" -}}
{{- if not (has .Values.mode (list "central" "per-cluster" "member" "hub")) }}
{{- fail (printf "mode %q: set mode to central, per-cluster, member or hub" .Values.mode) }}
{{- end }}
{{- if and (eq .Values.mode "per-cluster") .Values.clusterset.create (not .Values.localCluster) }}
{{- fail "mode per-cluster with clusterset.create: set localCluster to this member's cluster ID" }}
{{- end }}
{{- if and .Values.clusterset.create (not .Values.clusterset.config) }}
{{- fail "clusterset.create: set clusterset.config to the clusterset configuration (docs/configuration.md)" }}
{{- end }}
{{- if and .Values.hub.members (ne .Values.mode "hub") }}
{{- fail "hub.members names member identities in the hub: set mode to hub, or leave hub.members empty" }}
{{- end }}
{{- end }}

{{/*
mcs-syncer.fromConfig renders the objects of a file of config/ (files/
links to them: config/ stays the one source of the objects that no value
changes) as kustomize's overlays do, and as a release's objects: each in
the release's namespace (every "mcs-system" of the file, its objects'
namespaces and the identities in the hub's admission policy, becomes the
release's namespace; a namespaced kind without one is put there), with
the release's labels, and without the file's Namespace (namespace.yaml
renders it). Arguments: (list $ "files/..." (dict "CLUSTER_ID" "east")),
the dict replacing words of the file (member-binding.yaml's CLUSTER_ID),
and labels and annotations to add under the keys "labels" and
"annotations".
*/}}
{{- define "mcs-syncer.fromConfig" -}}
{{- $root := index . 0 }}
{{- $text := $root.Files.Get (index . 1) | replace "mcs-system" $root.Release.Namespace }}
{{- $extra := dict }}
{{- if gt (len .) 2 }}{{ $extra = index . 2 }}{{ end }}
{{- range $word, $with := omit $extra "annotations" "labels" }}
{{- $text = replace $word $with $text }}
{{- end }}
{{- range $doc := regexSplit "(?m)^---\\s*$" $text -1 }}
{{- $obj := fromYaml $doc }}
{{- if and $obj (ne ($obj.kind | default "") "Namespace") }}
{{- $meta := $obj.metadata }}
{{- $_ := set $meta "labels" (merge (dict) ($extra.labels | default dict) (include "mcs-syncer.labels" $root | fromYaml) ($meta.labels | default dict)) }}
{{- if $extra.annotations }}
{{- $_ := set $meta "annotations" (merge (dict) $extra.annotations ($meta.annotations | default dict)) }}
{{- end }}
{{- if and (has $obj.kind (list "ServiceAccount" "Role" "RoleBinding" "ConfigMap" "Secret" "Service" "Deployment" "PrometheusRule")) (not $meta.namespace) }}
{{- $_ := set $meta "namespace" $root.Release.Namespace }}
{{- end }}
---
{{ toYaml $obj }}
{{- end }}
{{- end }}
{{- end }}
