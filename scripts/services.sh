#!/usr/bin/env bash
# Single-node Kafka 4 (KRaft) and Cassandra 5.0 on 127.0.0.1 for development, tests and CI,
# without Docker: the jars come from Maven Central through `mvn`, the configs are written here.
#
#   scripts/services.sh start [--secure] [kafka] [cassandra]
#                                   start (default: both), wait until they serve
#   scripts/services.sh stop [kafka] [cassandra]
#                                   stop what `start` started (default: both; recorded PIDs);
#                                   the data stays until the next `start`
#   scripts/services.sh resume [kafka] [cassandra]
#                                   start a stopped service again on its ports with its data
#                                   (fault tests: a broker or database outage mid-crawl)
#   scripts/services.sh status      up/down and endpoint of each; exit 3 if down
#
# After `start`, `source .services/env` exports STREAMCRAWL_KAFKA_BOOTSTRAP and
# STREAMCRAWL_CASSANDRA_HOSTS. With --secure Kafka serves SASL_SSL (SCRAM-SHA-512) and Cassandra
# asks for a password over TLS, from a CA made in the state folder (_services/secure.sh); the
# env file then also holds the credentials and the CA path (it is readable by its owner only).
# Environment (all optional):
#   STREAMCRAWL_SERVICES_DIR    state folder: configs, data, logs, PIDs, env (default: .services)
#   STREAMCRAWL_SERVICES_SECURE 1: as --secure
#   STREAMCRAWL_KAFKA_PORT      fixed Kafka port; STREAMCRAWL_CASSANDRA_PORT fixed CQL port
#                               (default: free ports picked at start)
#   STREAMCRAWL_KAFKA_VERSION (4.1.1), STREAMCRAWL_LOG4J_VERSION (2.24.3),
#   STREAMCRAWL_CASSANDRA_VERSION (5.0.6)
#   STREAMCRAWL_JARS_DIR        jar cache (default: ~/.cache/streamcrawl/jars)
#   STREAMCRAWL_MVN_ARGS        extra mvn arguments, e.g. -Dmaven.repo.local=/tmp/m2
#   STREAMCRAWL_START_TIMEOUT   seconds to wait for each service (default: 180)
#   STREAMCRAWL_STOP_GRACE      seconds between SIGTERM and SIGKILL (default: 30)
#   PYTHON                      python for the readiness probes; needs confluent-kafka and
#                               cassandra-driver (default: $VIRTUAL_ENV/bin/python, else the
#                               repository's .venv/bin/python, else python3)
#   JAVA_HOME                   a JDK 17 (default: java on PATH, else /usr/lib/jvm/*17*)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HERE=$ROOT/scripts/_services
# shellcheck source=_services/common.sh
source "$HERE/common.sh"
# shellcheck source=_services/secure.sh
source "$HERE/secure.sh"

STATE=${STREAMCRAWL_SERVICES_DIR:-$ROOT/.services}
KAFKA_VERSION=${STREAMCRAWL_KAFKA_VERSION:-4.1.1}
LOG4J_VERSION=${STREAMCRAWL_LOG4J_VERSION:-2.24.3}
CASSANDRA_VERSION=${STREAMCRAWL_CASSANDRA_VERSION:-5.0.6}
JARS=${STREAMCRAWL_JARS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/streamcrawl/jars}
START_TIMEOUT=${STREAMCRAWL_START_TIMEOUT:-180}
STOP_GRACE=${STREAMCRAWL_STOP_GRACE:-30}
PYTHON=$(default_python)
SERVICES=(kafka cassandra)
declare -A ENV_NAMES=([kafka]=STREAMCRAWL_KAFKA_BOOTSTRAP [cassandra]=STREAMCRAWL_CASSANDRA_HOSTS)
STARTED=()   # services launched by this invocation: stopped again if the start fails
SECURE=${STREAMCRAWL_SERVICES_SECURE:-0}

say() { echo "services.sh: $*" >&2; }

