{{/* Names: RELEASE-podscope unless the release is already called podscope. */}}
{{- define "podscope.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "podscope.coordinator" -}}{{ include "podscope.fullname" . }}-coordinator{{- end -}}
{{- define "podscope.agent" -}}{{ include "podscope.fullname" . }}-agent{{- end -}}
{{/* The headless Service that gives each shard its stable name. */}}
{{- define "podscope.shards" -}}{{ include "podscope.fullname" . }}-shards{{- end -}}

{{- define "podscope.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "podscope.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "podscope.image" -}}
{{- $image := index .root.Values.image .component -}}
{{- $tag := default .root.Chart.AppVersion $image.tag -}}
{{- if .root.Values.image.registry -}}
{{- printf "%s/%s:%s" .root.Values.image.registry $image.repository $tag -}}
{{- else -}}
{{- printf "%s:%s" $image.repository $tag -}}
{{- end -}}
{{- end -}}

{{- define "podscope.scheme" -}}{{ if .Values.tls.enabled }}https{{ else }}http{{ end }}{{- end -}}

{{/* The shards: one member per StatefulSet replica, by its stable DNS name. */}}
{{- define "podscope.members" -}}
{{- $root := . -}}
{{- $members := list -}}
{{- range $i := until (int .Values.coordinator.replicas) -}}
{{- $name := printf "%s-%d" (include "podscope.coordinator" $root) $i -}}
{{- $host := printf "%s.%s.%s.svc" $name (include "podscope.shards" $root) $root.Release.Namespace -}}
{{- $members = append $members (dict "name" $name "rest" (printf "%s://%s:%d" (include "podscope.scheme" $root) $host (int $root.Values.coordinator.ports.rest)) "grpc" (printf "%s:%d" $host (int $root.Values.coordinator.ports.grpc))) -}}
{{- end -}}
{{- dict "members" $members | toPrettyJson -}}
{{- end -}}

{{- define "podscope.coordinatorConfig" -}}
{{- $v := .Values -}}
{{- $config := dict
  "http" (printf "0.0.0.0:%d" (int $v.coordinator.ports.rest))
  "grpc" (printf "0.0.0.0:%d" (int $v.coordinator.ports.grpc))
  "retention" (dict "max_age_hours" $v.coordinator.retention.maxAgeHours "max_total_bytes" $v.coordinator.retention.maxTotalBytes)
  "notify" (dict "alertmanagers" $v.coordinator.notify.alertmanagers "webhooks" $v.coordinator.notify.webhooks)
  "shards" (dict "members_file" "/etc/podscope/shards/shards.json" "forward" $v.coordinator.forward)
-}}
{{- if $v.coordinator.notify.externalUrl -}}
{{- $_ := set $config.notify "external_url" $v.coordinator.notify.externalUrl -}}
{{- end -}}
{{- if $v.tls.enabled -}}
{{- $_ := set $config "tls" (dict "cert" "/etc/podscope/tls/tls.crt" "key" "/etc/podscope/tls/tls.key" "ca" "/etc/podscope/tls/ca.crt") -}}
{{- $_ := set $config "auth" (dict "tokens_file" "/etc/podscope/auth/tokens" "open_metrics" $v.auth.openMetrics) -}}
{{- else -}}
{{- $_ := set $config "insecure" true -}}
{{- end -}}
{{- mustMergeOverwrite $config (deepCopy $v.coordinator.config) | toPrettyJson -}}
{{- end -}}

{{- define "podscope.agentConfig" -}}
{{- $v := .Values -}}
{{- $config := dict
  "coordinator" (printf "%s:%d" (include "podscope.coordinator" .) (int $v.coordinator.ports.grpc))
  "probe_socket" (printf "%s/agent.sock" $v.agent.socketDir)
  "proc_root" "/host/proc"
  "watch" (dict "enabled" $v.agent.watch)
  "max_spool_bytes" $v.agent.maxSpoolBytes
  "probe_allowed_uids" $v.agent.probeAllowedUids
  "health" (printf "0.0.0.0:%d" (int $v.agent.healthPort))
-}}
{{- if $v.tls.enabled -}}
{{- $_ := set $config "tls" (dict "ca" "/etc/podscope/agent-tls/ca.crt") -}}
{{- else -}}
{{- $_ := set $config "insecure" true -}}
{{- end -}}
{{- mustMergeOverwrite $config (deepCopy $v.agent.config) | toPrettyJson -}}
{{- end -}}
