{{/*
RBAC building blocks shared by the components' rbac-*.yaml. Each component gets its own
ServiceAccount, a ClusterRole with exactly what it needs cluster-wide, and a Role in the
release namespace for its leader-election Lease (leases are never granted cluster-wide).
Context of each helper: dict "root" $ "name" <component>.
*/}}

{{/* Rule: record Kubernetes Events on the objects a component reconciles. */}}
{{- define "arbor.rbac.eventRules" -}}
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- end -}}

{{/* Binds the component's ClusterRole to its ServiceAccount. */}}
{{- define "arbor.rbac.clusterRoleBinding" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ include "arbor.componentName" . }}
  labels:
    {{- include "arbor.componentLabels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ include "arbor.componentName" . }}
subjects:
  - kind: ServiceAccount
    name: {{ include "arbor.componentName" . }}
    namespace: {{ .root.Release.Namespace }}
{{- end -}}

{{/* A Role and its RoleBinding for the component in a namespace. Extra key: "namespace", "rules". */}}
{{- define "arbor.rbac.namespacedRole" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .roleName }}
  namespace: {{ .namespace }}
  labels:
    {{- include "arbor.componentLabels" . | nindent 4 }}
rules:
  {{- .rules | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ .roleName }}
  namespace: {{ .namespace }}
  labels:
    {{- include "arbor.componentLabels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ .roleName }}
subjects:
  - kind: ServiceAccount
    name: {{ include "arbor.componentName" . }}
    namespace: {{ .root.Release.Namespace }}
{{- end -}}

{{/* The leader-election Lease Role, when the component elects a leader. It covers the shard
Leases too (list to see every replica's, delete to give a shard up). */}}
{{- define "arbor.rbac.leaseRole" -}}
{{- if (index .root.Values .name).leaderElection -}}
{{- $rules := `- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, list, watch, create, update, patch, delete]` -}}
{{- include "arbor.rbac.namespacedRole" (merge (dict "roleName" (printf "%s-leader-election" (include "arbor.componentName" .)) "namespace" .root.Release.Namespace "rules" $rules) .) -}}
{{- end -}}
{{- end -}}
