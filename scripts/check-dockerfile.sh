#!/usr/bin/env bash
# CI stand-in for `docker build` (CI has no Docker engine): check the Dockerfile statically and
# run its install step for real.
#
# 1. Static checks: base image pinned to a concrete Python patch release, the builder stage's only
#    RUN is docker/install.sh, the final stage runs as uid 10001 with ENTRYPOINT streamcrawl and
#    installs no compiler; the RENDER build argument installs the render extra and Chromium.
# 2. Build the builder stage's context the way Docker would: every COPY source of that stage,
#    filtered by .dockerignore, laid out under its destination.
# 3. Run docker/install.sh on that context into a fresh venv with the same Python minor as the
#    image, with the example plugins as --build-arg PLUGINS=./examples/plugins gives them and the
#    render extra as --build-arg RENDER=1 does. A
#    missing COPY, a .dockerignore that hides a package, a dependency without a wheel, a broken
#    console script or a plugin that does not load fails here.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/check-dockerfile.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

PYTHON=${PYTHON:-python3.11}
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  PYTHON=python3
fi

"$PYTHON" - "$ROOT" "$WORK/context" <<'PY'
"""Static checks of the Dockerfile, then lay out the builder stage's COPY context."""

import fnmatch
import os
import re
import shlex
import shutil
import sys

root, context = sys.argv[1], sys.argv[2]
failures = []


def fail(msg):
    failures.append(msg)


def instructions(text):
    """(keyword, argument) pairs, continuation lines joined, comments dropped."""
    joined, out = "", []
    for line in text.splitlines():
        if not joined and line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            joined += line.rstrip()[:-1] + " "
            continue
        joined += line
        if joined.strip():
            keyword, _, arg = joined.strip().partition(" ")
            out.append((keyword.upper(), arg.strip()))
        joined = ""
    return out


steps = instructions(open(os.path.join(root, "Dockerfile")).read())
args = {k: v for k, _, v in (a.partition("=") for kw, a in steps if kw == "ARG" and "=" in a)}
stages, current = [], None
for kw, arg in steps:
    if kw == "FROM":
        image = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), arg.split()[0])
        name = arg.split()[2] if len(arg.split()) == 3 and arg.split()[1].upper() == "AS" else None
        current = {"image": image, "name": name, "steps": []}
        stages.append(current)
    elif current is not None:
        current["steps"].append((kw, arg))

if len(stages) < 2:
    fail("Dockerfile must be multi-stage (builder + runtime)")
builder, final = stages[0], stages[-1]
for stage in stages:
    if not re.fullmatch(r"python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?", stage["image"]):
        fail(f"base image {stage['image']!r} is not pinned to a python:3.11.<patch>-slim-bookworm tag")

runs = [a for kw, a in builder["steps"] if kw == "RUN"]
if runs != ["RENDER=$RENDER sh /usr/local/bin/streamcrawl-install /opt/venv /src $PLUGINS"]:
    fail(f"the builder stage must install only via docker/install.sh, found RUN {runs}")
if ("ARG", 'PLUGINS=""') not in builder["steps"]:
    fail('the builder stage must declare ARG PLUGINS="" (docs/plugins.md, "Deploying plugins")')
# RENDER=1 (docs/rendering.md, "The image"): install.sh adds the render extra, and the runtime
# stage Debian's chromium, where the render worker looks for it, with no browser download.
for stage, what in ((builder, "builder"), (final, "runtime")):
    if ("ARG", "RENDER=0") not in stage["steps"]:
        fail(f"the {what} stage must declare ARG RENDER=0 (images that render: RENDER=1)")
final_runs = [a for kw, a in final["steps"] if kw == "RUN"]
chromium = [a for a in final_runs if "chromium" in a]
if len(chromium) != 1 or not re.search(
    r'if \[ "\$RENDER" = 1 \]; then .*apt-get install --yes --no-install-recommends chromium\b'
    r".*rm -rf /var/lib/apt/lists/\*",
    chromium[0],
):
    fail("the runtime stage must apt-get install --no-install-recommends chromium under RENDER=1")
env = " ".join(a for kw, a in final["steps"] if kw == "ENV").split()
for setting in ("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1", "STREAMCRAWL_CHROMIUM=/usr/bin/chromium"):
    if setting not in env:
        fail(f"the runtime stage must set ENV {setting}")
install = open(os.path.join(root, "docker", "install.sh")).read()
if "1) EXTRAS=kafka,render ;;" not in install or '"$SRC[$EXTRAS]"' not in install:
    fail("docker/install.sh must install the render extra when RENDER=1")
