# Shared helpers for scripts/services.sh, scripts/test.sh and .ci/run (sourced, not executed).

# The python used for readiness probes and tests: $PYTHON, else the active venv's, else the
# repository's .venv (the README's install), else python3.
default_python() {
    local repo_venv
    repo_venv="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.venv/bin/python"
    if [[ -n ${PYTHON:-} ]]; then
        echo "$PYTHON"
    elif [[ -n ${VIRTUAL_ENV:-} && -x $VIRTUAL_ENV/bin/python ]]; then
        echo "$VIRTUAL_ENV/bin/python"
    elif [[ -x $repo_venv ]]; then
        echo "$repo_venv"
    else
        echo python3
    fi
}

# A new KRaft cluster id: 16 random bytes, URL-safe base64 without padding. One that starts with
# "-" reads as an option to kafka-storage format (1 draw in 64, and CI failed on it once), so draw
# again, as Kafka's own Uuid.randomUuid() does.
new_cluster_id() {
    local id=-
    while [[ $id == -* ]]; do
        id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
    done
    echo "$id"
}

# Major version of a java binary ("17"), or nothing.
java_major() {
    "$1" -version 2>&1 | sed -n -E '1s/.*version "(1\.)?([0-9]+).*/\2/p'
}

# Path of a Java 17 binary: $JAVA_HOME, then PATH, then Debian's /usr/lib/jvm. Kafka 4 brokers
# need Java 17+, Cassandra 5.0 runs on 11 or 17 only, so 17 is the one both accept.
find_java17() {
    local candidate
    for candidate in ${JAVA_HOME:+"$JAVA_HOME/bin/java"} "$(command -v java || true)" \
        /usr/lib/jvm/java-17-openjdk-*/bin/java /usr/lib/jvm/*17*/bin/java; do
        if [[ -n $candidate && -x $candidate && $(java_major "$candidate") == 17 ]]; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}
