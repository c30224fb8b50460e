# Cassandra for scripts/services.sh (sourced): throwaway nodes, no JMX (nothing here needs
# nodetool).
#
# The single node lives in $STATE/cassandra on 127.0.0.1. The nodes of a cluster live in
# $STATE/cassandra-N, node N on 127.0.0.N with the same CQL and storage ports on every address
# (the driver takes one port for all contact points), as ccm lays them out: one token each,
# evenly spaced, node 1 the seed. A node's folder holds its config, data, logs, PID, endpoint
# and `jvm` (its heap flags, one a line; absent for the single node: 1 GiB).

cassandra_jars() { echo "$JARS/cassandra-$CASSANDRA_VERSION"; }

write_cassandra_config() {  # dir cql-port storage-port [address token]
    local dir=$1 port=$2 storage=$3 address=${4:-127.0.0.1} token=${5:-0}
    cat >"$dir/cassandra.yaml" <<EOF
cluster_name: streamcrawl-dev
num_tokens: 1
initial_token: $token
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "127.0.0.1:$storage"
listen_address: $address
rpc_address: $address
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
batch_size_warn_threshold: 40KiB
unlogged_batch_across_partitions_warn_threshold: 50
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

launch_cassandra() {  # cql-port storage-port: the single node, new data
    local dir=$STATE/cassandra
    resolve_cassandra_jars
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
    run_cassandra cassandra "${secure_jvm[@]}"
}

# Nodes cassandra-1..size with new data, not started: they must join one after the other
# (join_cassandra in services.sh). Tokens evenly spaced over Murmur3's range; no bootstrap
# (streaming from the others) since a new cluster has no data to stream.
prepare_cassandra_cluster() {  # size cql-port storage-port
    local size=$1 port=$2 storage=$3 i dir hosts="" token step
    resolve_cassandra_jars
    token=$((-9223372036854775807 - 1))
    step=$((9223372036854775807 / size * 2))
    for ((i = 1; i <= size; i++)); do hosts+="${hosts:+,}127.0.0.$i:$port"; done
    for ((i = 1; i <= size; i++)); do
        dir=$STATE/cassandra-$i
        rm -rf "$dir"
        mkdir -p "$dir/data"
        write_cassandra_config "$dir" "$port" "$storage" "127.0.0.$i" "$token"
        echo "auto_bootstrap: false" >>"$dir/cassandra.yaml"
        printf '%s\n' -Xms512m -Xmx512m >"$dir/jvm"
        echo "127.0.0.$i:$port" >"$dir/endpoint"
        echo "export STREAMCRAWL_CASSANDRA_HOSTS=$hosts" | write_private "$dir/client.env"
        ((i == size)) || token=$((token + step))
    done
}

resolve_cassandra_jars() {
    resolve_jars cassandra "$HERE/cassandra-pom.xml" "$(cassandra_jars)" \
        -Dcassandra.version="$CASSANDRA_VERSION"
}

# The single node forgets the ring it saw (load_ring_state=false): it has no peers. A cluster
# node keeps it, so that a restarted node knows its peers before gossip tells it.
run_cassandra() {  # node [jvm-flag...]: the node of $STATE/<node>, from its config and data
    local node=$1 dir=$STATE/$1 jars jamm heap=(-Xms1G -Xmx1G -Dcassandra.load_ring_state=false)
    shift
    jars=$(cassandra_jars)
    jamm=$(compgen -G "$jars/jamm-*.jar" | head -n 1 || true)
    [[ -n $jamm ]] || die "cassandra: no jamm jar in $jars"
    [[ -f $dir/jvm ]] && mapfile -t heap <"$dir/jvm"
    nohup "$JAVA" "${heap[@]}" -Xss256k -XX:+UseG1GC -XX:+ParallelRefProcEnabled \
        -XX:MaxTenuringThreshold=1 -XX:+ExitOnOutOfMemoryError -Djava.net.preferIPv4Stack=true \
        "${CASSANDRA_JVM17[@]}" "$@" -javaagent:"$jamm" \
        -Dcassandra-foreground=yes \
        -Dcassandra.config="file://$dir/cassandra.yaml" \
        -Dcassandra.storagedir="$dir/data" \
        -Dcassandra.logdir="$dir" \
        -Dlogback.configurationFile="$dir/logback.xml" \
        -Dcassandra.skip_wait_for_gossip_to_settle=0 \
        -Dcassandra.unsafesystem=true \
        -cp "$jars/*" org.apache.cassandra.service.CassandraDaemon \
        </dev/null >>"$dir/stdout.log" 2>&1 9>&- &
    echo $! >"$dir/pid"
    now_ms >"$dir/launched_ms"
    STARTED+=("$node")
}
