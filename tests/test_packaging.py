"""The wheel built from the repository installs one top-level import name: ``streamcrawl``.

The folders stay at the repository's top level (``agents/``, ``topology/``, ``schemas/``) and are
installed as ``streamcrawl.agents``, ``streamcrawl.topology`` and ``streamcrawl.schemas``, so
installing streamcrawl next to another distribution that owns ``agents`` breaks neither.
"""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PIP = (sys.executable, "-m", "pip")


def build_wheel(out: Path) -> Path:
    subprocess.run(
        [*PIP, "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(ROOT)],
        check=True,
        cwd=out,
    )
    (wheel,) = out.glob("streamcrawl-*.whl")
    return wheel


def test_wheel_installs_only_the_streamcrawl_namespace(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/")[0] for name in names if ".dist-info/" not in name}
    assert top_level == {"streamcrawl"}
    for packaged in (
        "streamcrawl/agents/frontier/frontier.py",
        "streamcrawl/topology/cli/main.py",
        "streamcrawl/schemas/cassandra.cql",
        "streamcrawl/schemas/json/pages.v1.schema.json",
        "streamcrawl/agents/py.typed",
    ):
        assert packaged in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert (
        "streamcrawl = streamcrawl.topology.cli.main:main"
        in zipfile.ZipFile(wheel).read(entry_points).decode()
    )

    env = tmp_path / "venv"
    venv.create(env, with_pip=False)
    python = env / "bin" / "python"
    subprocess.run(
        [*PIP, "--python", str(python), "install", "-q", "--no-deps", str(wheel)],
        check=True,
    )
    # Run from an empty folder: the repository's own folders must not be on sys.path.
    run = tmp_path / "cwd"
    run.mkdir()
    bare = subprocess.run(
        [str(python), "-c", "import agents"], cwd=run, capture_output=True, text=True
    )
    assert bare.returncode != 0
    assert "No module named 'agents'" in bare.stderr
    namespaced = subprocess.run(
        [str(python), "-c", "import streamcrawl.agents, streamcrawl.schemas, streamcrawl.topology"],
        cwd=run,
        capture_output=True,
        text=True,
    )
    assert namespaced.returncode == 0, namespaced.stderr
