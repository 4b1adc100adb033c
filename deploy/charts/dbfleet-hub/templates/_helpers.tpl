{{/*
The namespace of the hub: fixed, as `hub run` and `hub join` know it (pkg/hub.Namespace).
*/}}
{{- define "dbfleet-hub.namespace" -}}dbfleet-system{{- end -}}

{{- define "dbfleet-hub.labels" -}}
app.kubernetes.io/name: dbfleet-hub
app.kubernetes.io/part-of: dbfleet
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "dbfleet-hub.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/*
dbfleet-hub.args: the flags of (list NAME VALUE ...) pairs as a YAML list of "--NAME=VALUE", leaving
out the null or empty ones so that the program's own defaults apply. Whole numbers are written
without exponent (YAML numbers reach templates as float64).
*/}}
{{- define "dbfleet-hub.args" -}}
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
