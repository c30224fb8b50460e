"""A crawl without ``--render`` never loads the render extra: ``playwright`` (and ``psutil``,
which the renderer measures the browser with) are imported only when a browser starts
(agents/render/browser.py), so the base install crawls without them."""

from __future__ import annotations

import subprocess
import sys

LOADED = """
import sys
import streamcrawl.topology.cli.main, streamcrawl.topology.cli.crawl
import streamcrawl.topology.embedded.runner, streamcrawl.agents.net.stages
import streamcrawl.agents.net.subrequests, streamcrawl.agents.render.browser
print(sorted(m for m in ("playwright", "psutil") if m in sys.modules))
"""


def test_the_crawl_modules_do_not_import_playwright() -> None:
    out = subprocess.run(
        [sys.executable, "-c", LOADED], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
