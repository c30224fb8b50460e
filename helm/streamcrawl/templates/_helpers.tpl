{{/* Names ---------------------------------------------------------------------------------- */}}

{{- define "streamcrawl.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-wide prefix; DNS labels are at most 63 characters. */}}
{{- define "streamcrawl.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* StatefulSet pod names append "-<ordinal>" and a controller-revision label: stay short. */}}
{{- define "streamcrawl.worker.fullname" -}}
{{- printf "%s-worker" (include "streamcrawl.fullname" .) | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{- define "streamcrawl.warc.fullname" -}}
{{- printf "%s-warc" (include "streamcrawl.fullname" .) | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{- define "streamcrawl.renderWorker.fullname" -}}
{{- printf "%s-render-worker" (include "streamcrawl.fullname" .) | trunc 52 | trimSuffix "-" -}}
{{- end -}}

{{- define "streamcrawl.config.fullname" -}}
{{- printf "%s-config" (include "streamcrawl.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "streamcrawl.admin.fullname" -}}
{{- printf "%s-admin" (include "streamcrawl.fullname" .) | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "streamcrawl.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "streamcrawl.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Labels ------------------------------------------------------------------------------- */}}

{{- define "streamcrawl.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "streamcrawl.selectorLabels" -}}
app.kubernetes.io/name: {{ include "streamcrawl.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "streamcrawl.labels" -}}
helm.sh/chart: {{ include "streamcrawl.chart" . }}
{{ include "streamcrawl.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: streamcrawl
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "streamcrawl.worker.selectorLabels" -}}
{{ include "streamcrawl.selectorLabels" . }}
app.kubernetes.io/component: worker
{{- end -}}

{{- define "streamcrawl.worker.labels" -}}
{{ include "streamcrawl.labels" . }}
app.kubernetes.io/component: worker
{{- end -}}

{{- define "streamcrawl.warc.selectorLabels" -}}
{{ include "streamcrawl.selectorLabels" . }}
app.kubernetes.io/component: warc
{{- end -}}

{{- define "streamcrawl.warc.labels" -}}
{{ include "streamcrawl.labels" . }}
app.kubernetes.io/component: warc
{{- end -}}

{{- define "streamcrawl.renderWorker.selectorLabels" -}}
{{ include "streamcrawl.selectorLabels" . }}
app.kubernetes.io/component: render-worker
{{- end -}}

{{- define "streamcrawl.renderWorker.labels" -}}
{{ include "streamcrawl.labels" . }}
app.kubernetes.io/component: render-worker
{{- end -}}

{{- define "streamcrawl.admin.labels" -}}
{{ include "streamcrawl.labels" . }}
app.kubernetes.io/component: admin
{{- end -}}

{{/* Image -------------------------------------------------------------------------------- */}}

{{- define "streamcrawl.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The render workers' image: renderWorker.image where set, else the chart's. */}}
{{- define "streamcrawl.renderWorker.image" -}}
{{- $r := .Values.renderWorker.image -}}
{{- if or $r.repository $r.tag -}}
{{- printf "%s:%s" (default .Values.image.repository $r.repository) (default (default .Chart.AppVersion .Values.image.tag) $r.tag) -}}
{{- else -}}
{{- include "streamcrawl.image" . -}}
{{- end -}}
{{- end -}}

{{/* Settings ----------------------------------------------------------------------------- */}}

{{/*
Non-secret settings as a map of STREAMCRAWL_* name -> string. Rendered as the worker ConfigMap
and inline into the hook Jobs (pre-install hooks run before the release's ConfigMap exists).
Every name here must be one that streamcrawl.topology.settings.Settings reads (tests/helm checks it).
*/}}
{{- define "streamcrawl.settings" -}}
{{- $k := .Values.kafka -}}
{{- $c := .Values.cassandra -}}
{{- $w := .Values.worker -}}
{{- $s := dict
  "STREAMCRAWL_KAFKA_BOOTSTRAP" $k.bootstrap
  "STREAMCRAWL_KAFKA_SECURITY_PROTOCOL" $k.securityProtocol
  "STREAMCRAWL_TOPIC_PREFIX" $k.topicPrefix
  "STREAMCRAWL_PARTITIONS" (toString (int $k.partitions))
  "STREAMCRAWL_REPLICATION_FACTOR" (toString (int $k.replicationFactor))
  "STREAMCRAWL_MIN_INSYNC_REPLICAS" (toString (int $k.minInsyncReplicas))
  "STREAMCRAWL_KAFKA_ACKS" (toString $k.acks)
  "STREAMCRAWL_KAFKA_IDEMPOTENCE" (toString $k.idempotence)
  "STREAMCRAWL_MAX_MESSAGE_BYTES" (toString (int $k.maxMessageBytes))
  "STREAMCRAWL_STANDBY_REPLICAS" (toString (int $w.standbyReplicas))
  "STREAMCRAWL_CASSANDRA_HOSTS" $c.hosts
  "STREAMCRAWL_CASSANDRA_KEYSPACE" $c.keyspace
  "STREAMCRAWL_CASSANDRA_REPLICATION" $c.replication
  "STREAMCRAWL_CASSANDRA_WRITE_CONSISTENCY" $c.writeConsistency
  "STREAMCRAWL_CASSANDRA_READ_CONSISTENCY" $c.readConsistency
  "STREAMCRAWL_STATE_DIR" "/var/lib/streamcrawl"
  "STREAMCRAWL_WEB_HOST" "0.0.0.0"
  "STREAMCRAWL_WEB_PORT" (toString (int $w.webPort))
  "STREAMCRAWL_CONCURRENCY" (toString (int $w.concurrency))
  "STREAMCRAWL_SINK_CONCURRENCY" (toString (int $w.sinkConcurrency))
  "STREAMCRAWL_MAX_ORIGINS_IN_MEMORY" (toString (int $w.maxOriginsInMemory))
  "STREAMCRAWL_TABLE_MEMORY_MB" (toString (int $w.tableMemoryMb))
  "STREAMCRAWL_SINK_ENABLED" (toString $w.sinkEnabled)
  "STREAMCRAWL_FETCH_ENABLED" (toString $w.fetchEnabled)
  "STREAMCRAWL_LOG_LEVEL" $w.logLevel
  "STREAMCRAWL_UNREADY_AFTER_S" (toString $w.unreadyAfterS)
  "STREAMCRAWL_ALLOW_NETWORKS" (join "," $w.allowNetworks)
-}}
{{- with $k.sasl.mechanism }}{{ $_ := set $s "STREAMCRAWL_KAFKA_SASL_MECHANISM" . }}{{ end -}}
{{- with $k.sasl.username }}{{ $_ := set $s "STREAMCRAWL_KAFKA_SASL_USERNAME" . }}{{ end -}}
{{- if and $k.tls.caSecret (include "streamcrawl.kafkaTLS" .) -}}
{{- $_ := set $s "STREAMCRAWL_KAFKA_SSL_CAFILE" (printf "/etc/streamcrawl/kafka-ca/%s" $k.tls.caKey) -}}
{{- end -}}
{{- with $c.localDC }}{{ $_ := set $s "STREAMCRAWL_CASSANDRA_LOCAL_DC" . }}{{ end -}}
{{- if $c.tls.enabled -}}
{{- $_ := set $s "STREAMCRAWL_CASSANDRA_SSL" "true" -}}
{{- with $c.tls.caSecret }}{{ $_ := set $s "STREAMCRAWL_CASSANDRA_SSL_CAFILE" (printf "/etc/streamcrawl/cassandra-ca/%s" $c.tls.caKey) }}{{ end -}}
{{- end -}}
{{- with $w.proxy -}}
{{- with .url }}{{ $_ := set $s "STREAMCRAWL_PROXY" . }}{{ end -}}
{{- with .noProxyFor }}{{ $_ := set $s "STREAMCRAWL_NO_PROXY_FOR" (join "," .) }}{{ end -}}
{{- with .credential }}{{ $_ := set $s "STREAMCRAWL_PROXY_CREDENTIAL" . }}{{ end -}}
{{- end -}}
{{- with .Values.seedDefaults -}}
{{- with .recrawlAfter }}{{ $_ := set $s "STREAMCRAWL_SEED_RECRAWL_AFTER" . }}{{ end -}}
{{- with .recrawlMin }}{{ $_ := set $s "STREAMCRAWL_SEED_RECRAWL_MIN" . }}{{ end -}}
{{- with .recrawlMax }}{{ $_ := set $s "STREAMCRAWL_SEED_RECRAWL_MAX" . }}{{ end -}}
{{- with .recrawlMode }}{{ $_ := set $s "STREAMCRAWL_SEED_RECRAWL_MODE" . }}{{ end -}}
{{- with .keepVersions }}{{ $_ := set $s "STREAMCRAWL_SEED_KEEP_VERSIONS" (toString (int .)) }}{{ end -}}
{{- if .warc }}{{ $_ := set $s "STREAMCRAWL_SEED_WARC" "true" }}{{ end -}}
{{- end -}}
{{- toYaml $s -}}
{{- end -}}

{{/* "true" when the Kafka protocol uses TLS. */}}
{{- define "streamcrawl.kafkaTLS" -}}
{{- if has .Values.kafka.securityProtocol (list "SSL" "SASL_SSL") }}true{{ end -}}
{{- end -}}

{{/* Settings as inline env entries (hook Jobs). */}}
{{- define "streamcrawl.settingsEnv" -}}
{{- range $name, $value := include "streamcrawl.settings" . | fromYaml }}
- name: {{ $name }}
  value: {{ $value | toString | quote }}
{{- end }}
{{- end -}}

{{/* Credentials, always from existing Secrets, plus the user's extra env. */}}
{{- define "streamcrawl.secretEnv" -}}
{{- $sasl := .Values.kafka.sasl -}}
{{- if and $sasl.existingSecret (not $sasl.username) $sasl.usernameKey }}
- name: STREAMCRAWL_KAFKA_SASL_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ $sasl.existingSecret }}
      key: {{ $sasl.usernameKey }}
{{- end }}
{{- if $sasl.existingSecret }}
- name: STREAMCRAWL_KAFKA_SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ $sasl.existingSecret }}
      key: {{ $sasl.passwordKey }}
{{- end }}
{{- with .Values.cassandra.auth }}
{{- if .existingSecret }}
- name: STREAMCRAWL_CASSANDRA_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ .existingSecret }}
      key: {{ .usernameKey }}
- name: STREAMCRAWL_CASSANDRA_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .existingSecret }}
      key: {{ .passwordKey }}
{{- end }}
{{- end }}
{{- with .Values.worker.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Volumes every streamcrawl container needs: /tmp (HOME), and the Kafka and Cassandra CAs
when their TLS is on. */}}
{{- define "streamcrawl.commonVolumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.worker.tmpSizeLimit }}
{{- include "streamcrawl.caVolumes" . }}
{{- end -}}

{{/* The Kafka and Cassandra CA volumes, when their TLS is on. */}}
{{- define "streamcrawl.caVolumes" -}}
{{- if and .Values.kafka.tls.caSecret (include "streamcrawl.kafkaTLS" .) }}
- name: kafka-ca
  secret:
    secretName: {{ .Values.kafka.tls.caSecret }}
    items:
      - key: {{ .Values.kafka.tls.caKey }}
        path: {{ .Values.kafka.tls.caKey }}
{{- end }}
{{- with .Values.cassandra.tls }}
{{- if and .enabled .caSecret }}
- name: cassandra-ca
  secret:
    secretName: {{ .caSecret }}
    items:
      - key: {{ .caKey }}
        path: {{ .caKey }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "streamcrawl.commonVolumeMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if and .Values.kafka.tls.caSecret (include "streamcrawl.kafkaTLS" .) }}
- name: kafka-ca
  mountPath: /etc/streamcrawl/kafka-ca
  readOnly: true
{{- end }}
{{- if and .Values.cassandra.tls.enabled .Values.cassandra.tls.caSecret }}
- name: cassandra-ca
  mountPath: /etc/streamcrawl/cassandra-ca
  readOnly: true
{{- end }}
{{- end -}}

{{/* Where the worker pods mount worker.credentials.secretName (STREAMCRAWL_CREDENTIALS_DIR).
Only the workers send requests: the hooks and the WARC writer do not get the credentials. */}}
{{- define "streamcrawl.credentialsDir" -}}
/var/run/streamcrawl/credentials
{{- end -}}

{{/* The port of worker.proxy.url (80 when it names none, as the worker reads it). */}}
{{- define "streamcrawl.proxyPort" -}}
{{- $port := regexFind ":[0-9]+/?$" .Values.worker.proxy.url | trimPrefix ":" | trimSuffix "/" -}}
{{- default "80" $port -}}
{{- end -}}

{{/* The distinct ports of a "host:port,host:port" list, as NetworkPolicy TCP ports. */}}
{{- define "streamcrawl.endpointPorts" -}}
{{- $ports := list -}}
{{- range splitList "," . -}}
{{- $port := regexFind "[0-9]+$" (trim .) -}}
{{- if and $port (regexMatch ":[0-9]+$" (trim .)) -}}{{- $ports = append $ports $port -}}{{- end -}}
{{- end -}}
{{- range uniq $ports }}
- protocol: TCP
  port: {{ . }}
{{- end -}}
{{- end -}}

{{/* Validation: cross-field rules values.schema.json cannot express. ------------------- */}}

{{- define "streamcrawl.validate" -}}
{{- $partitions := int .Values.kafka.partitions -}}
{{- $a := .Values.autoscaling -}}
{{- if and (not $a.enabled) (gt (int .Values.worker.replicas) $partitions) -}}
{{- fail (printf "worker.replicas (%d) must not exceed kafka.partitions (%d): a worker beyond the partition count gets no partition and sits idle. Lower worker.replicas or raise the partition count first (docs/kubernetes.md, \"Scale by partitions\")." (int .Values.worker.replicas) $partitions) -}}
{{- end -}}
{{- if and .Values.warc.enabled (gt (int .Values.warc.replicas) $partitions) -}}
{{- fail (printf "warc.replicas (%d) must not exceed kafka.partitions (%d): a WARC writer beyond the partition count gets no partition and sits idle." (int .Values.warc.replicas) $partitions) -}}
{{- end -}}
{{- $r := .Values.renderWorker -}}
{{- if $r.enabled -}}
{{- if and (not $r.autoscaling.enabled) (gt (int $r.replicas) $partitions) -}}
{{- fail (printf "renderWorker.replicas (%d) must not exceed kafka.partitions (%d): the render topic has that many partitions, and a render worker beyond them gets none and sits idle." (int $r.replicas) $partitions) -}}
{{- end -}}
{{- if and $r.autoscaling.enabled (gt (int $r.autoscaling.maxReplicas) $partitions) -}}
{{- fail (printf "renderWorker.autoscaling.maxReplicas (%d) must not exceed kafka.partitions (%d): the render topic has that many partitions, and a render worker beyond them gets none and sits idle." (int $r.autoscaling.maxReplicas) $partitions) -}}
{{- end -}}
{{- if and $r.autoscaling.enabled (gt (int $r.autoscaling.minReplicas) (int $r.autoscaling.maxReplicas)) -}}
{{- fail (printf "renderWorker.autoscaling.minReplicas (%d) must not exceed renderWorker.autoscaling.maxReplicas (%d)." (int $r.autoscaling.minReplicas) (int $r.autoscaling.maxReplicas)) -}}
{{- end -}}
{{- end -}}
{{- if $a.enabled -}}
{{- if gt (int $a.maxReplicas) $partitions -}}
{{- fail (printf "autoscaling.maxReplicas (%d) must not exceed kafka.partitions (%d): a worker beyond the partition count gets no partition and sits idle. Lower autoscaling.maxReplicas or raise the partition count first (docs/kubernetes.md, \"Scale by partitions\")." (int $a.maxReplicas) $partitions) -}}
{{- end -}}
{{- if gt (int $a.minReplicas) (int $a.maxReplicas) -}}
{{- fail (printf "autoscaling.minReplicas (%d) must not exceed autoscaling.maxReplicas (%d)." (int $a.minReplicas) (int $a.maxReplicas)) -}}
{{- end -}}
{{- end -}}
{{- $sasl := .Values.kafka.sasl -}}
{{- if hasPrefix "SASL_" .Values.kafka.securityProtocol -}}
{{- if not $sasl.mechanism -}}
{{- fail (printf "kafka.securityProtocol is %s: set kafka.sasl.mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)." .Values.kafka.securityProtocol) -}}
{{- end -}}
{{- if not $sasl.existingSecret -}}
{{- fail (printf "kafka.securityProtocol is %s: set kafka.sasl.existingSecret to the Secret holding the SASL password (the chart never takes passwords as values)." .Values.kafka.securityProtocol) -}}
{{- end -}}
{{- if not (or $sasl.username $sasl.usernameKey) -}}
{{- fail "SASL needs a user name: set kafka.sasl.username, or kafka.sasl.usernameKey to read it from kafka.sasl.existingSecret." -}}
{{- end -}}
{{- else if or $sasl.mechanism $sasl.existingSecret -}}
{{- fail (printf "kafka.sasl.* is set but kafka.securityProtocol is %s: use SASL_PLAINTEXT or SASL_SSL, or clear kafka.sasl." .Values.kafka.securityProtocol) -}}
{{- end -}}
{{- if and .Values.kafka.tls.caSecret (not (include "streamcrawl.kafkaTLS" .)) -}}
{{- fail (printf "kafka.tls.caSecret is set but kafka.securityProtocol is %s: use SSL or SASL_SSL, or clear kafka.tls.caSecret." .Values.kafka.securityProtocol) -}}
{{- end -}}
{{- $k := .Values.kafka -}}
{{- if gt (int $k.minInsyncReplicas) (int $k.replicationFactor) -}}
{{- fail (printf "kafka.minInsyncReplicas (%d) must not exceed kafka.replicationFactor (%d): every acks=all write would be refused." (int $k.minInsyncReplicas) (int $k.replicationFactor)) -}}
{{- end -}}
{{- if and $k.idempotence (ne (toString $k.acks) "all") -}}
{{- fail (printf "kafka.idempotence needs kafka.acks \"all\": set kafka.idempotence=false to use acks %s." (toString $k.acks)) -}}
{{- end -}}
{{- if and .Values.cassandra.tls.caSecret (not .Values.cassandra.tls.enabled) -}}
{{- fail "cassandra.tls.caSecret is set but cassandra.tls.enabled is false: enable TLS, or clear cassandra.tls.caSecret." -}}
{{- end -}}
{{- $proxy := .Values.worker.proxy -}}
{{- if $proxy.url -}}
{{- $port := int (include "streamcrawl.proxyPort" .) -}}
{{- if or (lt $port 1) (gt $port 65535) -}}
{{- fail (printf "worker.proxy.url %s: the port must be 1-65535." $proxy.url) -}}
{{- end -}}
{{- else if or $proxy.noProxyFor $proxy.credential -}}
{{- fail "worker.proxy.noProxyFor and worker.proxy.credential need worker.proxy.url: set the proxy, or clear them." -}}
{{- end -}}
{{- if and $proxy.credential (not .Values.worker.credentials.secretName) -}}
{{- fail (printf "worker.proxy.credential %s is read from the Secret worker.credentials.secretName: set it to the Secret that holds the key %s (the chart never takes a credential as a value)." $proxy.credential $proxy.credential) -}}
{{- end -}}
{{- end -}}

{{/* NetworkPolicy egress rules of the pods that fetch (the workers, the render workers): DNS,
Kafka, Cassandra (when "cassandra" is true), the egress proxy, and public addresses plus
worker.allowNetworks. Called with (dict "root" $ "cassandra" BOOL). */}}
{{- define "streamcrawl.egress" -}}
{{- $root := .root -}}
{{- $np := $root.Values.networkPolicy -}}
- to:
    {{- toYaml $np.dns | nindent 4 }}
  ports:
    - protocol: UDP
      port: 53
    - protocol: TCP
      port: 53
- to:
    {{- toYaml $np.kafka | nindent 4 }}
  ports:
    {{- include "streamcrawl.endpointPorts" $root.Values.kafka.bootstrap | trim | nindent 4 }}
{{- if .cassandra }}
- to:
    {{- toYaml $np.cassandra | nindent 4 }}
  ports:
    {{- include "streamcrawl.endpointPorts" $root.Values.cassandra.hosts | trim | nindent 4 }}
{{- end }}
{{- if $root.Values.worker.proxy.url }}
# The egress proxy; whatever it forwards to is its own egress rules' to allow.
- to:
    {{- toYaml $np.proxy | nindent 4 }}
  ports:
    - protocol: TCP
      port: {{ include "streamcrawl.proxyPort" $root }}
{{- end }}
# The public Internet, any port: the special-purpose ranges the SSRF guard refuses are
# excepted (NAT64 is not: the guard judges it by the IPv4 address inside).
- to:
    - ipBlock:
        cidr: 0.0.0.0/0
        except:
          {{- toYaml $np.privateIPv4 | nindent 10 }}
    - ipBlock:
        cidr: ::/0
        except:
          {{- toYaml $np.privateIPv6 | nindent 10 }}
    {{- range $root.Values.worker.allowNetworks }}
    - ipBlock:
        cidr: {{ . | quote }}
    {{- end }}
{{- end -}}
