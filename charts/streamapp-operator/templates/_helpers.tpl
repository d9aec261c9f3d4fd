{{/* Names, labels and pod placement shared by the templates. */}}

{{- define "streamapp-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "streamapp-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Objects outside the release namespace (cluster-scoped, or in watched namespaces) carry the release
namespace in their name, so two releases of the same name in different namespaces do not collide. */}}
{{- define "streamapp-operator.globalName" -}}
{{- printf "%s-%s" .Release.Namespace (include "streamapp-operator.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "streamapp-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "streamapp-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "streamapp-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "streamapp-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: streamapp
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* name, namespace and labels of an object named after the release in its namespace. */}}
{{- define "streamapp-operator.metadata" -}}
name: {{ include "streamapp-operator.fullname" . }}
namespace: {{ .Release.Namespace }}
labels:
  {{- include "streamapp-operator.labels" . | nindent 2 }}
{{- end }}

{{- define "streamapp-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "streamapp-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "streamapp-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Scheduling and pull settings shared by the operator pods and the CRD Job. */}}
{{- define "streamapp-operator.podPlacement" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end }}
