{{/* Names and labels. */}}
{{- define "citebot.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "citebot.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "citebot.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "citebot.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "citebot.selectorLabels" -}}
app.kubernetes.io/name: {{ include "citebot.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "citebot.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "citebot.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "citebot.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "citebot.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "citebot.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "citebot.embedded" -}}
{{- if not .Values.elasticsearch.url -}}true{{- end -}}
{{- end -}}

{{- define "citebot.hasRedis" -}}
{{- if or .Values.redis.url .Values.redis.existingSecret -}}true{{- end -}}
{{- end -}}

{{- define "citebot.storeClaim" -}}
{{- default (printf "%s-store" (include "citebot.fullname" .)) .Values.store.persistence.existingClaim -}}
{{- end -}}

{{/* How many replicas can run at once: replicaCount, or the HPA's maximum. */}}
{{- define "citebot.maxReplicas" -}}
{{- if .Values.autoscaling.enabled -}}{{ int .Values.autoscaling.maxReplicas }}{{- else -}}{{ int .Values.replicaCount }}{{- end -}}
{{- end -}}

{{/* The chart refuses values that cannot work, with the reason and the fix. */}}
{{- define "citebot.validate" -}}
{{- if not (has .Values.mode (list "http" "socket")) -}}
{{- fail (printf "citebot: mode must be http or socket, not %q" .Values.mode) -}}
{{- end -}}
{{- if not .Values.slack.existingSecret -}}
{{- fail "citebot: slack.existingSecret must name a Secret with the Slack tokens (see values.yaml)" -}}
{{- end -}}
{{- $max := int (include "citebot.maxReplicas" .) -}}
{{- if gt $max 1 -}}
{{- if not (include "citebot.hasRedis" .) -}}
{{- fail (printf "citebot: %d replicas needs redis (redis.url or redis.existingSecret): without it each replica keeps its own dedupe, rate limits and conversations, so Slack's retries get two answers" $max) -}}
{{- end -}}
{{- if include "citebot.embedded" . -}}
{{- fail (printf "citebot: %d replicas needs Elasticsearch (elasticsearch.url): the embedded store lives on one ReadWriteOnce volume" $max) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.autoscaling.enabled (lt (int .Values.autoscaling.maxReplicas) 2) -}}
{{- fail "citebot: autoscaling.maxReplicas must be at least 2 (or turn autoscaling off)" -}}
{{- end -}}
{{- if and (or .Values.ingest.job.enabled .Values.ingest.cronJob.enabled) (not .Values.documents.volume) -}}
{{- fail "citebot: the ingest Job and CronJob read documents.volume; set it (e.g. {persistentVolumeClaim: {claimName: docs}})" -}}
{{- end -}}
{{- if and .Values.elasticsearch.ca.secretName .Values.elasticsearch.ca.configMapName -}}
{{- fail "citebot: set elasticsearch.ca.secretName or elasticsearch.ca.configMapName, not both" -}}
{{- end -}}
{{- end -}}

{{/* Environment shared by the bot and the ingest jobs: settings, secrets. */}}
{{- define "citebot.env" -}}
- name: SLACK_BOT_TOKEN
  valueFrom: {secretKeyRef: {name: {{ .Values.slack.existingSecret }}, key: {{ .Values.slack.botTokenKey }}}}
{{- if eq .Values.mode "http" }}
- name: SLACK_SIGNING_SECRET
  valueFrom: {secretKeyRef: {name: {{ .Values.slack.existingSecret }}, key: {{ .Values.slack.signingSecretKey }}}}
{{- else }}
- name: SLACK_APP_TOKEN
  valueFrom: {secretKeyRef: {name: {{ .Values.slack.existingSecret }}, key: {{ .Values.slack.appTokenKey }}}}
{{- end }}
{{- if .Values.anthropic.existingSecret }}
- name: ANTHROPIC_API_KEY
  valueFrom: {secretKeyRef: {name: {{ .Values.anthropic.existingSecret }}, key: {{ .Values.anthropic.apiKeyKey }}}}
{{- end }}
{{- if and .Values.elasticsearch.url .Values.elasticsearch.existingSecret }}
{{- if .Values.elasticsearch.usernameKey }}
- name: CITEBOT_ES_USERNAME
  valueFrom: {secretKeyRef: {name: {{ .Values.elasticsearch.existingSecret }}, key: {{ .Values.elasticsearch.usernameKey }}}}
