{{/*
Named templates of the statefs chart.

The statefs.sidecar.* templates are what a TaskManager pod spec includes to
run statefs per pod. Each takes the statefs chart's context: . in this
chart, .Subcharts.statefs in a chart that depends on this one (so that
.Values are statefs's values and the image tag defaults to statefs's
appVersion). Each renders YAML at column 0; include it with nindent:

  metadata:
    labels:
      {{- include "statefs.sidecar.podLabels" .Subcharts.statefs | nindent 6 }}
    annotations:
      {{- include "statefs.sidecar.podAnnotations" .Subcharts.statefs | nindent 6 }}
  spec:
    initContainers:
      {{- include "statefs.sidecar.initContainer" .Subcharts.statefs | nindent 6 }}
    containers:
      - name: taskmanager
        volumeMounts:
          {{- include "statefs.sidecar.taskManagerMount" .Subcharts.statefs | nindent 10 }}
    volumes:
      {{- include "statefs.sidecar.volumes" .Subcharts.statefs | nindent 6 }}
      {{- include "statefs.sidecar.ephemeralStore" .Subcharts.statefs | nindent 6 }}

and Flink's configuration gets statefs.sidecar.flinkConfiguration. A
StatefulSet gives the store with statefs.sidecar.storeClaimTemplate in its
volumeClaimTemplates instead of statefs.sidecar.ephemeralStore.
*/}}

{{/* The statefs image. */}}
{{- define "statefs.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/*
statefs.daemonArgs: the daemon's command line, a YAML list, one flag a line.
Arguments: root (the chart's context), store and mnt (paths in the
container). A value that is empty leaves its flag out, so the daemon's
default holds. --allow-other is always on: in either mode the TaskManager,
which does not run as root, uses the mount that root makes, and the kernel
checks every caller against the modes (default_permissions).
*/}}
{{- define "statefs.daemonArgs" -}}
{{- $v := .root.Values -}}
{{- $args := list -}}
{{- with $v.logFormat }}{{ $args = append $args (printf "--log-format=%s" .) }}{{ end -}}
{{- $args = concat $args (list "mount" (printf "--store=%s" .store)) -}}
{{- $args = append $args "--allow-other" -}}
{{- $args = append $args (printf "--metrics-addr=:%d" (int $v.metricsPort)) -}}
{{- with $v.readCache }}{{ $args = append $args (printf "--read-cache=%s" .) }}{{ end -}}
{{- with $v.memoryLimit }}{{ $args = append $args (printf "--memory-limit=%s" .) }}{{ end -}}
{{- with $v.collector.interval }}{{ $args = append $args (printf "--gc-interval=%s" .) }}{{ end -}}
{{- with $v.collector.grace }}{{ $args = append $args (printf "--gc-grace=%s" .) }}{{ end -}}
{{- range $v.collector.flinkURLs }}{{ $args = append $args (printf "--flink-url=%s" .) }}{{ end -}}
{{- with $v.collector.jobResultStore }}
{{- include "statefs.jobResultStoreIsMounted" $v }}
{{- $args = append $args (printf "--job-result-store=%s" .) }}
{{- end -}}
{{- with $v.collector.unknownAfter }}{{ $args = append $args (printf "--collect-unknown-after=%s" .) }}{{ end -}}
{{- if $v.holdDeletes }}{{ $args = append $args "--hold-deletes" }}{{ end -}}
{{- $args = concat $args $v.extraArgs (list .mnt) -}}
{{- toYaml $args }}
{{- end }}

{{/*
statefs.jobResultStoreIsMounted fails the rendering unless
collector.jobResultStore is inside one of extraVolumeMounts: the daemon
would find no JobResultStore there. Its argument is .Values.
*/}}
{{- define "statefs.jobResultStoreIsMounted" -}}
{{- $jrs := .collector.jobResultStore -}}
{{- $mounted := false -}}
{{- range .extraVolumeMounts }}
{{- $dir := trimSuffix "/" .mountPath -}}
{{- if or (eq $jrs $dir) (hasPrefix (printf "%s/" $dir) $jrs) }}{{ $mounted = true }}{{ end -}}
{{- end }}
{{- if not $mounted }}
{{- fail (printf "collector.jobResultStore %s is on no volume the daemon mounts: add the volume that holds it to extraVolumes, and its mount to extraVolumeMounts" $jrs) }}
{{- end }}
{{- end }}

