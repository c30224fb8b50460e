#!/usr/bin/env bash
# Kafka 4 (KRaft) and Cassandra 5.0 on loopback addresses for development, tests and CI, without
# Docker: the jars come from Maven Central through `mvn`, the configs are written here. By
# default one node of each on 127.0.0.1; with --nodes 3 a cluster of three of each, node N on
# 127.0.0.N (_services/kafka.sh and _services/cassandra.sh describe the layouts).
#
#   scripts/services.sh start [--secure] [--nodes 1|3] [kafka] [cassandra]
#                                   start (default: both), wait until they serve
#   scripts/services.sh stop [TARGET...]
#                                   stop what `start` started (default: all; recorded PIDs);
#                                   the data stays until the next `start`
#   scripts/services.sh resume [TARGET...]
#                                   start stopped nodes again on their ports with their data
#                                   (fault tests: a broker or database outage mid-crawl)
#   scripts/services.sh kill|pause|unpause TARGET...
#                                   SIGKILL, SIGSTOP, SIGCONT the nodes (fault tests; `resume`
#                                   starts a killed node again)
#   scripts/services.sh status      up/paused/down and endpoint of each node; exit 3 if one is
#                                   not up
#
# A TARGET is a service, kafka or cassandra (all its nodes), or one node of it: kafka:2 is
# Kafka's node 2 (node.id 2, on 127.0.0.2); the single node is kafka:1 too.
#
# After `start`, `source .services/env` exports STREAMCRAWL_KAFKA_BOOTSTRAP and
# STREAMCRAWL_CASSANDRA_HOSTS (every node of a cluster, which also sets
# STREAMCRAWL_SERVICES_NODES). With --secure (single node only) Kafka serves SASL_SSL
# (SCRAM-SHA-512) and Cassandra asks for a password over TLS, from a CA made in the state folder
# (_services/secure.sh); the env file then also holds the credentials and the CA path (it is
# readable by its owner only).
# Environment (all optional):
#   STREAMCRAWL_SERVICES_DIR    state folder: configs, data, logs, PIDs, env (default: .services)
#   STREAMCRAWL_SERVICES_SECURE 1: as --secure
#   STREAMCRAWL_KAFKA_PORT      fixed Kafka port; STREAMCRAWL_CASSANDRA_PORT fixed CQL port
#                               (default: free ports picked at start, the same on each address)
#   STREAMCRAWL_KAFKA_VERSION (4.1.1), STREAMCRAWL_LOG4J_VERSION (2.24.3),
#   STREAMCRAWL_CASSANDRA_VERSION (5.0.6)
#   STREAMCRAWL_JARS_DIR        jar cache (default: ~/.cache/streamcrawl/jars)
#   STREAMCRAWL_MVN_ARGS        extra mvn arguments, e.g. -Dmaven.repo.local=/tmp/m2
#   STREAMCRAWL_START_TIMEOUT   seconds to wait for each node (default: 180)
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
# shellcheck source=_services/kafka.sh
source "$HERE/kafka.sh"
# shellcheck source=_services/cassandra.sh
source "$HERE/cassandra.sh"

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
STARTED=()   # nodes launched by this invocation: stopped again if the start fails
SELECTED=()  # the nodes named by the command line (select_nodes)
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

# ---------------------------------------------------------------------------------------------
# Nodes: a node is a folder of $STATE, "kafka" or "cassandra" for the single node, "kafka-N" or
# "cassandra-N" for node N of a cluster; $STATE/nodes holds the cluster's size (no file: 1).

cluster_size() { if [[ -f $STATE/nodes ]]; then cat "$STATE/nodes"; else echo 1; fi; }

nodes_of() {  # service [size]: its nodes, one a line
    local size=${2:-$(cluster_size)} i
    if ((size == 1)); then
        echo "$1"
    else
        for ((i = 1; i <= size; i++)); do echo "$1-$i"; done
    fi
}

all_nodes() { nodes_of kafka "$@" && nodes_of cassandra "$@"; }

service_of() { echo "${1%%-*}"; }

