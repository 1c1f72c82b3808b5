{{/* The resources of a DaemonSet's container: .Values.resources when set, else the preset. */}}
{{- define "gw.resources" -}}
{{- if .Values.resources -}}
{{ toYaml .Values.resources }}
{{- else if eq .Values.resourcesPreset "demo" -}}
requests:
  cpu: 10m
  memory: 16Mi
limits:
  cpu: 50m
  memory: 32Mi
{{- else if eq .Values.resourcesPreset "s" -}}
requests:
  cpu: 10m
  memory: 64Mi
limits:
  cpu: 50m
  memory: 128Mi
{{- else if eq .Values.resourcesPreset "x10" -}}
requests:
  cpu: 50m
  memory: 256Mi
limits:
  cpu: 500m
  memory: 512Mi
{{- else -}}
{{ fail (printf "resourcesPreset %q: use demo, s or x10, or set resources" .Values.resourcesPreset) }}
{{- end -}}
{{- end -}}

{{/* The flags both DaemonSets share, in deploy/daemonset.yaml's order. */}}
{{- define "gw.commonArgs" -}}
{{- if eq .Values.upstream.mode "kubeconfig" }}
- --kubeconfig=/var/lib/application-grid-wrapper/kubeconfig.conf
{{- else if ne .Values.upstream.mode "in-cluster" }}
{{- fail (printf "upstream.mode %q: use kubeconfig or in-cluster" .Values.upstream.mode) }}
{{- end }}
{{- if .Values.upstream.masters }}
- --master={{ join "," .Values.upstream.masters }}
{{- end }}
- --bind-address={{ .Values.bindAddress }}
- --hostname=$(NODE_NAME)
- --metrics-bind-address={{ .Values.metrics.bindAddress }}
{{- if .Values.cacheDir }}
- --cache-dir={{ .Values.cacheDir }}
{{- end }}
{{- if not .Values.wrapperInCluster }}
- --wrapper-in-cluster=false
{{- end }}
{{- if .Values.tls.enabled }}
- --insecure=false
- --cert-file=/var/lib/grid-wrapper-tls/{{ .Values.tls.certKey }}
- --key-file=/var/lib/grid-wrapper-tls/{{ .Values.tls.keyKey }}
{{- if .Values.tls.clientCA.enabled }}
- --ca-file=/var/lib/grid-wrapper-tls/{{ .Values.tls.clientCA.key }}
{{- end }}
{{- end }}
{{- if .Values.edgeHealth.enabled }}
- --service-autonomy-enhancement=enabled=true,address={{ .Values.edgeHealth.address }},interval={{ .Values.edgeHealth.interval }}
{{- end }}
{{- end -}}

{{/* containerRuntime: the flag, after each DaemonSet's own (as deploy/container-runtime appends it). */}}
{{- define "gw.runtimeArgs" -}}
{{- with .Values.containerRuntime.endpoint }}
- --container-runtime-endpoint={{ . }}
{{- end }}
{{- end -}}

{{/* containerRuntime.endpoint's socket path; fails on anything but unix:///abs or /abs. */}}
{{- define "gw.runtimeSocket" -}}
{{- $e := .Values.containerRuntime.endpoint -}}
{{- $p := trimPrefix "unix://" $e -}}
{{- if or (not (hasPrefix "/" $p)) (contains "://" $p) -}}
{{- fail (printf "containerRuntime.endpoint %q: use unix:///absolute/path/to/the.sock" $e) -}}
{{- end -}}
{{- $p -}}
{{- end -}}

{{/* containerRuntime: the host path mounted (hostPath, else the socket's directory). */}}
{{- define "gw.runtimeHostPath" -}}
{{- .Values.containerRuntime.hostPath | default (dir (include "gw.runtimeSocket" .)) -}}
{{- end -}}

{{/* containerRuntime: the container's mount of the runtime's socket (nothing when off). */}}
{{- define "gw.runtimeMount" -}}
{{- if .Values.containerRuntime.endpoint }}
# readOnly: nothing in it can be created, removed or replaced; connecting to the socket (the
# runtime's whole API) still works (chart README, "Container runtime").
- name: container-runtime
  mountPath: {{ include "gw.runtimeHostPath" . }}
  readOnly: true
{{- end }}
{{- end -}}

{{/* containerRuntime: the pod's supplemental group that may connect (nothing when off). */}}
{{- define "gw.runtimeGroups" -}}
{{- if and .Values.containerRuntime.endpoint (not (kindIs "invalid" .Values.containerRuntime.socketGroup)) }}
# The runtime's socket is group-writable (root:root 0660): connecting needs that group.
supplementalGroups: [{{ .Values.containerRuntime.socketGroup }}]
{{- end }}
{{- end -}}

{{/* containerRuntime: the hostPath volume (nothing when off). */}}
{{- define "gw.runtimeVolume" -}}
{{- if .Values.containerRuntime.endpoint }}
{{- $path := include "gw.runtimeHostPath" . }}
- name: container-runtime
  hostPath:
    path: {{ $path }}
    type: {{ eq $path (include "gw.runtimeSocket" .) | ternary "Socket" "Directory" }}
{{- end }}
{{- end -}}

{{/* NODE_NAME always; NODE_IP when an address uses it (or the relay). */}}
{{- define "gw.env" -}}
- name: NODE_NAME
  valueFrom:
    fieldRef:
      apiVersion: v1
      fieldPath: spec.nodeName
{{- if or .relay (contains "$(NODE_IP)" .root.Values.metrics.bindAddress) (contains "$(NODE_IP)" .root.Values.bindAddress) }}
- name: NODE_IP
  valueFrom:
    fieldRef:
      apiVersion: v1
      fieldPath: status.hostIP
{{- end }}
{{- end -}}

{{/* The probes on the metrics address. */}}
{{- define "gw.probes" -}}
livenessProbe:
  httpGet:
    {{- with .Values.metrics.probeHost }}
    host: {{ . }}
    {{- end }}
    port: {{ .Values.metrics.port }}
    path: /livez
    scheme: HTTP
  initialDelaySeconds: 5
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 3
readinessProbe:
  httpGet:
    {{- with .Values.metrics.probeHost }}
    host: {{ . }}
    {{- end }}
    port: {{ .Values.metrics.port }}
    path: /readyz
    scheme: HTTP
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 3
{{- end -}}

{{- define "gw.containerSecurityContext" -}}
privileged: false
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop: ["ALL"]
{{- end -}}

{{- define "gw.initContainers" -}}
{{- if .Values.cacheDir }}
initContainers:
  - name: cache-dir-owner
    image: {{ .Values.initImage }}
    command: ["sh", "-c", "chown 65532:65532 {{ .Values.cacheDir }} && chmod 0700 {{ .Values.cacheDir }}"]
    securityContext:
      runAsNonRoot: false
      runAsUser: 0
      allowPrivilegeEscalation: false
      capabilities:
        drop: ["ALL"]
        add: ["CHOWN", "FOWNER"]
    volumeMounts:
      - name: cache
        mountPath: {{ .Values.cacheDir }}
{{- end }}
{{- end -}}

{{- define "gw.podAnnotations" -}}
{{- $a := deepCopy .Values.podAnnotations -}}
{{- if .Values.monitoring.scrapeAnnotations -}}
{{- $_ := set $a "prometheus.io/scrape" "true" -}}
{{- $_ := set $a "prometheus.io/port" (toString .Values.metrics.port) -}}
{{- $_ := set $a "prometheus.io/path" "/metrics" -}}
{{- end -}}
{{- with $a }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "gw.imagePullSecrets" -}}
{{- with .Values.image.pullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
