"""docs/extraction.md's crawl of the local shop, run as the doc shows it: the site served from
``examples/shop`` with Python's http.server, the crawl command with the doc's own flags, and
each page's ``{url, data}`` against the lines the doc prints; then the doc's refused specs
against the errors it prints."""

from __future__ import annotations

import json
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.site import STREAMCRAWL, free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs/extraction.md").read_text()


def doc_blocks() -> list[str]:
    return re.findall(r"```(?:sh)?\n(.*?)```", DOC, re.S)


def wait_listening(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def crawl_the_shop(
    serve: list[str], crawl: str, tmp_path: Path
) -> tuple[subprocess.CompletedProcess[str], int]:
    """``crawl`` (the doc's arguments of ``streamcrawl crawl``) of examples/shop served by
    ``python -m http.server PORT *serve`` on a free port, in ``tmp_path``: (its run, PORT)."""
    port = free_port()
    site = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), *serve],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_listening(port)
        args = shlex.split(crawl.replace("8000", str(port)))
        done = subprocess.run(
            [STREAMCRAWL, "crawl", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        site.terminate()
        site.wait(10)
    return done, port


def test_the_shop_crawl_of_the_doc(tmp_path: Path) -> None:
    commands, printed = doc_blocks()[0], doc_blocks()[1]
    server = re.search(r"python3 -m http.server 8000 (.*?) &\n", commands)
    crawl = re.search(r"streamcrawl crawl (.*?)\n(?!\s)", commands.replace("\\\n", " "))
    assert server is not None and crawl is not None, commands
    assert "jq -c '{url, data}' out/pages.jsonl" in commands
    done, port = crawl_the_shop(shlex.split(server.group(1)), crawl.group(1), tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("done: 3 pages ")
    lines = (tmp_path / "out/pages.jsonl").read_text().splitlines()
    got = [{"url": p["url"], "data": p["data"]} for p in map(json.loads, lines)]
    want = [json.loads(line.replace("8000", str(port))) for line in printed.splitlines()]
    assert got == want


def test_the_refused_specs_of_the_doc(tmp_path: Path) -> None:
    block = doc_blocks()[2]
    runs = re.findall(r"^\$ streamcrawl (.*)\n(.*)$", block, re.M)
    assert len(runs) == 2, block
    for argv, error in runs:
        done = subprocess.run(
            [STREAMCRAWL, *shlex.split(argv), "--out", str(tmp_path / "out")],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stderr) == (2, error + "\n")
    assert not (tmp_path / "out").exists()


def test_the_main_text_crawl_of_the_doc(tmp_path: Path) -> None:
    """The "Main text and language" section: the shop crawled with --text, each page's
    ``{url, language, main_text}`` against the lines the doc prints."""
    blocks = doc_blocks()
    at = next(i for i, b in enumerate(blocks) if "{url, language, main_text}" in b)
    commands, printed = blocks[at], blocks[at + 1]
    crawl = re.search(r"streamcrawl crawl (.*?)\n", commands)
    assert crawl is not None and "--text" in crawl.group(1), commands
    assert "jq -c '{url, language, main_text}' out/pages.jsonl" in commands
    serve = ["--bind", "127.0.0.1", "--directory", "examples/shop"]
    done, port = crawl_the_shop(serve, crawl.group(1), tmp_path)
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "out/pages.jsonl").read_text().splitlines()
    keys = ("url", "language", "main_text")
    got = [{k: p[k] for k in keys} for p in map(json.loads, lines)]
    assert got == [json.loads(line.replace("8000", str(port))) for line in printed.splitlines()]
