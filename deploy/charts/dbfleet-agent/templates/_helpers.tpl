{{/* The agent's namespace in the member: fixed, as hub join knows it (pkg/join.SystemNamespace). */}}
{{- define "dbfleet-agent.namespace" -}}dbfleet-system{{- end -}}

{{/* Empty at the chart's defaults: the agent then refuses to start ("--cluster-name is required"). */}}
{{- define "dbfleet-agent.clusterName" -}}
{{- .Values.clusterName -}}
{{- end -}}

{{/* The labels hub join gives every member object of the agent. */}}
{{- define "dbfleet-agent.selectorLabels" -}}
app.kubernetes.io/name: dbfleet-agent
{{- end -}}

{{- define "dbfleet-agent.labels" -}}
app.kubernetes.io/name: dbfleet-agent
app.kubernetes.io/part-of: dbfleet
dbfleet.io/cluster: {{ include "dbfleet-agent.clusterName" . }}
{{- end -}}

{{- define "dbfleet-agent.metaLabels" -}}
{{ include "dbfleet-agent.labels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "dbfleet-agent.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- define "dbfleet-agent.secretName" -}}
{{- .Values.hub.existingSecret | default "dbfleet-agent-hub-kubeconfig" -}}
{{- end -}}

{{/*
dbfleet-agent.args: the flags of (list NAME VALUE ...) pairs as a YAML list of "--NAME=VALUE", leaving
out the null or empty ones so that the program's own defaults apply. Whole numbers are written
without exponent (YAML numbers reach templates as float64).
*/}}
{{- define "dbfleet-agent.args" -}}
{{- $args := list -}}
{{- range $f := . -}}
{{- $v := index $f 1 -}}
{{- if and (not (kindIs "invalid" $v)) (ne (toString $v) "") -}}
{{- if and (kindIs "float64" $v) (eq $v (floor $v)) -}}
{{- $v = printf "%d" (int64 $v) -}}
{{- end -}}
{{- $args = append $args (printf "--%s=%v" (index $f 0) $v) -}}
{{- end -}}
{{- end -}}
{{- if $args }}{{ toYaml $args }}{{ end -}}
{{- end -}}
