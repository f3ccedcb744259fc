{{/*
Command-line arguments of each component. Every flag here is one the binary accepts; values
come from values.yaml so that the components that must agree (gitsync and the webhook on the
ownership modes, everyone on the domain and the management label) read one source.
Context of each helper: dict "root" $ "name" <component>.
*/}}

{{/*
Flags every component takes: admin and gRPC listeners, logging, mutual TLS; and leases, for
the controllers only: every webhook replica answers admission requests, none is elected.
*/}}
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
{{- with .root.Values.listeners }}
- --max-connections
- {{ .maxConnections | quote }}
- --tls-handshake-timeout
- {{ .tlsHandshakeTimeout }}
- --idle-timeout
- {{ .idleTimeout }}
- --http2-keepalive-interval
- {{ .http2KeepaliveInterval }}
- --http2-keepalive-timeout
- {{ .http2KeepaliveTimeout }}
{{- end }}
{{- include "arbor.args.grpcAllow" . }}
{{- if ne .name "webhook" }}
- --leader-election
- {{ $values.leaderElection | quote }}
- --lease-name
- {{ include "arbor.componentName" . }}
{{- end }}
{{- if has .name (list "gitsync" "observer") }}
- --shards
- {{ $values.shards | quote }}
{{- end }}
{{- if eq .name "gitsync" }}
{{- /* With shards, a replica passes a request about another replica's shard to that replica,
at the pod IP it writes on its membership Lease, verified against the Service's certificate. */}}
- --grpc-advertise-address
- https://$(POD_IP):9090
- --grpc-advertise-server-name
- {{ printf "%s.%s.svc" (include "arbor.componentName" .) .root.Release.Namespace }}
{{- end }}
{{- end -}}

{{/*
--grpc-allow of one component (see values grpcAuthorization): on gitsync, the observer
reports drift and the webhook reads declared state, each by its gRPC certificate's Service
name (a SAN of that certificate); the operators call everything else everywhere.
*/}}
{{- define "arbor.args.grpcAllow" -}}
{{- $authz := .root.Values.grpcAuthorization -}}
{{- if $authz.enabled }}
{{- if eq .name "gitsync" }}
{{- /* gitsync itself: its replicas pass each other the requests they receive (see --shards) */}}
{{- $gitsync := include "arbor.componentName" . }}
- --grpc-allow
- SyncService/ReportDrift={{ include "arbor.componentName" (dict "root" .root "name" "observer") }},{{ $gitsync }}
- --grpc-allow
- SyncService/GetDeclared={{ include "arbor.componentName" (dict "root" .root "name" "webhook") }},{{ $gitsync }}
- --grpc-allow
- {{ printf "*=%s,%s" (join "," $authz.operators) $gitsync | quote }}
{{- else }}
- --grpc-allow
- {{ printf "*=%s" (join "," $authz.operators) | quote }}
{{- end }}
{{- end }}
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
- --prune-window
- {{ $root.Values.gitsync.pruneWindow }}
- --resync-period
- {{ $root.Values.gitsync.resyncPeriod }}
- --max-concurrent-writes
- {{ $root.Values.gitsync.maxConcurrentWrites | quote }}
- --management-label
- {{ $root.Values.managementLabel }}
- --cache-dir
- /var/cache/arbor
{{- with $root.Values.gitsync.defaultServiceAccount }}
- --default-service-account
- {{ . }}
{{- end }}
{{- if $root.Values.gitsync.requireServiceAccount }}
- --require-service-account
{{- end }}
{{- end -}}

{{/* Where the hierarchy configuration ConfigMap is mounted in hierarchy and webhook pods. */}}
{{- define "arbor.hierarchyConfigPath" -}}
/etc/arbor/hierarchy/config.yaml
{{- end -}}

{{- define "arbor.args.hierarchy" -}}
- --domain
- {{ .root.Values.domain }}
- --config
- {{ include "arbor.hierarchyConfigPath" . }}
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

{{- /*
The webhook judges what gitsync and hierarchy do, so it gets their settings: the ownership
modes and namespace (gitsync's), the management label (gitsync's and the observer's), the
domain and the hierarchy configuration file with its naming policies (hierarchy's).
*/ -}}
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
{{- with $root.Values.ownership.namespace }}
- --namespace
- {{ . }}
{{- end }}
- --domain
- {{ $root.Values.domain }}
- --management-label
- {{ $root.Values.managementLabel }}
- --hierarchy-config
- {{ include "arbor.hierarchyConfigPath" . }}
- --allow-cascading-deletion
- {{ $root.Values.webhook.allowCascadingDeletion | quote }}
- --prevent-drift
- {{ $root.Values.webhook.preventDrift | quote }}
- --drift-unreachable
- {{ $root.Values.webhook.driftUnreachable }}
- --gitsync-addr
- {{ include "arbor.gitsyncAddr" . }}
{{- if $root.Values.webhook.preventDrift }}
- --arbor-service-accounts
- {{ include "arbor.writerServiceAccounts" . }}
{{- end }}
{{- end -}}
