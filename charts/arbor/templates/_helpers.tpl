{{/*
Naming, labels and shared values of the Arbor chart.

Every component template is rendered with a context built by "arbor.component":
  dict "root" $ "name" "gitsync"
so helpers can reach both the release ($.root) and the component's name.
*/}}

{{/* The components this chart can deploy, in a fixed order. */}}
{{- define "arbor.components" -}}
gitsync hierarchy observer webhook
{{- end -}}

{{- define "arbor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-wide prefix: the release name, or "<release>-arbor" when it lacks "arbor". */}}
{{- define "arbor.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "<fullname>-<component>": Deployment, Service, ServiceAccount and lease name. */}}
{{- define "arbor.componentName" -}}
{{- printf "%s-%s" (include "arbor.fullname" .root) .name -}}
{{- end -}}

{{- define "arbor.chartLabel" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every release-wide object. */}}
{{- define "arbor.labels" -}}
helm.sh/chart: {{ include "arbor.chartLabel" . }}
app.kubernetes.io/name: {{ include "arbor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: arbor
{{- end -}}

{{/* Labels that select the pods of the whole release (NetworkPolicy peers). */}}
{{- define "arbor.releaseSelectorLabels" -}}
app.kubernetes.io/name: {{ include "arbor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels that select one component's pods. */}}
{{- define "arbor.selectorLabels" -}}
{{ include "arbor.releaseSelectorLabels" .root }}
app.kubernetes.io/component: {{ .name }}
{{- end -}}

{{/* Labels of one component's objects. */}}
{{- define "arbor.componentLabels" -}}
{{ include "arbor.labels" .root }}
app.kubernetes.io/component: {{ .name }}
{{- end -}}

{{- define "arbor.image" -}}
{{- $image := .root.Values.image -}}
{{- printf "%s/arbor-%s:%s" $image.registry .name (default .root.Chart.AppVersion $image.tag) -}}
{{- end -}}

{{/* Whether a component is deployed: "true" or "". */}}
{{- define "arbor.enabled" -}}
{{- if (index .root.Values .name).enabled -}}true{{- end -}}
{{- end -}}

{{/* The gitsync gRPC address the observer and the webhook dial. */}}
{{- define "arbor.gitsyncAddr" -}}
{{- $override := (index .root.Values .name).gitsyncAddr -}}
{{- if $override -}}
{{- $override -}}
{{- else -}}
{{- printf "https://%s.%s.svc:9090" (include "arbor.componentName" (dict "root" .root "name" "gitsync")) .root.Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/*
Service accounts of Arbor's writers, as the webhook's --arbor-service-accounts: all three,
whether or not this release deploys them, so that drift prevention never refuses a writer
because it was switched on later (a name without an account matches no request).
*/}}
{{- define "arbor.writerServiceAccounts" -}}
{{- $root := .root -}}
{{- $accounts := list -}}
{{- range $name := list "gitsync" "hierarchy" "observer" -}}
{{- $accounts = append $accounts (printf "system:serviceaccount:%s:%s" $root.Release.Namespace (include "arbor.componentName" (dict "root" $root "name" $name))) -}}
{{- end -}}
{{- join "," $accounts -}}
{{- end -}}

{{/* The management label split into key and value, as a YAML map {key: value}. */}}
{{- define "arbor.managementLabelSelector" -}}
{{- $parts := splitn "=" 2 .Values.managementLabel -}}
{{ $parts._0 }}: {{ $parts._1 | quote }}
{{- end -}}

{{/* The hierarchy configuration's ConfigMap, shared by hierarchy and webhook pods. */}}
{{- define "arbor.hierarchyConfigMapName" -}}
{{- printf "%s-config" (include "arbor.componentName" (dict "root" . "name" "hierarchy")) -}}
{{- end -}}

{{/* Secret names. */}}
{{- define "arbor.caSecretName" -}}
{{- printf "%s-ca" (include "arbor.fullname" .) -}}
{{- end -}}
{{- define "arbor.grpcSecretName" -}}
{{- printf "%s-grpc-tls" (include "arbor.componentName" .) -}}
{{- end -}}
{{- define "arbor.operatorSecretName" -}}
{{- printf "%s-operator-tls" (include "arbor.fullname" .) -}}
{{- end -}}
{{- define "arbor.webhookSecretName" -}}
{{- printf "%s-webhook-tls" (include "arbor.fullname" .) -}}
{{- end -}}

{{/* DNS names of a component's Service, the SANs of its certificates. */}}
{{- define "arbor.serviceDNSNames" -}}
{{- $svc := include "arbor.componentName" . -}}
{{- $ns := .root.Release.Namespace -}}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) | toJson -}}
{{- end -}}

{{/*
arbor-hierarchy's configuration file, in Accurate's format. The chart-only "resource" field of
each watch (used for RBAC) is left out of the file.
*/}}
{{- define "arbor.hierarchyConfig" -}}
{{- $config := deepCopy .Values.hierarchy.config -}}
{{- $watches := list -}}
{{- range $watch := $config.watches -}}
{{- $watches = append $watches (omit $watch "resource") -}}
{{- end -}}
{{- $_ := set $config "watches" $watches -}}
{{- toYaml $config -}}
{{- end -}}

{{/* The webhook configuration's clientConfig. Context: the root. */}}
{{- define "arbor.webhookClientConfig" -}}
service:
  name: {{ include "arbor.componentName" (dict "root" . "name" "webhook") }}
  namespace: {{ .Release.Namespace }}
  path: {{ .Values.webhook.path }}
  port: 443
{{- if not .Values.tls.certManager.enabled }}
caBundle: {{ include "arbor.webhookCABundle" . }}
{{- end }}
{{- end }}
{{- define "arbor.webhookNamespaceSelector" -}}
matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values:
      - kube-system
      - {{ .Release.Namespace }}
{{- end }}

{{- /*
The API group SubNamespaces are served in: the kind follows the key domain (Accurate's and
Innu's own groups, as arbor-api's SubNamespaceApi says), arbor.dev otherwise.
*/ -}}
{{- define "arbor.subNamespaceGroup" -}}
{{- if has .Values.domain (list "accurate.cybozu.com" "innu.cybozu.com") -}}
{{ .Values.domain }}
{{- else -}}
arbor.dev
{{- end -}}
{{- end }}
