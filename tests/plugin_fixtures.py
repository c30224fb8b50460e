"""Plugins for tests, one of each kind and a few that misbehave, in a registry a test hands to
a crawl (``Table``): nothing is installed, nothing leaks into other tests (docs/plugins.md).
For a ``streamcrawl`` subprocess: ``example_plugins_env``, the example package by entry point."""

from __future__ import annotations

import os
import time
import tomllib
from pathlib import Path
from typing import Any

import msgspec

from streamcrawl.agents.plugins.api import PageView, Plugin, Source
from streamcrawl.agents.plugins.registry import Table


class WordArgs(msgspec.Struct, forbid_unknown_fields=True):
    word: str


class NoWord:
    """URL filter: refuses a URL that contains ``word``."""

    def __init__(self, args: WordArgs) -> None:
        self.word = args.word
        self.asked: list[tuple[str, int, Source]] = []

    def check(self, url: str, *, depth: int, source: Source) -> str | None:
        self.asked.append((url, depth, source))
        return f"has {self.word}" if self.word in url else None


class DataLinks:
    """Link extractor: follows the ``data-href`` of every element, drops links to /drop."""

    def links(self, page: PageView, links: list[str]) -> list[str]:
        assert page.tree is not None
        kept = [u for u in links if not u.endswith("/drop")]
        return kept + [str(n.attributes["data-href"]) for n in page.tree.css("[data-href]")]


class Heading:
    """Page extractor: the page's first h1 and how many fields ``data`` had before it."""

    def extract(self, page: PageView) -> dict[str, Any]:
        node = page.tree.css_first("h1") if page.tree is not None else None
        return {"h1": node.text() if node is not None else None, "before": len(page.data or {})}


class Raises:
    def extract(self, page: PageView) -> dict[str, Any]:
        raise ValueError(f"no luck on {page.url.rsplit('/', 1)[-1] or 'home'}")


class Slow:
    def extract(self, page: PageView) -> dict[str, Any]:
        time.sleep(0.05)
        return {"late": True}


class RaisingFilter:
    def check(self, url: str, *, depth: int, source: Source) -> str | None:
        raise RuntimeError("broken filter")


PLUGINS = {
    "no_word": Plugin("url_filter", NoWord, WordArgs),
    "data_links": Plugin("link_extractor", DataLinks),
    "heading": Plugin("page_extractor", Heading),
    "raises": Plugin("page_extractor", Raises),
    "slow": Plugin("page_extractor", Slow, budget=0.01),
    "raising_filter": Plugin("url_filter", RaisingFilter),
}


def registry() -> Table:
    return Table(PLUGINS)


EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "plugins"


def example_plugins_env(tmp: Path) -> dict[str, str]:
    """``PYTHONPATH`` that gives a process the example plugins (``examples/plugins``) as if
    installed: the package's sources, and under ``tmp`` a ``.dist-info`` with the entry points
    of its own ``pyproject.toml``. Nothing is installed into the test's environment."""
    project = tomllib.loads((EXAMPLES / "pyproject.toml").read_text())["project"]
    points = project["entry-points"]["streamcrawl.plugins"]
    dist = tmp / "plugins-site" / "streamcrawl_example_plugins-0.1.0.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
    )
    lines = [f"{name} = {value}" for name, value in points.items()]
    (dist / "entry_points.txt").write_text("[streamcrawl.plugins]\n" + "\n".join(lines) + "\n")
    paths = [str(EXAMPLES / "src"), str(dist.parent), os.environ.get("PYTHONPATH", "")]
    return {"PYTHONPATH": os.pathsep.join(p for p in paths if p)}
