"""``crawl --warc DIR --assets all`` (docs/assets.md, "Archives that replay"): the archive of a
styled page replays in pywb with its styles and images. pywb's ``wayback`` (from a venv of its
own: tests/pywb_tools.py) serves two collections on 127.0.0.1, one built from a crawl with
assets and one from the same crawl without; headless Chromium (no name resolved, so nothing but
the replay server on 127.0.0.1 is reached) loads the page from each. With its assets no request
of the page fails, the stylesheets apply, every image decodes, among them the ones archived as
digest revisits, and the screenshot differs from the page replayed without them."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.asset_site import BACKGROUND_RGB, HEADING_RGB, css_color
from streamcrawl.schemas.records import AssetType, CrawlPolicy
from streamcrawl.topology.embedded.runner import EmbeddedCrawl
from tests.browser import chromium, natural_width, needs_chromium, style, visit
from tests.httpserver import RecordingServer
from tests.integration.test_offline_browser import ALL, serve
from tests.pywb_tools import pywb_bin

pytestmark = [pytest.mark.integration, needs_chromium]

CHECKS = {
    "heading": style("#title", "color"),
    "background": style("body", "backgroundColor"),
    **{name: natural_width(f"#{name}") for name in ("logo", "photo", "own", "copy", "cdnlogo")},
}


async def archive(
    srv: RecordingServer, tmp_path: Path, name: str, assets: tuple[AssetType, ...]
) -> Path:
    spec = CrawlPolicy(
        crawl_id=name, seeds=(srv.url("/"),), delay=0.0, max_pages=2, assets=assets, warc=True
    )
    warc = tmp_path / name / "warc"
    state = tmp_path / name
    await EmbeddedCrawl(spec, out_dir=state / "out", state_dir=state / "state", warc=warc).run()
    return warc


def collection(root: Path, name: str, warc: Path) -> None:
    """pywb's collection ``name`` under ``root``, of the WARC files of ``warc``."""
    bin_ = pywb_bin()
    run = dict(cwd=root, check=True, capture_output=True, timeout=120)
    subprocess.run([bin_ / "wb-manager", "init", name], **run)  # type: ignore[call-overload]
    files = sorted(str(p) for p in warc.glob("*.warc.gz"))
    subprocess.run([bin_ / "wb-manager", "add", name, *files], **run)  # type: ignore[call-overload]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def wayback(root: Path) -> Iterator[str]:
    """pywb's server on 127.0.0.1 over the collections of ``root``; its base URL."""
    (root / "config.yaml").write_text("framed_replay: false\n")
    port = free_port()
    log = (root / "wayback.log").open("wb")
    proc = subprocess.Popen(
        [pywb_bin() / "wayback", "-b", "127.0.0.1", "-p", str(port), "-t", "8"],
        cwd=root,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(base + "/", timeout=5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError((root / "wayback.log").read_text()) from None
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def revisits(warc: Path) -> set[str]:
    from warcio.archiveiterator import ArchiveIterator

    out = set()
    for path in warc.glob("*.warc.gz"):
        with path.open("rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type == "revisit":
                    out.add(record.rec_headers.get_header("WARC-Target-URI"))
    return out


async def test_the_archive_replays_in_pywb_with_its_styles_and_images(tmp_path: Path) -> None:
    async with RecordingServer() as srv, RecordingServer() as cdn:
        serve(srv, cdn)
        styled = await archive(srv, tmp_path, "styled", ALL)
        bare = await archive(srv, tmp_path, "bare", ())
        home = srv.url("/")
        cdn_logo = cdn.url("/img/logo.png").replace("127.0.0.1", "localhost")
    # The copies of the logo are revisits of its first response (digest dedupe).
    assert revisits(styled) == {srv.url("/img/logo-copy.png"), cdn_logo}
    root = tmp_path / "pywb"
    root.mkdir()
    collection(root, "styled", styled)
    collection(root, "bare", bare)
    with wayback(root) as base:
        async with chromium() as browser:
            seen = await visit(browser, f"{base}/styled/{home}", CHECKS)
            unstyled = await visit(browser, f"{base}/bare/{home}", CHECKS)
    assert (seen.failed, seen.errors) == ([], [])
    assert len(seen.requests) >= 10
    assert [u for u in seen.requests if not u.startswith(base + "/")] == []
    v = seen.values
    assert (v["heading"], v["background"]) == (css_color(HEADING_RGB), css_color(BACKGROUND_RGB))
    assert (v["logo"], v["photo"], v["own"], v["copy"], v["cdnlogo"]) == (64, 120, 40, 64, 64)
    # Without its assets the same page is another picture, and its asset requests fail.
    assert unstyled.values["background"] != css_color(BACKGROUND_RGB)
    assert unstyled.values["copy"] == 0 and len(unstyled.errors) >= 5
    assert seen.screenshot != unstyled.screenshot
