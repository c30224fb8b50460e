# Kafka for scripts/services.sh (sourced): KRaft nodes that are each broker and controller.
#
# The single node lives in $STATE/kafka on 127.0.0.1. The nodes of a cluster live in
# $STATE/kafka-N, node N on 127.0.0.N (Linux routes all of 127/8 to lo, as Cassandra's ccm
# relies on), with the same broker and controller ports on every address; node N has node.id N
# and all of them vote in the controller quorum. A node's folder holds its config, data, logs,
# PID, endpoint and `jvm` (its heap flags, one a line; absent for the single node: 512 MiB).

kafka_jars() { echo "$JARS/kafka-$KAFKA_VERSION-log4j-$LOG4J_VERSION"; }

write_kafka_config() {  # dir port controller-port: the single node
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
    write_kafka_log4j "$dir"
}

# Node N of a cluster of `size`. Replicated by default (RF 3, min.insync.replicas 2, the
# internal topics too), so that one node down loses nothing and blocks no acks=all write. A
# killed or paused broker is fenced after broker.session.timeout.ms (6 s; Kafka's default is
# 9 s) and a follower that stops fetching leaves the ISR after replica.lag.time.max.ms (10 s;
# default 30 s): fault tests wait seconds, not tens of seconds.
write_kafka_cluster_config() {  # dir node size port controller-port
    local dir=$1 n=$2 size=$3 port=$4 ctrl=$5 voters="" i
    for ((i = 1; i <= size; i++)); do voters+="${voters:+,}$i@127.0.0.$i:$ctrl"; done
    cat >"$dir/server.properties" <<EOF
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.$n:$port,CONTROLLER://127.0.0.$n:$ctrl
advertised.listeners=PLAINTEXT://127.0.0.$n:$port
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$dir/data
num.partitions=1
auto.create.topics.enable=false
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
offsets.topic.num.partitions=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=3
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=4
broker.heartbeat.interval.ms=1000
broker.session.timeout.ms=6000
replica.lag.time.max.ms=10000
EOF
    write_kafka_log4j "$dir"
}

write_kafka_log4j() {  # dir
    local dir=$1
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

# Formats the node's data folder for cluster `id`; on failure prints the tail of its log.
format_kafka() {  # dir cluster-id [storage-tool-arg...]
    local dir=$1 id=$2
    shift 2
    "$JAVA" -Djava.awt.headless=true -Dlog4j2.configurationFile="$dir/log4j2.properties" \
        -cp "$(kafka_jars)/*" kafka.tools.StorageTool format -t "$id" \
        -c "$dir/server.properties" "$@" >"$dir/format.log" 2>&1 ||
        { tail -n 30 "$dir/format.log" >&2 && return 1; }
}

launch_kafka() {  # port controller-port: the single node, new data
    local dir=$STATE/kafka
    resolve_kafka_jars
    rm -rf "$dir"
    mkdir -p "$dir/data"
    write_kafka_config "$dir" "$1" "$2"
    local scram=()
    if ((SECURE)); then
        ensure_tls
        mapfile -t scram < <(kafka_scram_users "$dir")
        write_kafka_secure_config "$dir" "$1"
        touch "$dir/secure"
    fi
    write_kafka_client_env "$dir" "$1" "$SECURE"
    format_kafka "$dir" "$(new_cluster_id)" "${scram[@]}" || die "kafka: formatting $dir/data failed"
    echo "127.0.0.1:$1" >"$dir/endpoint"
    run_kafka kafka
}

launch_kafka_cluster() {  # size port controller-port: nodes kafka-1..size, new data
    local size=$1 port=$2 ctrl=$3 id i dir pids=() pid bootstrap=""
    resolve_kafka_jars
    id=$(new_cluster_id)
    for ((i = 1; i <= size; i++)); do bootstrap+="${bootstrap:+,}127.0.0.$i:$port"; done
    for ((i = 1; i <= size; i++)); do
        dir=$STATE/kafka-$i
        rm -rf "$dir"
        mkdir -p "$dir/data"
        write_kafka_cluster_config "$dir" "$i" "$size" "$port" "$ctrl"
        printf '%s\n' -Xms384m -Xmx384m >"$dir/jvm"
        echo "127.0.0.$i:$port" >"$dir/endpoint"
        echo "export STREAMCRAWL_KAFKA_BOOTSTRAP=$bootstrap" | write_private "$dir/client.env"
        format_kafka "$dir" "$id" &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do
        wait "$pid" || die "kafka: formatting a node's data failed (format.log in $STATE/kafka-*/)"
    done
    for ((i = 1; i <= size; i++)); do run_kafka "kafka-$i"; done
}

resolve_kafka_jars() {
    resolve_jars kafka "$HERE/kafka-pom.xml" "$(kafka_jars)" \
        -Dkafka.version="$KAFKA_VERSION" -Dlog4j.version="$LOG4J_VERSION"
}

run_kafka() {  # node: the broker of $STATE/<node>, from its config and data as they are
    local node=$1 dir=$STATE/$1 heap=(-Xms512m -Xmx512m)
    [[ -f $dir/jvm ]] && mapfile -t heap <"$dir/jvm"
    nohup "$JAVA" "${heap[@]}" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
        -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
        -Dlog4j2.configurationFile="$dir/log4j2.properties" -cp "$(kafka_jars)/*" \
        kafka.Kafka "$dir/server.properties" </dev/null >>"$dir/stdout.log" 2>&1 9>&- &
    echo $! >"$dir/pid"
    now_ms >"$dir/launched_ms"
    STARTED+=("$node")
}
