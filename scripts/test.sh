#!/usr/bin/env bash
# The project's test command: ruff and mypy, then real Kafka and Cassandra, then pytest.
#
#   scripts/test.sh [pytest arguments...]
#   scripts/test.sh --unit [pytest arguments...]
#
# With STREAMCRAWL_KAFKA_BOOTSTRAP / STREAMCRAWL_CASSANDRA_HOSTS set, the tests use that cluster.
# Otherwise the missing services are started with scripts/services.sh into a private state folder
# .services/test.XXXXXX and stopped on exit, whether the tests pass, fail or are interrupted
# (the folder is removed after a green run, kept with its logs otherwise). Exits with pytest's
# status. PYTHON picks the interpreter (default: $VIRTUAL_ENV/bin/python, else python3).
#
# --unit, the fast loop: the same lint and type checks, then pytest on UNIT_TESTS only (the tests
# that need neither a service nor Helm), with every test that needs Kafka, Cassandra or the
# secured services deselected (by its marker, or the fixture that implies it). It starts no
# service (docs/development.md, "Running the tests").
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
UNIT_TESTS=(tests/unit tests/bench tests/test_scripts.py tests/test_packaging.py)
NO_SERVICES="not kafka and not cassandra and not secure"
unit=0
if [[ ${1:-} == --unit ]]; then
    unit=1
    shift
fi
# shellcheck source=_services/common.sh
source "$ROOT/scripts/_services/common.sh"
PYTHON=$(default_python)
export PYTHON

cd "$ROOT"
# Lint and types first: seconds, and no services needed.
"$PYTHON" -m ruff check .
"$PYTHON" -m ruff format --check .
# mypy reads files, not the installed package: link the folders under their import names, and
# the streamcrawl package's own module (pyproject.toml's package-dir).
mkdir -p build/mypy/streamcrawl
for package in agents topology schemas; do ln -sfn "../../../$package" "build/mypy/streamcrawl/$package"; done
ln -sfn ../../../topology/api/__init__.py build/mypy/streamcrawl/__init__.py
"$PYTHON" -m mypy

if ((unit)); then
    exec "$PYTHON" -m pytest -m "$NO_SERVICES" "${UNIT_TESTS[@]}" "$@"
fi

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
