#!/bin/sh
# Install streamcrawl with the kafka extra (the worker, the Kafka and Cassandra commands, the WARC
# writer: pyproject.toml) from SRC into a new virtualenv at VENV, from binary wheels only, and
# the PLUGIN requirements after it (crawl plugins: docs/plugins.md) in the same pip resolution.
# With RENDER=1 in the environment, the render extra too (playwright, psutil: the render worker;
# the Dockerfile's runtime stage installs Chromium).
#
# The Dockerfile's builder stage runs this, and so does scripts/check-dockerfile.sh in CI (in a
# fresh venv), so a broken install step fails CI even though CI cannot build images.
# --only-binary=:all: makes a dependency that would need a compiler fail here, loudly, instead of
# silently needing gcc in the image: rocksdict, cassandra-driver, confluent-kafka, msgspec,
# selectolax, brotli, ada-url and faust-streaming ship manylinux wheels for CPython 3.11 on
# x86_64. Not on aarch64: faust-streaming 0.15.x publishes no arm64 wheel, so arm64 images need
# a wheel built elsewhere (this script then fails rather than compiling).
# The venv gets no pip of its own: the final image carries no installer and no build tools.
set -eu

VENV=${1:?usage: install.sh VENV SRC [PLUGIN...]}
SRC=${2:?usage: install.sh VENV SRC [PLUGIN...]}
shift 2
PYTHON=${PYTHON:-python3}
case ${RENDER:-0} in
  1) EXTRAS=kafka,render ;;
  0) EXTRAS=kafka ;;
  *) echo "install.sh: RENDER must be 0 or 1, not $RENDER" >&2; exit 2 ;;
esac

"$PYTHON" -m venv --without-pip "$VENV"
"$PYTHON" -m pip --python "$VENV/bin/python" install \
  --no-cache-dir --disable-pip-version-check --only-binary=:all: "$SRC[$EXTRAS]" "$@"

# Smoke: the console script resolves, and the packages import with what the worker, the Kafka
# commands and the WARC writer import (the base install alone would fail here).
"$VENV/bin/python" -c "import streamcrawl.agents, streamcrawl.schemas, streamcrawl.topology.settings"
"$VENV/bin/python" -c "import streamcrawl.topology.worker.app, streamcrawl.topology.cli.kafka_commands, streamcrawl.topology.cli.warc"
"$VENV/bin/streamcrawl" --help >/dev/null
if [ "$EXTRAS" = kafka,render ]; then
  # The render worker's imports (the browser itself comes from apt: not checked here).
  "$VENV/bin/python" -c "import playwright.async_api, psutil, streamcrawl.topology.worker.render"
fi
# Every installed plugin loads (a broken entry point exits 2 here, not in a worker).
"$VENV/bin/streamcrawl" plugin list
echo "install.sh: streamcrawl[$EXTRAS] installed into $VENV"
