"""``crawl --save-to DIR`` (docs/assets.md, "Offline copy"): every reference the copy rewrote
resolves to one of its files, other text is kept, and a resumed crawl completes the copy."""

from __future__ import annotations

import posixpath
from pathlib import Path

import pytest

from streamcrawl.agents.content.css import css_refs
from streamcrawl.agents.content.offline import rewrite_html
from streamcrawl.topology.embedded.offline import STATE_DIR
from streamcrawl.topology.embedded.runner import EmbeddedCrawl
from tests.httpserver import RecordingServer
from tests.integration.test_assets_crawl import on_cdn, policy, site

pytestmark = pytest.mark.integration


def references(path: Path) -> list[str]:
    """Every reference of a saved HTML or CSS file."""
    text = path.read_text("utf-8", errors="replace")
    if path.suffix == ".css":
        return [ref.url for ref in css_refs(text)]
    found: list[str] = []
    rewrite_html(text, lambda href: found.append(href))  # type: ignore[func-returns-value]
    return found


def local_references(root: Path) -> dict[Path, list[str]]:
    """Saved HTML/CSS file -> its references that are not absolute URLs or fragments."""
    out = {}
    for path in root.rglob("*"):
        if STATE_DIR in path.parts or path.suffix not in (".html", ".css"):
            continue
        refs = references(path)
        out[path] = [r for r in refs if not r.startswith(("http:", "https:", "#", "mailto:"))]
    return out


def resolves(path: Path, ref: str) -> bool:
    target = posixpath.normpath(posixpath.join(path.parent.as_posix(), ref.split("#")[0]))
    return Path(target).is_file()


def crawl(srv: RecordingServer, tmp_path: Path) -> EmbeddedCrawl:
    return EmbeddedCrawl(
        policy(srv, max_pages=2),
        out_dir=tmp_path / "out",
        state_dir=tmp_path / "state",
        concurrency=4,
        save_to=tmp_path / "copy",
    )


async def test_every_rewritten_reference_resolves_to_a_file(tmp_path: Path) -> None:
    async with RecordingServer() as srv, RecordingServer() as cdn:
        site(srv, cdn)
        await crawl(srv, tmp_path).run()
    root = tmp_path / "copy"
    host = srv.url("/").split("://")[1].rstrip("/").replace(":", "_")
    home = root / host / "index.html"
    refs = local_references(root)
    assert sum(len(r) for r in refs.values()) >= 15
    for path, local in refs.items():
        assert all(resolves(path, ref) for ref in local), (path, local)
    text = home.read_text("utf-8")
    assert 'href="s.css"' in text and 'href="p2.html">next</a>' in text
    cdn_host = on_cdn(cdn, "/").split("://")[1].rstrip("/").replace(":", "_")
    assert f'href="../{cdn_host}/cdn.css"' in text
    # Not in the copy: absolute, so it still works online.
    assert f'<a href="{on_cdn(cdn, "/cdn-page")}">a page on the CDN</a>' in text
    assert 'src="private/x.png"' not in text and srv.url("/private/x.png") in text
    css = (root / host / "s.css").read_text("utf-8")
    assert css.startswith('@import url(s.css); @import "deep/0.css";')
    assert (root / cdn_host / "img" / "c.png").read_bytes() == b"\x89PNG"
    assert not list(root.rglob(".tmp-*"))  # no temporary file left


async def test_a_resumed_crawl_completes_the_copy(tmp_path: Path) -> None:
    async with RecordingServer() as srv, RecordingServer() as cdn:
        site(srv, cdn)
        first = crawl(srv, tmp_path)
        await first.start()
        while not await first.step():  # stop right after the first page is committed
            pass
        await first.close()
        host = srv.url("/").split("://")[1].rstrip("/").replace(":", "_")
        home = tmp_path / "copy" / host / "index.html"
        assert srv.url("/s.css") in home.read_text("utf-8")  # not saved yet: absolute
        await crawl(srv, tmp_path).run()
    text = home.read_text("utf-8")
    assert 'href="s.css"' in text and srv.url("/s.css") not in text
    for path, local in local_references(tmp_path / "copy").items():
        assert all(resolves(path, ref) for ref in local), (path, local)
