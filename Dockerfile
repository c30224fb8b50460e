# syntax=docker/dockerfile:1
# streamcrawl worker image: multi-stage, non-root, no build tools in the final stage.
#
# Base pinned by version tag. Release engineering should pin the digest as well
# (python:3.11.15-slim-bookworm@sha256:...) and bump both together.
ARG PYTHON_IMAGE=python:3.11.15-slim-bookworm

# --- builder: resolve and install streamcrawl plus its dependencies into /opt/venv ------------
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY docker/install.sh /usr/local/bin/streamcrawl-install
COPY pyproject.toml README.md ./
COPY agents ./agents
COPY schemas ./schemas
COPY topology ./topology
# Crawl plugins baked into the image (docs/plugins.md, "Deploying plugins"): pip requirements,
# space-separated, installed with streamcrawl in one resolution: names from your index
# (--build-arg PLUGINS="acme-crawl-plugins==1.2") or paths in /src, such as the example package
# copied here (--build-arg PLUGINS=./examples/plugins). Default: none.
ARG PLUGINS=""
COPY examples/plugins ./examples/plugins
# RENDER=1: an image that renders (`streamcrawl render-worker`, `crawl --render`): the render
# extra (playwright, psutil) here, Debian's Chromium in the runtime stage. Off by default: it
# adds the browser to every pod's image (docs/rendering.md, "The image", says how much).
ARG RENDER=0
# Wheels only (no compiler in either stage); CI runs the same script: scripts/check-dockerfile.sh.
RUN RENDER=$RENDER sh /usr/local/bin/streamcrawl-install /opt/venv /src $PLUGINS

# --- runtime ----------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="streamcrawl" \
      org.opencontainers.image.description="Polite, replay-safe web crawler on Kafka (Faust) with a Cassandra sink" \
      org.opencontainers.image.licenses="Apache-2.0"
# No installer in the runtime image: the app's venv has no pip, and the base's goes too.
RUN python -m pip uninstall --yes --no-cache-dir pip setuptools wheel \
    && groupadd --system --gid 10001 streamcrawl \
    && useradd --system --uid 10001 --gid 10001 --home-dir /tmp --no-create-home \
       --shell /usr/sbin/nologin streamcrawl \
    && install -d -o 10001 -g 10001 -m 0750 /var/lib/streamcrawl
ARG RENDER=0
# The browser of RENDER=1 images: Debian's chromium; Playwright never downloads one.
RUN if [ "$RENDER" = 1 ]; then \
      apt-get update \
      && apt-get install --yes --no-install-recommends chromium \
      && rm -rf /var/lib/apt/lists/*; \
    fi
COPY --from=builder /opt/venv /opt/venv
# HOME and temporary files on /tmp (an emptyDir in Kubernetes), state on /var/lib/streamcrawl
# (the PVC): the root filesystem can be read-only. Bytecode was compiled at install time.
ENV PATH=/opt/venv/bin:$PATH \
    HOME=/tmp \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    STREAMCRAWL_STATE_DIR=/var/lib/streamcrawl \
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 \
    STREAMCRAWL_CHROMIUM=/usr/bin/chromium
USER 10001:10001
WORKDIR /var/lib/streamcrawl
# The worker's web port; a render worker's.
EXPOSE 6066 6067
# Exec form: streamcrawl is PID 1 and receives SIGTERM directly (graceful worker shutdown).
ENTRYPOINT ["streamcrawl"]
CMD ["worker"]
