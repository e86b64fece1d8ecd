{{/* The chart's name (also the pods' app.kubernetes.io/name, which the monitors' jobLabel makes the job). */}}
{{- define "gdx.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gdx.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gdx.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gdx.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gdx.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "gdx.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: guided-decoding
{{- end }}

{{- define "gdx.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gdx.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "gdx.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* "true" when the probes reach the daemon over TCP (probe.transport service or hostip), "" with the
socket. */}}
{{- define "gdx.probeTCP" -}}
{{- if ne .Values.probe.transport "socket" }}true{{ end }}
{{- end }}

{{/* "true" when the daemon lists pods (pod discovery: config kubernetes.enabled, and the vllm collector
not turned off by config collector.vllm), "" otherwise: the pods rule of rbac.yaml follows it. */}}
{{- define "gdx.discovery" -}}
{{- $kubernetes := .Values.config.kubernetes | default dict }}
{{- $collector := .Values.config.collector | default dict }}
{{- $on := has (toString (get $kubernetes "enabled") | lower) (list "true" "1" "yes" "on") }}
{{- $vllm := not (has (toString (get $collector "vllm") | lower) (list "false" "0" "no" "off")) }}
{{- if and $on $vllm }}true{{ end }}
{{- end }}

{{/* "true" when the daemon calls the API server at all (pod discovery or the TokenReviews of the TCP
transports): otherwise its pods get no ServiceAccount token. */}}
{{- define "gdx.apiAccess" -}}
{{- if or (include "gdx.discovery" .) (include "gdx.probeTCP" .) }}true{{ end }}
{{- end }}

{{/* The daemon's configuration: values `config`, with the probe socket under socketDir unless set, the
probe's TCP listener on ":<probe.port>" with the TCP transports unless set, and kubernetes.namespaces
from rbac.namespaces (the namespaces the Roles allow it to list). */}}
{{- define "gdx.config" -}}
{{- $config := deepCopy .Values.config }}
{{- $probe := get $config "probe" | default dict }}
{{- if not (hasKey $probe "socket") }}
{{- $_ := set $probe "socket" (printf "%s/probe.sock" (trimSuffix "/" .Values.socketDir)) }}
{{- end }}
{{- if and (include "gdx.probeTCP" .) (not (hasKey $probe "listen_address")) }}
{{- $_ := set $probe "listen_address" (printf ":%d" (int .Values.probe.port)) }}
{{- end }}
{{- $_ := set $config "probe" $probe }}
{{- $lint := get $config "lint" | default dict }}
{{- range $key := list "depth" "max-items" "union-depth" "union-width" "enum-size" "quantifier" "budget" "budget-nodes" "dynamic-reuse" "dynamic-seconds" "dynamic-span" }}
{{- $name := replace "-" "_" $key }}
{{- if and (hasKey $.Values.lint $key) (not (hasKey $lint $name)) }}
{{- $_ := set $lint $name (get $.Values.lint $key) }}
{{- end }}
{{- end }}
{{- if $lint }}
{{- $_ := set $config "lint" $lint }}
{{- end }}
{{- if .Values.rbac.namespaces }}
{{- $kubernetes := get $config "kubernetes" | default dict }}
{{- $_ := set $kubernetes "namespaces" .Values.rbac.namespaces }}
{{- $_ := set $config "kubernetes" $kubernetes }}
{{- end }}
{{- toYaml $config }}
{{- end }}

{{/* Monitors: `instance` is the node's name, then the user's relabelings. */}}
{{- define "gdx.relabelings" -}}
- sourceLabels: [__meta_kubernetes_pod_node_name]
  targetLabel: instance
{{- with .relabelings }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* A monitor in another namespace than the release's selects the release's namespace explicitly. */}}
{{- define "gdx.namespaceSelector" -}}
{{- $ns := .monitor.namespace | default .root.Release.Namespace }}
{{- if ne $ns .root.Release.Namespace }}
namespaceSelector:
  matchNames: [{{ .root.Release.Namespace | quote }}]
{{- end }}
{{- end }}
