{{/* The chart's name, or nameOverride: the app.kubernetes.io/name label. */}}
{{- define "llmdiag.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The objects' name: fullnameOverride, else the release's name, with the chart's added unless it holds it. */}}
{{- define "llmdiag.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := include "llmdiag.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The labels the Deployment, Service, ServiceMonitor, NetworkPolicy and PodDisruptionBudget select the pods by: the kustomize base's. */}}
{{- define "llmdiag.selectorLabels" -}}
app.kubernetes.io/name: {{ include "llmdiag.name" . }}
{{- end }}

{{/* Every object's labels: the selector labels and Helm's standard ones. */}}
{{- define "llmdiag.labels" -}}
{{ include "llmdiag.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The ServiceAccount the pod runs as. */}}
{{- define "llmdiag.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "llmdiag.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}