die() {
    say "$*"
    if ((${#STARTED[@]})); then
        say "stopping what this start launched: ${STARTED[*]}"
        stop_services "${STARTED[@]}" || true
    fi
    exit 1
}

now_ms() { date +%s%3N; }

pid_of() { [[ -f $STATE/$1/pid ]] && cat "$STATE/$1/pid"; }

# True if the PID is alive AND is the JVM we started from this state folder (not a reused PID).
is_ours() {
    local pid=$1 name=$2 args
    args=$(ps -o args= -p "$pid" 2>/dev/null) || return 1
    [[ $args == *"$STATE/$name/"* ]]
}

running() {
    local pid
    pid=$(pid_of "$1") && is_ours "$pid" "$1"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ---------------------------------------------------------------------------------------------
# Jars: resolved once per version with mvn (cached in ~/.m2), copied to $JARS/<name>-<version>.

resolve_jars() {  # name pom-file dest -Dversion...
    local name=$1 pom=$2 dest=$3 tmp
    shift 3
    [[ -f $dest/.complete ]] && return 0
    command -v mvn >/dev/null ||
        die "Maven (mvn) not found: it is needed once to fetch the $name jars (apt-get install maven)"
    mkdir -p "$JARS"
    rm -rf "$dest"
    tmp=$(mktemp -d "$JARS/.$name.XXXXXX")
    cp "$pom" "$tmp/pom.xml"
    say "$name: resolving jars with mvn into $dest (once per version)"
    local t0=$SECONDS
    # shellcheck disable=SC2086  # STREAMCRAWL_MVN_ARGS is a list of words
    if ! (cd "$tmp" && mvn -B -q ${STREAMCRAWL_MVN_ARGS:-} "$@" \
        org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$tmp/jars" >"$tmp/mvn.log" 2>&1); then
        tail -n 30 "$tmp/mvn.log" >&2
        rm -rf "$tmp"
        die "$name: mvn could not resolve the jars (last lines of its output above)"
    fi
    say "$name: jars resolved in $((SECONDS - t0))s"
    touch "$tmp/jars/.complete"
    # Another start may have won the race: keep its copy.
    mv -T "$tmp/jars" "$dest" 2>/dev/null || true
    rm -rf "$tmp"
}

# ---------------------------------------------------------------------------------------------
# Kafka: one KRaft node that is both broker and controller.

write_kafka_config() {  # dir port controller-port
    local dir=$1 port=$2 ctrl=$3
    cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$ctrl
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$ctrl
advertised.listeners=PLAINTEXT://127.0.0.1:$port
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$dir/data
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
EOF
    cat >"$dir/log4j2.properties" <<EOF
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = $dir/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.state.name = state.change.logger
logger.state.level = WARN
EOF
}

launch_kafka() {  # port controller-port
    local dir=$STATE/kafka jars=$JARS/kafka-$KAFKA_VERSION-log4j-$LOG4J_VERSION cluster_id
    resolve_jars kafka "$HERE/kafka-pom.xml" "$jars" \
        -Dkafka.version="$KAFKA_VERSION" -Dlog4j.version="$LOG4J_VERSION"
    rm -rf "$dir"
    mkdir -p "$dir/data"
    write_kafka_config "$dir" "$1" "$2"
    local jvm=(-Djava.awt.headless=true -Dlog4j2.configurationFile="$dir/log4j2.properties"
        -cp "$jars/*") scram=()
    if ((SECURE)); then
        ensure_tls
        mapfile -t scram < <(kafka_scram_users "$dir")
        write_kafka_secure_config "$dir" "$1"
        touch "$dir/secure"
    fi
    write_kafka_client_env "$dir" "$1" "$SECURE"
    cluster_id=$(new_cluster_id)
    "$JAVA" "${jvm[@]}" kafka.tools.StorageTool format -t "$cluster_id" \
        -c "$dir/server.properties" "${scram[@]}" >"$dir/format.log" 2>&1 ||
        { tail -n 30 "$dir/format.log" >&2; die "kafka: formatting $dir/data failed"; }
    echo "127.0.0.1:$1" >"$dir/endpoint"
    run_kafka
}

run_kafka() {  # the broker of $STATE/kafka, from its config and data as they are
    local dir=$STATE/kafka jars=$JARS/kafka-$KAFKA_VERSION-log4j-$LOG4J_VERSION
    nohup "$JAVA" -Xms512m -Xmx512m -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
        -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
        -Dlog4j2.configurationFile="$dir/log4j2.properties" -cp "$jars/*" \
        kafka.Kafka "$dir/server.properties" </dev/null >>"$dir/stdout.log" 2>&1 9>&- &
    echo $! >"$dir/pid"
    now_ms >"$dir/launched_ms"
    STARTED+=(kafka)
}

# ---------------------------------------------------------------------------------------------
# Cassandra: one node, throwaway settings.

write_cassandra_config() {  # dir cql-port storage-port
    local dir=$1 port=$2 storage=$3
    cat >"$dir/cassandra.yaml" <<EOF
cluster_name: streamcrawl-dev
num_tokens: 1
initial_token: 0
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "127.0.0.1:$storage"
listen_address: 127.0.0.1
rpc_address: 127.0.0.1
storage_port: $storage
native_transport_port: $port
start_native_transport: true
commitlog_sync: periodic
commitlog_sync_period: 10000ms
data_file_directories:
  - $dir/data/data
commitlog_directory: $dir/data/commitlog
saved_caches_directory: $dir/data/saved_caches
hints_directory: $dir/data/hints
cdc_raw_directory: $dir/data/cdc_raw
auto_snapshot: false
concurrent_reads: 4
concurrent_writes: 4
concurrent_counter_writes: 2
concurrent_materialized_view_writes: 2
concurrent_compactors: 1
memtable_flush_writers: 1
EOF
    cat >"$dir/logback.xml" <<EOF
<configuration scan="false">
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>$dir/system.log</file>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
EOF
}

# Module flags Cassandra 5.0 needs on Java 17 (its conf/jvm17-server.options, "JPMS" section).
CASSANDRA_JVM17=(
    -Djdk.attach.allowAttachSelf=true
    --add-exports java.base/jdk.internal.misc=ALL-UNNAMED
    --add-exports java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED
    --add-exports java.rmi/sun.rmi.registry=ALL-UNNAMED
    --add-exports java.rmi/sun.rmi.server=ALL-UNNAMED
    --add-exports java.sql/java.sql=ALL-UNNAMED
    --add-exports java.base/java.lang.ref=ALL-UNNAMED
    --add-exports jdk.unsupported/sun.misc=ALL-UNNAMED
    --add-exports jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED
    --add-exports jdk.attach/sun.tools.attach=ALL-UNNAMED
    --add-opens java.base/java.lang.module=ALL-UNNAMED
    --add-opens java.base/jdk.internal.loader=ALL-UNNAMED
    --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
    --add-opens java.base/jdk.internal.reflect=ALL-UNNAMED
    --add-opens java.base/jdk.internal.math=ALL-UNNAMED
    --add-opens java.base/jdk.internal.module=ALL-UNNAMED
    --add-opens java.base/jdk.internal.util.jar=ALL-UNNAMED
    --add-opens jdk.management/com.sun.management.internal=ALL-UNNAMED
    --add-opens java.base/sun.nio.ch=ALL-UNNAMED
    --add-opens java.base/java.io=ALL-UNNAMED
    --add-opens java.base/java.lang.reflect=ALL-UNNAMED
    --add-opens jdk.compiler/com.sun.tools.javac=ALL-UNNAMED
    --add-opens java.base/java.lang=ALL-UNNAMED
    --add-opens java.base/java.util=ALL-UNNAMED
    -Dio.netty.tryReflectionSetAccessible=true
)

launch_cassandra() {  # cql-port storage-port
    local dir=$STATE/cassandra jars=$JARS/cassandra-$CASSANDRA_VERSION jamm
    resolve_jars cassandra "$HERE/cassandra-pom.xml" "$jars" -Dcassandra.version="$CASSANDRA_VERSION"
    rm -rf "$dir"
    mkdir -p "$dir/data"
    write_cassandra_config "$dir" "$1" "$2"
    local secure_jvm=()
    if ((SECURE)); then
        ensure_tls
        write_cassandra_secure_config "$dir"
        touch "$dir/secure"
        # The default superuser is created at once instead of 10 s after start.
        secure_jvm=(-Dcassandra.superuser_setup_delay_ms=0)
    fi
    write_cassandra_client_env "$dir" "$1" "$SECURE"
    echo "127.0.0.1:$1" >"$dir/endpoint"
    run_cassandra "${secure_jvm[@]}"
}

run_cassandra() {  # [jvm-flag...]: the node of $STATE/cassandra, from its config and data
    local dir=$STATE/cassandra jars=$JARS/cassandra-$CASSANDRA_VERSION jamm
    jamm=$(compgen -G "$jars/jamm-*.jar" | head -n 1 || true)
    [[ -n $jamm ]] || die "cassandra: no jamm jar in $jars"
    # No JMX port (cassandra.jmx.local.port unset): nothing here needs nodetool.
    nohup "$JAVA" -Xms1G -Xmx1G -Xss256k -XX:+UseG1GC -XX:+ParallelRefProcEnabled \
        -XX:MaxTenuringThreshold=1 -XX:+ExitOnOutOfMemoryError -Djava.net.preferIPv4Stack=true \
        "${CASSANDRA_JVM17[@]}" "$@" -javaagent:"$jamm" \
        -Dcassandra-foreground=yes \
        -Dcassandra.config="file://$dir/cassandra.yaml" \
        -Dcassandra.storagedir="$dir/data" \
        -Dcassandra.logdir="$dir" \
        -Dlogback.configurationFile="$dir/logback.xml" \
        -Dcassandra.skip_wait_for_gossip_to_settle=0 \
        -Dcassandra.load_ring_state=false \
        -Dcassandra.unsafesystem=true \
        -cp "$jars/*" org.apache.cassandra.service.CassandraDaemon \
        </dev/null >>"$dir/stdout.log" 2>&1 9>&- &
    echo $! >"$dir/pid"
    now_ms >"$dir/launched_ms"
    STARTED+=(cassandra)
}

# ---------------------------------------------------------------------------------------------

log_of() { [[ $1 == kafka ]] && echo "$STATE/kafka/server.log" || echo "$STATE/cassandra/system.log"; }

died() {  # name pid
    local log
    log=$(log_of "$1")
    say "$1 (pid $2) exited during start; last 30 lines of $log and of its stdout:"
    [[ -f $log ]] && tail -n 30 "$log" >&2
    [[ -s $STATE/$1/stdout.log ]] && tail -n 30 "$STATE/$1/stdout.log" >&2
    die "$1 died during start (full logs in $STATE/$1/)"
}

wait_ready() {  # name
    local name=$1 pid endpoint deadline rc=0 t0
    pid=$(pid_of "$name")
    endpoint=$(<"$STATE/$name/endpoint")
    t0=$(<"$STATE/$name/launched_ms")
    deadline=$((SECONDS + START_TIMEOUT))
    until port_open "${endpoint##*:}"; do
        kill -0 "$pid" 2>/dev/null || died "$name" "$pid"
        ((SECONDS < deadline)) || die "$name: not listening on $endpoint after ${START_TIMEOUT}s (logs in $STATE/$name/)"
        sleep 0.25
    done
    if [[ $name == cassandra && -f $STATE/cassandra/secure ]]; then
        setup_cassandra_roles "$STATE/cassandra" "$endpoint" "$((deadline - SECONDS))" || rc=$?
    fi
    # The probe connects as a client would: with the exports of client.env (credentials, CA).
    ((rc != 0)) || (
        set -a
        # shellcheck disable=SC1091
        source "$STATE/$name/client.env"
        exec "$PYTHON" "$HERE/probe.py" "$name" "$endpoint" "$((deadline - SECONDS))"
    ) || rc=$?
    if ((rc == 2)); then
        die "$PYTHON cannot probe $name: set PYTHON to the project's venv python (pip install -e '.[test]')"
    elif ((rc != 0)); then
        kill -0 "$pid" 2>/dev/null || died "$name" "$pid"
        die "$name: not serving on $endpoint after ${START_TIMEOUT}s (logs in $STATE/$name/)"
    fi
    # Seconds from launching the JVM, as measured here: the probe adds up to ~1 s.
    say "$name: ready at $endpoint ($(mode_of "$name")), $(((($(now_ms) - t0) + 500) / 1000))s after launch (pid $pid, log $(log_of "$name"))"
}

mode_of() {  # name
    if [[ ! -f $STATE/$1/secure ]]; then
        echo plaintext
    elif [[ $1 == kafka ]]; then
        echo "SASL_SSL, SCRAM-SHA-512"
    else
        echo "TLS, PasswordAuthenticator"
    fi
}

# The env file: each running service's client.env (the endpoint, and with --secure the
# credentials and CA), owner-readable only.
write_env() {
    local tmp=$STATE/env.tmp name
    (umask 077 && : >"$tmp")
    for name in "${SERVICES[@]}"; do
        running "$name" || continue
        if [[ -f $STATE/$name/client.env ]]; then
            cat "$STATE/$name/client.env" >>"$tmp"
        else  # started by an older services.sh
            echo "export ${ENV_NAMES[$name]}=$(<"$STATE/$name/endpoint")" >>"$tmp"
        fi
    done
    mv "$tmp" "$STATE/env"
}

check_port() {  # variable-name
    local port=${!1}
    [[ $port =~ ^[0-9]+$ ]] || die "$1=$port is not a port number"
    "$PYTHON" "$HERE/probe.py" port-free "$port" || die "port 127.0.0.1:$port ($1) is already in use"
}

cmd_start() {
    local wanted=() name t0 ports is_secure
    for name in "$@"; do
        if [[ $name == --secure ]]; then SECURE=1; else wanted+=("$name"); fi
    done
    [[ $SECURE == 0 || $SECURE == 1 ]] || die "STREAMCRAWL_SERVICES_SECURE=$SECURE: use 0 or 1"
    ((${#wanted[@]})) || wanted=("${SERVICES[@]}")
    check_names "${wanted[@]}"
    JAVA=$(find_java17) ||
        die "Java 17 not found (java on PATH: $(java_major java 2>/dev/null || echo none)); install openjdk-17-jdk-headless or set JAVA_HOME to a JDK 17"
    command -v "$PYTHON" >/dev/null || die "python '$PYTHON' not found: set PYTHON"
    [[ -n ${STREAMCRAWL_KAFKA_PORT:-} ]] && check_port STREAMCRAWL_KAFKA_PORT
    [[ -n ${STREAMCRAWL_CASSANDRA_PORT:-} ]] && check_port STREAMCRAWL_CASSANDRA_PORT
    read -r -a ports < <("$PYTHON" "$HERE/probe.py" free-ports 4)

    t0=$(now_ms)
    local launched=()
    for name in "${wanted[@]}"; do
        if running "$name"; then
            [[ -f $STATE/$name/secure ]] && is_secure=1 || is_secure=0
            ((is_secure == SECURE)) || die "$name already runs $(mode_of "$name") in $STATE: stop it first (or use another STREAMCRAWL_SERVICES_DIR)"
            say "$name: already running at $(<"$STATE/$name/endpoint") ($(mode_of "$name"), pid $(pid_of "$name"))"
            continue
        fi
        case $name in
            kafka) launch_kafka "${STREAMCRAWL_KAFKA_PORT:-${ports[0]}}" "${ports[1]}" ;;
            cassandra) launch_cassandra "${STREAMCRAWL_CASSANDRA_PORT:-${ports[2]}}" "${ports[3]}" ;;
        esac
        launched+=("$name")
    done
    await_launched "${launched[@]}"
    ((${#launched[@]} == 0)) || say "started ${launched[*]} in $(((($(now_ms) - t0) + 500) / 1000))s"
    say "endpoints in $STATE/env (source it); stop with: STREAMCRAWL_SERVICES_DIR=$STATE $0 stop"
}

await_launched() {  # name...: wait until each serves, then write the env file
    local name
    for name in "$@"; do
        wait_ready "$name"
    done
    write_env
}

check_names() {  # name...
    local name
    for name in "$@"; do
        [[ $name == kafka || $name == cassandra ]] || die "unknown service '$name' (kafka, cassandra)"
    done
}

stop_services() {
    local name pid pids=() names=() deadline
    for name in "$@"; do
        if pid=$(pid_of "$name") && is_ours "$pid" "$name"; then
            kill -TERM "$pid" 2>/dev/null || true
            pids+=("$pid")
            names+=("$name")
        elif [[ -f $STATE/$name/pid ]]; then
            say "$name: not running (stale pid file removed)"
        fi
        rm -f "$STATE/$name/pid"
    done
    deadline=$((SECONDS + STOP_GRACE))
    for i in "${!pids[@]}"; do
        while kill -0 "${pids[$i]}" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
        if kill -0 "${pids[$i]}" 2>/dev/null; then
            say "${names[$i]}: still running after ${STOP_GRACE}s, sending SIGKILL"
            kill -KILL "${pids[$i]}" 2>/dev/null || true
        fi
        say "${names[$i]}: stopped (pid ${pids[$i]})"
    done
}

cmd_stop() {  # [kafka] [cassandra]: those only, their data kept for `resume`
    local name wanted=("$@")
    ((${#wanted[@]})) || wanted=("${SERVICES[@]}")
    check_names "${wanted[@]}"
    stop_services "${wanted[@]}"
    ((${#wanted[@]} < ${#SERVICES[@]})) || rm -f "$STATE/env"
}

cmd_resume() {  # [kafka] [cassandra]: start again with the ports, config and data they had
    local name wanted=("$@") launched=()
    ((${#wanted[@]})) || wanted=("${SERVICES[@]}")
    check_names "${wanted[@]}"
    JAVA=$(find_java17) || die "Java 17 not found: set JAVA_HOME to a JDK 17"
    for name in "${wanted[@]}"; do
        [[ -f $STATE/$name/endpoint ]] || die "$name was never started in $STATE: use start"
        if running "$name"; then
            say "$name: already running at $(<"$STATE/$name/endpoint")"
            continue
        fi
        [[ -f $STATE/$name/secure ]] && SECURE=1
        case $name in
            kafka) run_kafka ;;
            cassandra) run_cassandra ;;
        esac
        launched+=("$name")
    done
    await_launched "${launched[@]}"
    ((${#launched[@]} == 0)) || say "resumed ${launched[*]}"
}

cmd_status() {
    local name rc=0
    for name in "${SERVICES[@]}"; do
        if running "$name" && port_open "$(cut -d: -f2 "$STATE/$name/endpoint")"; then
            echo "$name: up at $(<"$STATE/$name/endpoint") ($(mode_of "$name"), pid $(pid_of "$name"))"
        elif running "$name"; then
            echo "$name: starting (pid $(pid_of "$name"), not listening yet)"
            rc=3
        else
            echo "$name: down"
            rc=3
        fi
    done
    return $rc
}

main() {
    local cmd=${1:-}
    shift || true
    mkdir -p "$STATE"
    STATE=$(cd "$STATE" && pwd)
    case $cmd in
        start | stop | resume)
            # One start/stop/resume at a time per state folder.
            exec 9>"$STATE/.lock"
            flock -w "$((START_TIMEOUT + STOP_GRACE))" 9 ||
                die "another services.sh start/stop holds $STATE/.lock"
            "cmd_$cmd" "$@"
            ;;
        status) cmd_status ;;
        *)
            sed -n '2,/^# After/p' "$0" | sed '$d' >&2
            exit 64
            ;;
    esac
}

main "$@"