final_text = " ".join(f"{kw} {a}" for kw, a in final["steps"])
if re.search(r"\b(gcc|g\+\+|clang|build-essential|make|cmake|rustc|cargo)\b", final_text):
    fail("the runtime stage mentions a compiler or build tool")
if ("USER", "10001:10001") not in final["steps"]:
    fail("the runtime stage must run as USER 10001:10001")
if ("ENTRYPOINT", '["streamcrawl"]') not in final["steps"] or ("CMD", '["worker"]') not in final["steps"]:
    fail('the runtime stage must have ENTRYPOINT ["streamcrawl"] and CMD ["worker"]')
if ("COPY", "--from=builder /opt/venv /opt/venv") not in final["steps"]:
    fail("the runtime stage must copy /opt/venv from the builder")

# .dockerignore: the last matching pattern wins; a pattern matching a parent directory matches.
patterns = []
ignore_file = os.path.join(root, ".dockerignore")
if os.path.exists(ignore_file):
    for line in open(ignore_file).read().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            negate = line.startswith("!")
            pat = os.path.normpath(line.lstrip("!").lstrip("/")).replace("**/", "*/")
            patterns.append((negate, pat))


def ignored(rel):
    parts = rel.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    state = False
    for negate, pat in patterns:
        hit = any(fnmatch.fnmatch(p, pat) or fnmatch.fnmatch(p, "*/" + pat) for p in prefixes)
        if hit:
            state = not negate
    return state


workdir = "/"
for kw, arg in builder["steps"]:
    if kw == "WORKDIR":
        workdir = os.path.join(workdir, arg)
    if kw != "COPY" or arg.startswith("--from"):
        continue
    *sources, dest = shlex.split(arg)
    dest_abs = os.path.normpath(os.path.join(workdir, dest))
    for src in sources:
        src_path = os.path.join(root, src)
        if not os.path.exists(src_path):
            fail(f"COPY source {src!r} does not exist")
            continue
        files = (
            [os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(src_path) for f in fs]
            if os.path.isdir(src_path)
            else [src]
        )
        kept = [f for f in files if not ignored(f)]
        if not kept:
            fail(f"COPY source {src!r} is entirely excluded by .dockerignore")
        for rel in kept:
            if os.path.isdir(src_path):
                target = os.path.join(dest_abs, os.path.relpath(rel, src))
            elif dest.endswith("/") or len(sources) > 1:
                target = os.path.join(dest_abs, os.path.basename(rel))
            else:
                target = dest_abs
            out = os.path.join(context, target.lstrip("/"))
            os.makedirs(os.path.dirname(out), exist_ok=True)
            shutil.copy2(os.path.join(root, rel), out)

if failures:
    sys.exit("check-dockerfile: " + "\ncheck-dockerfile: ".join(failures))
print("check-dockerfile: static checks passed; context laid out under", context)
PY

image_minor=$(sed -n 's/^ARG PYTHON_IMAGE=python:\(3\.[0-9]*\)\..*/\1/p' "$ROOT/Dockerfile")
have_minor=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [[ $image_minor != "$have_minor" ]]; then
  echo "check-dockerfile: the image uses Python $image_minor but $PYTHON is $have_minor; set PYTHON" >&2
  exit 1
fi

start=$SECONDS
# As `docker build --build-arg PLUGINS=./examples/plugins --build-arg RENDER=1 .` runs it (from
# WORKDIR /src): the plugins' extension point installs the example package, and its three
# plugins load; the render extra's wheels install and import (RENDER=0 installs a subset).
(cd "$WORK/context/src" && PYTHON=$PYTHON RENDER=1 \
  sh "$WORK/context/usr/local/bin/streamcrawl-install" \
  "$WORK/venv" "$WORK/context/src" ./examples/plugins) | tee "$WORK/install.log"
if ! grep -q 'installed into' "$WORK/install.log" || ! grep -q 'streamcrawl\[kafka,render\]' "$WORK/install.log"; then
  echo "check-dockerfile: install.sh with RENDER=1 did not install the render extra" >&2
  exit 1
fi
plugins=$(grep -c '"kind"' "$WORK/install.log" || true)
if [[ $plugins != 3 ]]; then
  echo "check-dockerfile: plugin list shows $plugins plugins after PLUGINS=./examples/plugins, not 3" >&2
  exit 1
fi
echo "check-dockerfile: install step passed in $((SECONDS - start)) s"