- name: CITEBOT_ES_PASSWORD
  valueFrom: {secretKeyRef: {name: {{ .Values.elasticsearch.existingSecret }}, key: {{ .Values.elasticsearch.passwordKey }}}}
{{- else }}
- name: CITEBOT_ES_API_KEY
  valueFrom: {secretKeyRef: {name: {{ .Values.elasticsearch.existingSecret }}, key: {{ .Values.elasticsearch.apiKeyKey }}}}
{{- end }}
{{- end }}
{{- if .Values.redis.existingSecret }}
- name: REDIS_URL
  valueFrom: {secretKeyRef: {name: {{ .Values.redis.existingSecret }}, key: {{ .Values.redis.urlKey }}}}
{{- end }}
{{- end -}}

{{/* Volumes shared by the bot and the ingest jobs. */}}
{{- define "citebot.volumes" -}}
- name: tmp
  emptyDir: {}
- name: home
  emptyDir: {}
{{- if .Values.glossary }}
- name: glossary
  configMap: {name: {{ include "citebot.fullname" . }}-glossary}
{{- end }}
{{- if include "citebot.embedded" . }}
- name: store
{{- if .Values.store.persistence.enabled }}
  persistentVolumeClaim: {claimName: {{ include "citebot.storeClaim" . }}}
{{- else }}
  emptyDir: {}
{{- end }}
{{- end }}
{{- with .Values.elasticsearch.ca }}
{{- if .secretName }}
- name: es-ca
  secret: {secretName: {{ .secretName }}, items: [{key: {{ .key }}, path: ca.pem}]}
{{- else if .configMapName }}
- name: es-ca
  configMap: {name: {{ .configMapName }}, items: [{key: {{ .key }}, path: ca.pem}]}
{{- end }}
{{- end }}
{{- end -}}

{{- define "citebot.volumeMounts" -}}
- {name: tmp, mountPath: /tmp}
- {name: home, mountPath: /home/citebot}
{{- if .Values.glossary }}
- {name: glossary, mountPath: /etc/citebot/glossary, readOnly: true}
{{- end }}
{{- if include "citebot.embedded" . }}
- {name: store, mountPath: /data}
{{- end }}
{{- if or .Values.elasticsearch.ca.secretName .Values.elasticsearch.ca.configMapName }}
- {name: es-ca, mountPath: /etc/citebot/es-ca, readOnly: true}
{{- end }}
{{- end -}}

{{/* The bot's pod labels, for selectors and the ingest Job's affinity. */}}
{{- define "citebot.botLabels" -}}
{{ include "citebot.selectorLabels" . }}
app.kubernetes.io/component: bot
{{- end -}}

{{/* A pod that runs `citebot ingest` (the Job and the CronJob share it). */}}
{{- define "citebot.ingestPod" -}}
metadata:
  labels:
    {{- include "citebot.selectorLabels" . | nindent 4 }}
    app.kubernetes.io/component: ingest
spec:
  restartPolicy: Never
  serviceAccountName: {{ include "citebot.serviceAccountName" . }}
  automountServiceAccountToken: false
  securityContext: {{- toYaml .Values.podSecurityContext | nindent 4 }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets: {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if include "citebot.embedded" . }}
  # The embedded store is a ReadWriteOnce volume in SQLite WAL mode: the ingest pod runs
  # on the bot's node, where both may use it at once (the bot sees the new collection
  # at its next question).
  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels: {{- include "citebot.botLabels" . | nindent 14 }}
  {{- else }}
  {{- with .Values.affinity }}
  affinity: {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector: {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations: {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: ingest
      image: {{ include "citebot.image" . }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args: ["ingest", {{- range $i, $p := .Values.documents.paths }}{{ if $i }},{{ end }} {{ $p | quote }}{{- end }}]
      envFrom:
        - configMapRef: {name: {{ include "citebot.fullname" . }}}
      env: {{- include "citebot.env" . | nindent 8 }}
      securityContext: {{- toYaml .Values.securityContext | nindent 8 }}
      resources: {{- toYaml .Values.ingest.resources | nindent 8 }}
      volumeMounts:
        {{- include "citebot.volumeMounts" . | nindent 8 }}
        - {name: documents, mountPath: {{ .Values.documents.mountPath }}, readOnly: true}
  volumes:
    {{- include "citebot.volumes" . | nindent 4 }}
    - name: documents
      {{- toYaml .Values.documents.volume | nindent 6 }}
{{- end -}}