label_of() {  # node: as the command line names it (kafka, kafka:2)
    if [[ $1 == *-* ]]; then echo "${1%%-*}:${1##*-}"; else echo "$1"; fi
}

select_nodes() {  # target...: SELECTED = the nodes they name (default: all)
    local target service index size
    size=$(cluster_size)
    SELECTED=()
    (($#)) || set -- "${SERVICES[@]}"
    for target in "$@"; do
        service=${target%%:*}
        check_names "$service"
        if [[ $target != *:* ]]; then
            mapfile -t -O "${#SELECTED[@]}" SELECTED < <(nodes_of "$service")
            continue
        fi
        index=${target#*:}
        if [[ ! $index =~ ^[1-9]$ ]] || ((index > size)); then
            die "no node '$target' in $STATE: it has $size node(s) of each service"
        fi
        if ((size == 1)); then SELECTED+=("$service"); else SELECTED+=("$service-$index"); fi
    done
}

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

paused() { [[ $(ps -o stat= -p "$(pid_of "$1")" 2>/dev/null) == T* ]]; }

port_open() {  # host:port
    (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null
}

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
# Waiting for a node to serve.

log_of() {  # node
    if [[ $(service_of "$1") == kafka ]]; then echo "$STATE/$1/server.log"; else echo "$STATE/$1/system.log"; fi
}

died() {  # node pid
    local log
    log=$(log_of "$1")
    say "$(label_of "$1") (pid $2) exited during start; last 30 lines of $log and of its stdout:"
    [[ -f $log ]] && tail -n 30 "$log" >&2
    [[ -s $STATE/$1/stdout.log ]] && tail -n 30 "$STATE/$1/stdout.log" >&2
    die "$(label_of "$1") died during start (full logs in $STATE/$1/)"
}

wait_ready() {  # node
    local node=$1 service label pid endpoint deadline rc=0 t0 ids=()
    service=$(service_of "$node")
    label=$(label_of "$node")
    pid=$(pid_of "$node")
    endpoint=$(<"$STATE/$node/endpoint")
    t0=$(<"$STATE/$node/launched_ms")
    deadline=$((SECONDS + START_TIMEOUT))
    until port_open "$endpoint"; do
        kill -0 "$pid" 2>/dev/null || died "$node" "$pid"
        ((SECONDS < deadline)) || die "$label: not listening on $endpoint after ${START_TIMEOUT}s (logs in $STATE/$node/)"
        sleep 0.25
    done
    if [[ $node == cassandra && -f $STATE/cassandra/secure ]]; then
        setup_cassandra_roles "$STATE/cassandra" "$endpoint" "$((deadline - SECONDS))" || rc=$?
    fi
    # A broker of a cluster serves once the quorum has registered and unfenced it.
    [[ $node == kafka-* ]] && ids=("${node##*-}")
    # The probe connects as a client would: with the exports of client.env (credentials, CA).
    ((rc != 0)) || (
        set -a
        # shellcheck source=/dev/null
        source "$STATE/$node/client.env"
        exec "$PYTHON" "$HERE/probe.py" "$service" "$endpoint" "$((deadline - SECONDS))" "${ids[@]}"
    ) || rc=$?
    if ((rc == 2)); then
        die "$PYTHON cannot probe $service: set PYTHON to the project's venv python (pip install -e '.[test]')"
    elif ((rc != 0)); then
        kill -0 "$pid" 2>/dev/null || died "$node" "$pid"
        die "$label: not serving on $endpoint after ${START_TIMEOUT}s (logs in $STATE/$node/)"
    fi
    # Seconds from launching the JVM, as measured here: the probe adds up to ~1 s.
    say "$label: ready at $endpoint ($(mode_of "$node")), $(((($(now_ms) - t0) + 500) / 1000))s after launch (pid $pid, log $(log_of "$node"))"
}

# Cassandra adds one node to the ring at a time: each starts once the one before serves.
join_cassandra() {  # node...
    local node
    for node in "$@"; do
        running "$node" || run_cassandra "$node"
        wait_ready "$node"
    done
}

# Every node sees the others and agrees on the schema: the cluster takes QUORUM writes.
wait_ring() {  # node...
    local endpoints=() node
    for node in "$@"; do endpoints+=("$(<"$STATE/$node/endpoint")"); done
    "$PYTHON" "$HERE/probe.py" cassandra-ring "$START_TIMEOUT" "${endpoints[@]}" ||
        die "cassandra: the nodes do not all see each other after ${START_TIMEOUT}s (logs in $STATE/cassandra-*/)"
    say "cassandra: ring of ${#endpoints[@]} nodes, schema agreed"
}

mode_of() {  # node
    if [[ ! -f $STATE/$1/secure ]]; then
        echo plaintext
    elif [[ $(service_of "$1") == kafka ]]; then
        echo "SASL_SSL, SCRAM-SHA-512"
    else
        echo "TLS, PasswordAuthenticator"
    fi
}

# The env file: for each service with a running node, that node's client.env (the endpoints,
# and with --secure the credentials and CA), owner-readable only.
write_env() {
    local tmp=$STATE/env.tmp service node
    (umask 077 && : >"$tmp")
    for service in "${SERVICES[@]}"; do
        for node in $(nodes_of "$service"); do
            running "$node" || continue
            if [[ -f $STATE/$node/client.env ]]; then
                cat "$STATE/$node/client.env" >>"$tmp"
            else  # started by an older services.sh
                echo "export ${ENV_NAMES[$service]}=$(<"$STATE/$node/endpoint")" >>"$tmp"
            fi
            break
        done
    done
    (($(cluster_size) == 1)) || echo "export STREAMCRAWL_SERVICES_NODES=$(cluster_size)" >>"$tmp"
    mv "$tmp" "$STATE/env"
}

# ---------------------------------------------------------------------------------------------
# Commands.

check_port() {  # variable-name host...
    local name=$1 port=${!1}
    shift
    [[ $port =~ ^[0-9]+$ ]] || die "$name=$port is not a port number"
    "$PYTHON" "$HERE/probe.py" port-free "$port" "$@" || die "port $port ($name) is already in use on $*"
}

check_layout() {  # size: die if nodes of another layout run here
    local old node
    old=$(cluster_size)
    ((old != $1)) || return 0
    for node in $(all_nodes "$old"); do
        ! running "$node" ||
            die "$(label_of "$node") of a $old-node layout runs in $STATE: stop it first (or use another STREAMCRAWL_SERVICES_DIR)"
    done
}

cmd_start() {
    local wanted=() size=1 name t0 ports hosts=() is_secure node i launched=() joining=()
    while (($#)); do
        case $1 in
            --secure) SECURE=1 ;;
            --nodes) size=${2:-}; shift ;;
            --nodes=*) size=${1#--nodes=} ;;
            *) wanted+=("$1") ;;
        esac
        shift
    done
    [[ $SECURE == 0 || $SECURE == 1 ]] || die "STREAMCRAWL_SERVICES_SECURE=$SECURE: use 0 or 1"
    [[ $size == 1 || $size == 3 ]] || die "--nodes $size: use 1 (the default) or 3"
    ((size == 1 || SECURE == 0)) || die "--secure runs a single node only: drop --nodes or --secure"
    ((${#wanted[@]})) || wanted=("${SERVICES[@]}")
    check_names "${wanted[@]}"
    JAVA=$(find_java17) ||
        die "Java 17 not found (java on PATH: $(java_major java 2>/dev/null || echo none)); install openjdk-17-jdk-headless or set JAVA_HOME to a JDK 17"
    command -v "$PYTHON" >/dev/null || die "python '$PYTHON' not found: set PYTHON"
    for ((i = 1; i <= size; i++)); do hosts+=("127.0.0.$i"); done
    [[ -n ${STREAMCRAWL_KAFKA_PORT:-} ]] && check_port STREAMCRAWL_KAFKA_PORT "${hosts[@]}"
    [[ -n ${STREAMCRAWL_CASSANDRA_PORT:-} ]] && check_port STREAMCRAWL_CASSANDRA_PORT "${hosts[@]}"
    check_layout "$size"
    if ((size == 1)); then rm -f "$STATE/nodes"; else echo "$size" >"$STATE/nodes"; fi
    read -r -a ports < <("$PYTHON" "$HERE/probe.py" free-ports 4 "${hosts[@]}")

    t0=$(now_ms)
    for name in "${wanted[@]}"; do
        if running_service "$name"; then
            node=$(nodes_of "$name" | head -n 1)
            [[ -f $STATE/$node/secure ]] && is_secure=1 || is_secure=0
            ((is_secure == SECURE)) || die "$name already runs $(mode_of "$node") in $STATE: stop it first (or use another STREAMCRAWL_SERVICES_DIR)"
            say "$name: already running at $(endpoints_of "$name") ($(mode_of "$node"))"
            continue
        fi
        case $name/$size in
            kafka/1) launch_kafka "${STREAMCRAWL_KAFKA_PORT:-${ports[0]}}" "${ports[1]}" ;;
            cassandra/1) launch_cassandra "${STREAMCRAWL_CASSANDRA_PORT:-${ports[2]}}" "${ports[3]}" ;;
            kafka/*) launch_kafka_cluster "$size" "${STREAMCRAWL_KAFKA_PORT:-${ports[0]}}" "${ports[1]}" ;;
            cassandra/*)
                prepare_cassandra_cluster "$size" "${STREAMCRAWL_CASSANDRA_PORT:-${ports[2]}}" "${ports[3]}"
                mapfile -t joining < <(nodes_of cassandra)
                continue
                ;;
        esac
        mapfile -t -O "${#launched[@]}" launched < <(nodes_of "$name")
    done
    # Kafka's nodes start meanwhile: they need each other, not Cassandra.
    join_cassandra "${joining[@]}"
    ((${#joining[@]} == 0)) || wait_ring "${joining[@]}"
    await_launched "${launched[@]}"
    launched+=("${joining[@]}")
    ((${#launched[@]} == 0)) || say "started $(labels "${launched[@]}") in $(((($(now_ms) - t0) + 500) / 1000))s"
    say "endpoints in $STATE/env (source it); stop with: STREAMCRAWL_SERVICES_DIR=$STATE $0 stop"
}

# True if every node of the service runs; dies if only some do (`resume` starts the others).
running_service() {  # service
    local node up=0 down=0
    for node in $(nodes_of "$1"); do
        if running "$node"; then up=$((up + 1)); else down=$((down + 1)); fi
    done
    ((up == 0 || down == 0)) || die "$1: $up node(s) run, $down do not: use resume, or stop first"
    ((down == 0))
}

endpoints_of() { nodes_of "$1" | while read -r node; do cat "$STATE/$node/endpoint"; done | paste -sd, -; }

labels() {  # node...
    local node out=()
    for node in "$@"; do out+=("$(label_of "$node")"); done
    echo "${out[*]}"
}

await_launched() {  # node...: wait until each serves, then write the env file
    local node
    for node in "$@"; do
        wait_ready "$node"
    done
    write_env
}

check_names() {  # service...
    local name
    for name in "$@"; do
        [[ $name == kafka || $name == cassandra ]] || die "unknown service '$name' (kafka, cassandra)"
    done
}

stop_services() {  # node...
    local node pid pids=() nodes=() deadline
    for node in "$@"; do
        if pid=$(pid_of "$node") && is_ours "$pid" "$node"; then
            kill -TERM "$pid" 2>/dev/null || true
            kill -CONT "$pid" 2>/dev/null || true  # a paused node handles the TERM
            pids+=("$pid")
            nodes+=("$node")
        elif [[ -f $STATE/$node/pid ]]; then
            say "$(label_of "$node"): not running (stale pid file removed)"
        fi
        rm -f "$STATE/$node/pid"
    done
    deadline=$((SECONDS + STOP_GRACE))
    for i in "${!pids[@]}"; do
        while kill -0 "${pids[$i]}" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
        if kill -0 "${pids[$i]}" 2>/dev/null; then
            say "$(label_of "${nodes[$i]}"): still running after ${STOP_GRACE}s, sending SIGKILL"
            kill -KILL "${pids[$i]}" 2>/dev/null || true
        fi
        say "$(label_of "${nodes[$i]}"): stopped (pid ${pids[$i]})"
    done
}

cmd_stop() {  # [target...]: those only, their data kept for `resume`
    select_nodes "$@"
    stop_services "${SELECTED[@]}"
    ((${#SELECTED[@]} < $(all_nodes | wc -l))) || rm -f "$STATE/env"
}

cmd_resume() {  # [target...]: start again with the ports, config and data they had
    local node launched=()
    select_nodes "$@"
    JAVA=$(find_java17) || die "Java 17 not found: set JAVA_HOME to a JDK 17"
    for node in "${SELECTED[@]}"; do
        [[ -f $STATE/$node/endpoint ]] || die "$(label_of "$node") was never started in $STATE: use start"
        if running "$node"; then
            say "$(label_of "$node"): already running at $(<"$STATE/$node/endpoint")"
            continue
        fi
        [[ -f $STATE/$node/secure ]] && SECURE=1
        "run_$(service_of "$node")" "$node"
        launched+=("$node")
    done
    await_launched "${launched[@]}"
    # A Cassandra node killed -9 loses its unsynced commit log (up to 10 s), schema changes
    # included: it answers "keyspace ... does not exist" until it has pulled the schema from
    # the others. Back means back in the ring with the schema agreed, as after `start`.
    local cassandra=() all=()
    for node in "${launched[@]}"; do [[ $node == cassandra-* ]] && cassandra+=("$node"); done
    if ((${#cassandra[@]})); then
        mapfile -t all < <(nodes_of cassandra)
        wait_ring "${all[@]}"
    fi
    ((${#launched[@]} == 0)) || say "resumed $(labels "${launched[@]}")"
}

cmd_signal() {  # KILL|STOP|CONT target...: fault injection on running nodes
    local signal=$1 node pid
    shift
    (($#)) || die "name the nodes to signal: a service (kafka) or a node (kafka:2)"
    select_nodes "$@"
    for node in "${SELECTED[@]}"; do
        if ! pid=$(pid_of "$node") || ! is_ours "$pid" "$node"; then
            die "$(label_of "$node"): not running"
        fi
        kill "-$signal" "$pid"
        if [[ $signal == KILL ]]; then
            # Gone once it is no longer our JVM (a zombie until init reaps it).
            while is_ours "$pid" "$node"; do sleep 0.1; done
            rm -f "$STATE/$node/pid"
        fi
        say "$(label_of "$node"): SIG$signal sent (pid $pid)"
    done
}

cmd_status() {
    local node label rc=0
    for node in $(all_nodes); do
        label=$(label_of "$node")
        if running "$node" && paused "$node"; then
            echo "$label: paused at $(<"$STATE/$node/endpoint") (pid $(pid_of "$node"))"
            rc=3
        elif running "$node" && port_open "$(<"$STATE/$node/endpoint")"; then
            echo "$label: up at $(<"$STATE/$node/endpoint") ($(mode_of "$node"), pid $(pid_of "$node"))"
        elif running "$node"; then
            echo "$label: starting (pid $(pid_of "$node"), not listening yet)"
            rc=3
        else
            echo "$label: down"
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
        start | stop | resume | kill | pause | unpause)
            # One command at a time per state folder.
            exec 9>"$STATE/.lock"
            flock -w "$((START_TIMEOUT + STOP_GRACE))" 9 ||
                die "another services.sh command holds $STATE/.lock"
            case $cmd in
                kill) cmd_signal KILL "$@" ;;
                pause) cmd_signal STOP "$@" ;;
                unpause) cmd_signal CONT "$@" ;;
                *) "cmd_$cmd" "$@" ;;
            esac
            ;;
        status) cmd_status ;;
        *)
            sed -n '2,/^# After/p' "$0" | sed '$d' >&2
            exit 64
            ;;
    esac
}

main "$@"
