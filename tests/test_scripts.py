"""scripts/services.sh right after the README's install: the readiness probes' python.

A fresh shell has neither PYTHON nor VIRTUAL_ENV; ``python3`` there is the system's, which cannot
probe Kafka. ``default_python`` (scripts/_services/common.sh) must then pick
the repository's ``.venv``, and that venv's python must have the probes' clients.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COMMON = ROOT / "scripts" / "_services" / "common.sh"
PROBE = ROOT / "scripts" / "_services" / "probe.py"
URLSAFE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A checkout with common.sh in place and a ``.venv/bin/python``."""
    (tmp_path / "scripts" / "_services").mkdir(parents=True)
    shutil.copy(COMMON, tmp_path / "scripts" / "_services" / "common.sh")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").symlink_to(sys.executable)
    return tmp_path


def default_python(checkout: Path, cwd: Path, **env: str) -> str:
    """``default_python`` from a fresh shell: only PATH and HOME, plus ``env``."""
    fresh = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(cwd), **env}
    script = f"source {checkout / 'scripts' / '_services' / 'common.sh'} && default_python"
    r = subprocess.run(
        ["bash", "-c", script], env=fresh, cwd=cwd, capture_output=True, text=True, check=True
    )
    return r.stdout.strip()


def test_a_fresh_shell_uses_the_repository_venv(checkout: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert default_python(checkout, elsewhere) == str(checkout / ".venv" / "bin" / "python")


def test_python_and_an_active_venv_come_first(checkout: Path, tmp_path: Path) -> None:
    venv = tmp_path / "active"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    assert default_python(checkout, tmp_path, PYTHON="/x/python") == "/x/python"
    assert default_python(checkout, tmp_path, VIRTUAL_ENV=str(venv)) == str(venv / "bin/python")


def test_without_a_venv_it_falls_back_to_python3(checkout: Path, tmp_path: Path) -> None:
    shutil.rmtree(checkout / ".venv")
    assert default_python(checkout, tmp_path) == "python3"


def test_the_project_venv_can_probe_both_services() -> None:
    """The venv of the README's install (this one) has the probes' clients: against a closed
    port each probe reports "not ready" (1), never "cannot probe with this python" (2)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "VIRTUAL_ENV")}
    for service in ("kafka", "cassandra"):
        r = subprocess.run(
            [sys.executable, str(PROBE), service, "127.0.0.1:9", "0"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 1, (service, r.stderr)


def test_a_cluster_id_never_reads_as_an_option(checkout: Path) -> None:
    # 1 draw in 64 starts with "-": 1,000 draws without the redraw all pass with odds of 1e-7.
    script = f"source {checkout / 'scripts' / '_services' / 'common.sh'}; "
    script += "for _ in $(seq 1000); do new_cluster_id; done"
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    ids = r.stdout.split()
    assert len(ids) == 1000
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(i) == 22 and set(i) <= URLSAFE for i in ids)
