{{/* The labels of metacontroller/monitoring/'s objects, with monitoring.labels for the objects Prometheus selects. */}}
{{- define "hook.monitoring.labels" -}}
{{ include "hook.labels" . }}
app.kubernetes.io/component: monitoring
{{- end }}
