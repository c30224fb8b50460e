"""docs/api.md's examples, run as the page shows them.

The README tour's site is served by the page's own commands (on a free port instead of 8000);
each Python example runs as a script in a fresh folder, and what it prints is compared with what
the page shows. The page stream example reads pages published on a Kafka topic prefix of the
test's own.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from streamcrawl.schemas.codec import encode
from streamcrawl.topology.admin import topics as admin
from streamcrawl.topology.settings import load_settings
from tests.integration.site import free_port
from tests.integration.test_api_pages import publish
from tests.integration.test_page_stream_contract import as_version_2, make_page, value_of

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs/api.md").read_text("utf-8")


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC, re.S)


def test_every_python_example_is_run_here() -> None:
    assert len(blocks("python")) == 3  # titles, resume, page stream: one test each below


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The page's site, built and served by its commands; the port it listens on."""
    port = free_port()
    folder = tmp_path_factory.mktemp("site") / "site"
    commands = blocks("sh")[0].replace("8000", str(port)).replace("build/site", str(folder))
    commands = commands.replace("python3 ", f"{sys.executable} ")
    started = subprocess.run(
        ["bash", "-c", commands + "echo $!\n"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    server = int(started.stdout.split()[-1])  # the backgrounded http.server
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the doc's site did not start"
                time.sleep(0.1)
        yield port
    finally:
        os.kill(server, signal.SIGTERM)


def run(example: str, cwd: Path, port: int = 8000, env: dict[str, str] | None = None) -> str:
    """What ``example`` prints, run as a script in ``cwd`` against ``port``."""
    (cwd / "example.py").write_text(example.replace("8000", str(port)))
    done = subprocess.run(
        [sys.executable, "example.py"],
        cwd=cwd, capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_titles_example(site: int, tmp_path: Path) -> None:
    printed = run(blocks("python")[0], tmp_path, site).splitlines()
    shown = blocks("text")[0].replace("8000", str(site)).splitlines()
    assert printed[: len(shown)] == shown
    assert f"{len(printed)} in all" in DOC
    assert len((tmp_path / "out/pages.jsonl").read_text().splitlines()) == len(printed)


def test_the_resume_example(site: int, tmp_path: Path) -> None:
    assert run(blocks("python")[1], tmp_path, site) == blocks("text")[1]


@pytest.mark.kafka
def test_the_page_stream_example(kafka_bootstrap: str, topic_prefix: str, tmp_path: Path) -> None:
    settings = load_settings(
        kafka_bootstrap=kafka_bootstrap, topic_prefix=topic_prefix, partitions=1
    )
    admin.create_topics(settings)
    tour = [make_page("tour", "http://127.0.0.1:8000", i) for i in range(3)]
    tour[1] = as_version_2(tour[1])  # a producer not yet upgraded
    another = make_page("another", "http://127.0.0.1:8000", 9)
    publish(settings, [*map(value_of, tour), encode(another)])
    env = {
        **os.environ,
        "STREAMCRAWL_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "STREAMCRAWL_TOPIC_PREFIX": topic_prefix,
    }
    printed = run(blocks("python")[2], tmp_path, env=env)
    assert printed.splitlines() == [f"{page.v} {page.url} {page.title}" for page in tour]
