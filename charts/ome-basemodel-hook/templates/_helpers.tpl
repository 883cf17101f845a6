{{/*
Names and pieces the templates share. The names are fixed, as in the kustomize install
(metacontroller/): the controllers and docs/install.md call the hook by them.
*/}}

{{/* The hook's namespace, which the chart creates. */}}
{{- define "hook.namespace" -}}
ome-basemodel-hook
{{- end }}

{{/* The labels metacontroller/kustomization.yaml gives every object it installs. */}}
{{- define "hook.labels" -}}
app.kubernetes.io/name: ome-basemodel-hook
app.kubernetes.io/part-of: ome
{{- end }}

{{/* The labels that select the hook's pods (the Deployment's immutable selector). */}}
{{- define "hook.selectorLabels" -}}
app.kubernetes.io/name: ome-basemodel-hook
app.kubernetes.io/component: webhook
{{- end }}

{{/* The hook's image: repository, then the tag (the chart's appVersion unless given), then the digest if given. */}}
{{- define "hook.image" -}}
{{- $image := printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- if .Values.image.digest }}{{ $image = printf "%s@%s" $image .Values.image.digest }}{{ end -}}
{{- $image -}}
{{- end }}

{{/*
Metacontroller's ServiceAccount: the value if given; for a Helm install, its chart's
fullname (metacontroller-helm's _helpers.tpl: the release's name when it holds the chart's,
else <release>-metacontroller-helm, at most 63 characters); else the kustomize install's.
*/}}
{{- define "hook.metacontroller.serviceAccount" -}}
{{- $metacontroller := .Values.metacontroller -}}
{{- if $metacontroller.serviceAccount -}}
{{- $metacontroller.serviceAccount -}}
{{- else if $metacontroller.helmRelease -}}
{{- if contains "metacontroller-helm" $metacontroller.helmRelease -}}
{{- $metacontroller.helmRelease | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-metacontroller-helm" $metacontroller.helmRelease | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- else -}}
metacontroller
{{- end -}}
{{- end }}

{{/* The user Metacontroller's API requests authenticate as: the one writer the status fence admits. */}}
{{- define "hook.metacontroller.user" -}}
system:serviceaccount:{{ .Values.metacontroller.namespace }}:{{ include "hook.metacontroller.serviceAccount" . }}
{{- end }}

{{/* The labels of Metacontroller's pods: the value if given, else those its Helm chart or its kustomize install put on them. */}}
{{- define "hook.metacontroller.podLabels" -}}
{{- $metacontroller := .Values.metacontroller -}}
{{- if $metacontroller.podLabels -}}
{{- toYaml $metacontroller.podLabels -}}
{{- else if $metacontroller.helmRelease -}}
app.kubernetes.io/name: metacontroller-helm
app.kubernetes.io/instance: {{ $metacontroller.helmRelease }}
{{- else -}}
app.kubernetes.io/name: metacontroller
{{- end -}}
{{- end }}

{{/*
One hook of a controller, called at .path: through the Service or at webhook.url, with the
credentials and the TLS settings Metacontroller then needs (docs/install.md). Called with
(dict "root" $ "path" "/sync").
*/}}
{{- define "hook.webhook" -}}
{{- $values := .root.Values -}}
{{- $namespace := include "hook.namespace" .root -}}
{{- $webhook := dict "timeout" "10s" "responseUnMarshallMode" "strict" -}}
{{- if $values.webhook.url -}}
{{- $_ := set $webhook "url" (printf "%s%s" (trimSuffix "/" $values.webhook.url) .path) -}}
{{- else -}}
{{- $_ := set $webhook "service" (dict "name" "ome-basemodel-hook" "namespace" $namespace "port" 80 "protocol" (ternary "https" "http" $values.tls.enabled)) -}}
{{- $_ := set $webhook "path" .path -}}
{{- end -}}
{{- if eq $values.auth.type "bearer" -}}
{{- $_ := set $webhook "authorization" (dict "type" "Bearer" "secretRef" (dict "name" $values.auth.secretName "namespace" $namespace "key" "token")) -}}
{{- else if eq $values.auth.type "basic" -}}
{{- $_ := set $webhook "basicAuth" (dict "secretRef" (dict "name" $values.auth.secretName "namespace" $namespace)) -}}
{{- end -}}
{{- if $values.tls.enabled -}}
{{- $_ := set $webhook "caBundle" (dict "configMapRef" (dict "name" $values.tls.caConfigMap "namespace" $namespace)) -}}
{{- if $values.tls.mutual -}}
{{- $_ := set $webhook "clientTLS" (dict "secretRef" (dict "name" $values.tls.clientSecretName "namespace" $namespace)) -}}
{{- end -}}
{{- end -}}
version: v2
webhook:
  {{- toYaml $webhook | nindent 2 }}
{{- end }}
