"""docs/requests.md's login-protected crawl, run as the doc shows it: the example site, the
credential in the environment, the crawl command with the doc's own flags, and the site's log
against the one the doc prints."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.site import STREAMCRAWL, free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs/requests.md").read_text()


def doc_blocks() -> list[str]:
    return re.findall(r"```(?:sh)?\n(.*?)```", DOC, re.S)


def test_the_login_protected_crawl_of_the_doc(tmp_path: Path) -> None:
    commands, site_log = doc_blocks()[0], doc_blocks()[1]
    credential = re.search(r"export STREAMCRAWL_CREDENTIAL_PARTNER='(.*?)'", commands)
    crawl = re.search(r"streamcrawl crawl (.*?)\n(?!\s)", commands.replace("\\\n", " "))
    assert credential is not None and crawl is not None, commands
    port = free_port()
    args = shlex.split(crawl.group(1).replace("8766", str(port + 1)).replace("8765", str(port)))
    site = subprocess.Popen(
        [sys.executable, str(ROOT / "examples/login_site.py"), "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert site.stdout is not None
        assert site.stdout.readline().startswith("serving ")
        env = {**os.environ, "STREAMCRAWL_CREDENTIAL_PARTNER": credential.group(1)}
        done = subprocess.run(
            [STREAMCRAWL, "crawl", *args, "--no-progress"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert "done: 6 pages" in done.stdout and "urls: fetched 6" in done.stdout
        time.sleep(0.2)
    finally:
        site.terminate()
        out, _ = site.communicate(10)
    assert sorted(out.splitlines()) == sorted(site_log.strip().splitlines())
    without = subprocess.run(
        [STREAMCRAWL, "crawl", *args], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert without.returncode == 2
    assert without.stderr.strip() == (
        "streamcrawl: error: credential PARTNER is not set on this process: "
        "set STREAMCRAWL_CREDENTIAL_PARTNER"
    )