{{/* The daemon's metrics port: /metrics, /healthz and /readyz. */}}
{{- define "statefs.metricsPort" -}}
- name: metrics
  containerPort: {{ .Values.metricsPort }}
{{- end }}

{{/* Prometheus's Kubernetes pod discovery scrapes the daemon's metrics. */}}
{{- define "statefs.scrapeAnnotations" -}}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .Values.metricsPort | quote }}
prometheus.io/path: /metrics
{{- end }}

{{/*
A probe of the daemon's liveness, /healthz: it fails only when the mount
does not answer, which a restart fixes. The startup probes use it, the
sidecar's liveness probe, and the node daemon's readiness probe. No probe
asks /readyz (the store takes new files too): a restart cannot make a
read-only disk writable, and a node daemon that is not ready may be deleted
before it has handed its connection over (daemonset.yaml).
*/}}
{{- define "statefs.healthz" -}}
httpGet:
  path: /healthz
  port: metrics
{{- end }}

{{/*
statefs.mountServes: a probe that the mount at its argument (a path) serves,
asked through the mount rather than of one pod's daemon: the mount answers a
statfs, which the kernel always sends to the daemon serving it, with FUSE's
magic number (65735546, as stat prints it). It is /healthz's check, made by
stat(1) of the image's Debian.
*/}}
{{- define "statefs.mountServes" -}}
exec:
  command:
    - sh
    - -c
    - 'test "$(stat -f -c %t "$0")" = 65735546'
    - {{ . | quote }}
{{- end }}

{{/* The labels of the node DaemonSet's pods; the PodMonitor selects them. */}}
{{- define "statefs.node.podLabels" -}}
app.kubernetes.io/name: statefs-node
{{- end }}

{{/* The labels of the CSI plugin DaemonSet's pods. */}}
{{- define "statefs.csi.podLabels" -}}
app.kubernetes.io/name: statefs-csi
{{- end }}

{{/*
The label of a pod with the statefs sidecar; the PodMonitor of sidecar mode
selects it.
*/}}
{{- define "statefs.sidecar.podLabels" -}}
statefs.io/sidecar: "true"
{{- end }}

{{- define "statefs.sidecar.podAnnotations" -}}
{{ include "statefs.scrapeAnnotations" . }}
{{- end }}

