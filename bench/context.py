"""What every runner shares: the run context, ``NotRun``, the streamcrawl executable under test
and the code it runs, and the py-spy wrapper for profile runs."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bench.site import SiteSpec

REPO = Path(__file__).resolve().parent.parent
BENCH_PYTHON = sys.executable  # run.py re-executes itself in the benchmark venv


class NotRun(Exception):
    """The crawler could not be run here; the message says why."""


@dataclass
class RunContext:
    spec: SiteSpec
    workdir: Path  # fresh per run: crawler output, state, logs
    delay: float = 0.0  # per-origin delay in seconds (politeness run)
    max_pages: int | None = None  # page budget (memory run); None = the whole site
    timeout: float = 1800.0
    profile: Path | None = None  # if set: record a py-spy profile (raw collapsed stacks) here
    stock: bool = False  # competitors without tracking-parameter stripping
    # requests in flight per origin; None: each runner's default (embedded 1; Kafka 8, 1 with
    # a delay)
    per_origin_concurrency: int | None = None
    # Kafka: seconds of the topology measured idle between ready and seed (``idle_rates``)
    idle_window_s: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def seeds_file(self) -> Path:
        return Path(self.spec.root) / "seeds.txt"

    @property
    def seeds(self) -> list[str]:
        return self.seeds_file.read_text().split()


def py_spy_argv(argv: list[str], out: Path) -> list[str]:
    """``argv`` run under ``py-spy record`` (raw collapsed stacks into ``out``)."""
    spy = Path(BENCH_PYTHON).with_name("py-spy")
    if not spy.exists():
        raise NotRun(f"py-spy missing from {spy.parent}")
    return [
        str(spy),
        "record",
        "--format",
        "raw",
        "--rate",
        "100",
        "--subprocesses",
        "--nonblocking",
        "-o",
        str(out),
        "--",
        *argv,
    ]


def streamcrawl_binary() -> str:
    """The ``streamcrawl`` executable: $STREAMCRAWL_BIN, the repo's .venv, or PATH."""
    candidates = [
        os.environ.get("STREAMCRAWL_BIN"),
        str(REPO / ".venv" / "bin" / "streamcrawl"),
        shutil.which("streamcrawl"),
    ]
    for c in candidates:
        if c and Path(c).exists() and os.access(c, os.X_OK):
            return c
    raise NotRun(
        f"streamcrawl not installed (set STREAMCRAWL_BIN or install it into {REPO / '.venv'})"
    )


def compile_streamcrawl() -> None:
    """Write the bytecode of the streamcrawl package the bench runs, as ``pip install`` does for
    an installed package. The editable install runs the tree's sources, and this machine sets
    PYTHONDONTWRITEBYTECODE, so a module changed since its ``.pyc`` was last written was compiled
    again at every start of the crawler: about 30 ms of CPU a start after an edit, charged to the
    embedded crawl's pages (bench/notes/embedded-page-cost.md) and to no competitor's."""
    try:
        exe = streamcrawl_binary()
    except NotRun:
        return
    py = Path(exe).with_name("python")
    code = (
        "import compileall, streamcrawl.agents, streamcrawl.topology, streamcrawl.schemas as s\n"
        "for m in (streamcrawl.agents, streamcrawl.topology, s):\n"
        "    for d in m.__path__: compileall.compile_dir(d, quiet=1)"
    )
    if py.exists():
        subprocess.run([str(py), "-c", code], capture_output=True, timeout=300, check=False)


def streamcrawl_version() -> str | None:
    """The installed streamcrawl's version (from its venv's metadata), or None."""
    try:
        exe = streamcrawl_binary()
    except NotRun:
        return None
    py = Path(exe).with_name("python")
    code = "import importlib.metadata as m; print(m.version('streamcrawl'))"
    argv = [str(py), "-c", code] if py.exists() else [exe, "--version"]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return (
        r.stdout.strip().splitlines()[-1]
        if r.returncode == 0 and r.stdout.strip()
        else "unknown version"
    )


def code_state() -> dict:
    """The streamcrawl code a run used: HEAD, and the uncommitted changes to the package
    directories (other engineers edit the tree the editable install runs from)."""
    dirs = ["agents", "topology", "schemas"]

    def git(*a: str) -> str:
        try:
            r = subprocess.run(
                ["git", "-C", str(REPO), *a], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.SubprocessError):
            return ""
        return r.stdout

    diff = git("diff", "HEAD", "--", *dirs)
    return {
        "commit": git("rev-parse", "--short", "HEAD").strip(),
        "uncommitted": git("diff", "HEAD", "--name-only", "--", *dirs).split(),
        "diff_sha1": hashlib.sha1(diff.encode()).hexdigest()[:12] if diff else None,
    }
