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


# -- scripts/services.sh, without starting anything -------------------------------------------

SERVICES_SH = ROOT / "scripts" / "services.sh"


def services_sh(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STREAMCRAWL_SERVICES_DIR": str(state), "PYTHON": sys.executable}
    return subprocess.run(
        ["bash", str(SERVICES_SH), *args], env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("start", "--nodes", "2"), "--nodes 2: use 1 (the default) or 3"),
        (("start", "--secure", "--nodes", "3"), "--secure runs a single node only"),
        (("pause", "kafka:2"), "no node 'kafka:2'"),
        (("kill", "zookeeper"), "unknown service 'zookeeper'"),
        (("kill",), "name the nodes to signal"),
    ],
)
def test_services_refuses_what_it_cannot_do(
    tmp_path: Path, args: tuple[str, ...], says: str
) -> None:
    r = services_sh(tmp_path, *args)
    assert r.returncode == 1
    assert says in r.stderr


def test_services_status_lists_each_node_of_a_cluster(tmp_path: Path) -> None:
    assert services_sh(tmp_path, "status").stdout.splitlines() == ["kafka: down", "cassandra: down"]
    (tmp_path / "nodes").write_text("3\n")
    r = services_sh(tmp_path, "status")
    assert r.returncode == 3
    assert r.stdout.splitlines() == [
        f"{s}:{n}: down" for s in ("kafka", "cassandra") for n in (1, 2, 3)
    ]


def test_free_ports_bind_on_every_loopback_address() -> None:
    hosts = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    r = subprocess.run(
        [sys.executable, str(PROBE), "free-ports", "4", *hosts],
        capture_output=True,
        text=True,
        check=True,
    )
    ports = [int(p) for p in r.stdout.split()]
    assert len(set(ports)) == 4
    for port in ports:
        free = subprocess.run([sys.executable, str(PROBE), "port-free", str(port), *hosts])
        assert free.returncode == 0


# -- scripts/test.sh, with a fake python and a fake services.sh --------------------------------

TEST_SH = ROOT / "scripts" / "test.sh"
FAKE_PYTHON = """#!/bin/bash
printf '%s\\n' "$*" >> "$(dirname "$0")/python.log"
"""
FAKE_SERVICES = """#!/bin/bash
printf '%s\\n' "$*" >> "$(dirname "$0")/../services.log"
if [[ $1 == start ]]; then
    printf 'export %s=127.0.0.1:9\\n' STREAMCRAWL_KAFKA_BOOTSTRAP STREAMCRAWL_CASSANDRA_HOSTS \\
        > "$STREAMCRAWL_SERVICES_DIR/env"
fi
"""


@pytest.fixture
def fake_checkout(tmp_path: Path) -> Path:
    """A checkout with scripts/test.sh and common.sh, a ``python`` that records its arguments
    (python.log) and a ``services.sh`` that records its own (services.log) and, on ``start``,
    writes the env file a real start writes."""
    scripts = tmp_path / "scripts"
    (scripts / "_services").mkdir(parents=True)
    shutil.copy(TEST_SH, scripts / "test.sh")
    shutil.copy(COMMON, scripts / "_services" / "common.sh")
    fakes = {tmp_path / "python": FAKE_PYTHON, scripts / "services.sh": FAKE_SERVICES}
    for path, text in fakes.items():
        path.write_text(text)
        path.chmod(0o755)
    return tmp_path


def run_test_sh(checkout: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """scripts/test.sh as from a shell with no services configured (CI runs this test with
    the suite's services in its environment)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMCRAWL_")}
    env |= {"PYTHON": str(checkout / "python")}
    return subprocess.run(
        ["bash", str(checkout / "scripts" / "test.sh"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_fast_loop_checks_and_runs_the_unit_tests_without_services(
    fake_checkout: Path,
) -> None:
    r = run_test_sh(fake_checkout, "--unit", "-x")
    assert r.returncode == 0, r.stderr
    assert not (fake_checkout / "services.log").exists(), "--unit ran scripts/services.sh"
    assert not (fake_checkout / ".services").exists()
    calls = (fake_checkout / "python.log").read_text().splitlines()
    assert calls[:3] == ["-m ruff check .", "-m ruff format --check .", "-m mypy"]
    assert calls[3:] == [
        "-m pytest -m not kafka and not cassandra and not secure tests/unit tests/bench "
        "tests/test_scripts.py tests/test_packaging.py -x"
    ]


def test_without_unit_the_services_start_and_stop_around_pytest(fake_checkout: Path) -> None:
    """What CI runs: the fake services.sh sees the start and the stop (so the test above would
    see one too), and pytest gets the arguments as given."""
    r = run_test_sh(fake_checkout, "-x")
    assert r.returncode == 0, r.stderr
    services = (fake_checkout / "services.log").read_text().splitlines()
    assert services == ["start kafka cassandra", "stop"]
    assert (fake_checkout / "python.log").read_text().splitlines()[3:] == ["-m pytest -x"]