{{/*
statefs.sidecar.initContainer: statefs as a native sidecar, an init container
with restartPolicy Always (Kubernetes 1.29 or later), a list item.
*/}}
{{- define "statefs.sidecar.initContainer" -}}
{{- $s := .Values.sidecar -}}
# statefs as a native sidecar: it starts before the TaskManager, which waits
# for its startup probe (the mount serves) and its postStart hook; it keeps
# running when the TaskManager's container restarts; and it gets SIGTERM
# only after the TaskManager has exited, so it unmounts last. Privileged:
# mounting needs CAP_SYS_ADMIN, and Kubernetes allows Bidirectional mount
# propagation only in privileged containers.
- name: statefs
  image: {{ include "statefs.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  restartPolicy: Always
  # --allow-other: the TaskManager, which does not run as root, reaches the
  # mount that root makes; permissions are checked from the modes
  # (default_permissions).
  # --hold-deletes: Flink removes an allocation's local state when its
  # slot is freed and local-state roots when it shuts down; held, a
  # restarted TaskManager finds them (README, held deletes).
  args:
    {{- include "statefs.daemonArgs" (dict "root" . "store" $s.storePath "mnt" $s.mountPath) | nindent 4 }}
  {{- with .Values.resources }}
  # The daemon's heap stays under --memory-limit (200 MiB by default);
  # badger's tables come on top, through memory maps.
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    privileged: true
  ports:
    {{- include "statefs.metricsPort" . | nindent 4 }}
  # /healthz: 200 while the mount serves. A store that takes no new files
  # leaves it at 200: a restart cannot fix that, and would cost the
  # TaskManager its open files (statefs_store_writable says so).
  startupProbe:
    {{- include "statefs.healthz" . | nindent 4 }}
    periodSeconds: 2
    timeoutSeconds: 5
    failureThreshold: 300
  livenessProbe:
    {{- include "statefs.healthz" . | nindent 4 }}
    periodSeconds: 10
    timeoutSeconds: 5
    failureThreshold: 3
  # Flink's user owns the mount's root once it serves (the change is
  # stored with the store).
  lifecycle:
    postStart:
      exec:
        command: ["sh", "-c", "until mountpoint -q {{ $s.mountPath }}; do sleep 0.2; done; chown {{ $s.flinkUser }}:{{ $s.flinkUser }} {{ $s.mountPath }}"]
  volumeMounts:
    - name: statefs-store
      mountPath: {{ $s.storePath }}
    # The FUSE mount must reach the host's side of the emptyDir, where the
    # TaskManager's container sees it.
    - name: statefs-mnt
      mountPath: {{ $s.mountPath }}
      mountPropagation: Bidirectional
    - name: statefs-dev-fuse
      mountPath: /dev/fuse
    {{- with .Values.extraVolumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}

{{/*
statefs.sidecar.taskManagerMount: the TaskManager container's mount of the
sidecar's FUSE mount, a list item of its volumeMounts.
*/}}
{{- define "statefs.sidecar.taskManagerMount" -}}
# HostToContainer: the TaskManager sees the mount the sidecar makes there.
- name: statefs-mnt
  mountPath: {{ .Values.sidecar.workingDir }}
  mountPropagation: HostToContainer
{{- end }}

{{/*
statefs.sidecar.volumes: the pod's volumes the sidecar needs besides its
store (extraVolumes among them), list items.
*/}}
{{- define "statefs.sidecar.volumes" -}}
# The mountpoint both containers share.
- name: statefs-mnt
  emptyDir: {}
# The device the FUSE mount talks through.
- name: statefs-dev-fuse
  hostPath:
    path: /dev/fuse
    type: CharDevice
{{- with .Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The store's claim: sidecar.store. */}}
{{- define "statefs.sidecar.storeClaimSpec" -}}
accessModes: ["ReadWriteOnce"]
{{- with .Values.sidecar.store.storageClassName }}
storageClassName: {{ . }}
{{- end }}
resources:
  requests:
    storage: {{ .Values.sidecar.store.size }}
{{- end }}

{{/*
statefs.sidecar.storeClaimTemplate: the store as a StatefulSet's
volumeClaimTemplates item, statefs-store-<pod name>: the disk follows the pod
to any node, and outlives it.
*/}}
{{- define "statefs.sidecar.storeClaimTemplate" -}}
- metadata:
    name: statefs-store
  spec:
    {{- include "statefs.sidecar.storeClaimSpec" . | nindent 4 }}
{{- end }}

{{/*
statefs.sidecar.ephemeralStore: the store as a generic ephemeral volume, a
list item of the pod's volumes, for pods that no StatefulSet makes (the
Flink Kubernetes operator's). Its claim lives as long as the pod, and no
longer.
*/}}
{{- define "statefs.sidecar.ephemeralStore" -}}
# The store lives as long as the pod, and no longer.
- name: statefs-store
  ephemeral:
    volumeClaimTemplate:
      spec:
        {{- include "statefs.sidecar.storeClaimSpec" . | nindent 8 }}
{{- end }}

{{/*
statefs.sidecar.flinkConfiguration: Flink's keys statefs needs (Flink 2's),
`key: value` lines as in Flink's configuration file and FLINK_PROPERTIES:
the working directory is the mount, and local backup and recovery from it
are on. execution.checkpointing.local-backup.dirs stays unset: Flink
deletes that directory on shutdown. A FlinkDeployment's flinkConfiguration
takes strings: fromYaml, then quote each value, as the example does.
*/}}
{{- define "statefs.sidecar.flinkConfiguration" -}}
process.taskmanager.working-dir: {{ .Values.sidecar.workingDir }}
execution.checkpointing.local-backup.enabled: true
execution.state-recovery.from-local: true
{{- end }}
