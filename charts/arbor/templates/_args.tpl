{{/*
Command-line arguments of each component. Every flag here is one the binary accepts; values
come from values.yaml so that the components that must agree (gitsync and the webhook on the
ownership modes, everyone on the domain and the management label) read one source.
Context of each helper: dict "root" $ "name" <component>.
*/}}

{{/* Flags every controller takes: admin and gRPC listeners, logging, mutual TLS, leases. */}}
{{- define "arbor.args.common" -}}
{{- $values := index .root.Values .name -}}
- --admin-addr
- 0.0.0.0:8080
- --grpc-addr
- 0.0.0.0:9090
- --log-level
- {{ .root.Values.log.level }}
- --log-format
- {{ .root.Values.log.format }}
- --tls-cert
- /etc/arbor/tls/tls.crt
- --tls-key
- /etc/arbor/tls/tls.key
- --tls-client-ca
- /etc/arbor/tls/ca.crt
- --leader-election
- {{ $values.leaderElection | quote }}
- --lease-name
- {{ include "arbor.componentName" . }}
{{- end -}}

{{- define "arbor.args.gitsync" -}}
{{- $root := .root -}}
- --gittrack-mode
- {{ $root.Values.ownership.gitTrackMode }}
- --clustergittrack-mode
- {{ $root.Values.ownership.clusterGitTrackMode }}
{{- with $root.Values.ownership.namespace }}
- --namespace
- {{ . }}
{{- end }}
- --max-prune-fraction
- {{ $root.Values.gitsync.maxPruneFraction | quote }}
- --resync-period
- {{ $root.Values.gitsync.resyncPeriod }}
- --management-label
- {{ $root.Values.managementLabel }}
- --cache-dir
- /var/cache/arbor
{{- end -}}

{{- define "arbor.args.hierarchy" -}}
- --domain
- {{ .root.Values.domain }}
- --config
- /etc/arbor/hierarchy/config.yaml
{{- end -}}

{{- define "arbor.args.observer" -}}
- --gitsync-addr
- {{ include "arbor.gitsyncAddr" . }}
- --management-label
- {{ .root.Values.managementLabel }}
- --drift-kinds
- {{ include "arbor.driftKinds" . }}
{{- end -}}

{{/* observer.driftKinds as --drift-kinds wants them: group/version/Kind, version/Kind for core. */}}
{{- define "arbor.driftKinds" -}}
{{- $kinds := list -}}
{{- range .root.Values.observer.driftKinds -}}
{{- $apiVersion := .version -}}
{{- if .group -}}{{- $apiVersion = printf "%s/%s" .group .version -}}{{- end -}}
{{- $kinds = append $kinds (printf "%s/%s" $apiVersion .kind) -}}
{{- end -}}
{{- join "," $kinds -}}
{{- end -}}

{{- define "arbor.args.webhook" -}}
{{- $root := .root -}}
- --webhook-addr
- 0.0.0.0:9443
- --webhook-cert
- /etc/arbor/webhook-tls/tls.crt
- --webhook-key
- /etc/arbor/webhook-tls/tls.key
- --clustergittrack-mode
- {{ $root.Values.ownership.clusterGitTrackMode }}
- --gittrack-mode
- {{ $root.Values.ownership.gitTrackMode }}
- --domain
- {{ $root.Values.domain }}
- --allow-cascading-deletion
- {{ $root.Values.webhook.allowCascadingDeletion | quote }}
- --prevent-drift
- {{ $root.Values.webhook.preventDrift | quote }}
- --gitsync-addr
- {{ include "arbor.gitsyncAddr" . }}
{{- with include "arbor.writerServiceAccounts" . }}
- --arbor-service-accounts
- {{ . }}
{{- end }}
{{- end -}}
