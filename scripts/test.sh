#!/usr/bin/env bash
# The project's test command: ruff and mypy, then real Kafka and Cassandra, then pytest.
#
#   scripts/test.sh [pytest arguments...]
#
# With STREAMCRAWL_KAFKA_BOOTSTRAP / STREAMCRAWL_CASSANDRA_HOSTS set, the tests use that cluster.
# Otherwise the missing services are started with scripts/services.sh into a private state folder
# .services/test.XXXXXX and stopped on exit, whether the tests pass, fail or are interrupted
# (the folder is removed after a green run, kept with its logs otherwise). Exits with pytest's
# status. PYTHON picks the interpreter (default: $VIRTUAL_ENV/bin/python, else python3).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=_services/common.sh
source "$ROOT/scripts/_services/common.sh"
PYTHON=$(default_python)
export PYTHON

cd "$ROOT"
# Lint and types first: seconds, and no services needed.
"$PYTHON" -m ruff check .
"$PYTHON" -m ruff format --check .
# mypy reads files, not the installed package: link the folders under their import names.
mkdir -p build/mypy/streamcrawl
for package in agents topology schemas; do ln -sfn "../../../$package" "build/mypy/streamcrawl/$package"; done
"$PYTHON" -m mypy

need=()
[[ -n ${STREAMCRAWL_KAFKA_BOOTSTRAP:-} ]] || need+=(kafka)
[[ -n ${STREAMCRAWL_CASSANDRA_HOSTS:-} ]] || need+=(cassandra)

state=""
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [[ -n $state ]]; then
        STREAMCRAWL_SERVICES_DIR=$state "$ROOT/scripts/services.sh" stop || true
        if ((rc == 0)); then
            rm -rf "$state"
        else
            echo "test.sh: service logs kept in $state" >&2
        fi
    fi
    exit "$rc"
}

if ((${#need[@]})); then
    mkdir -p "$ROOT/.services"
    state=$(mktemp -d "$ROOT/.services/test.XXXXXX")
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    STREAMCRAWL_SERVICES_DIR=$state "$ROOT/scripts/services.sh" start "${need[@]}"
    # shellcheck disable=SC1091
    source "$state/env"
fi

cd "$ROOT"
"$PYTHON" -m pytest "$@"
