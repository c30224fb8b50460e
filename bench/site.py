"""Deterministic synthetic web for the crawler benchmark (bench/README.md, "The synthetic web").

``generate(root, origins=M, pages=P)`` writes M origins (one directory per port on 127.0.0.1),
each with P HTML pages of about 24 KB and about 30 links, a ``robots.txt`` that disallows
``/private/``, and a few private pages (which must never be fetched).  Everything is derived from
``seed``: the same arguments always give byte-identical files.

Link kinds on every page (all on 127.0.0.1, never another host):

* tree links: page n links plainly to pages 2n+1 and 2n+2 of its origin, and every root links to
  the next origin's root, so every public page is reachable from *any* root;
* random same-origin links in every spelling: relative (``p42.html``, ``../s3/p42.html``),
  root-relative, absolute, with ``#fragments``, with tracking parameters (``utm_*``, ``gclid``)
  that canonicalize to the page itself;
* cross-origin links to random pages of other ports;
* links into ``/private/`` (relative and absolute), disallowed by robots.txt.

The exact expected set of canonical page URLs (``http://127.0.0.1:PORT/path``, no fragment, no
query) is written to ``expected.txt``; the roots are in ``seeds.txt``; ``site.json`` describes
the site.  Page 0 of each origin is ``/`` (served from ``index.html``); page n > 0 is
``/s{n % SECTIONS}/p{n}.html``.
"""

from __future__ import annotations

import argparse
import json
import os
import posixpath
import random
from dataclasses import asdict, dataclass
from pathlib import Path

SECTIONS = 8
PRIVATE_PAGES = 4
TARGET_BYTES = 24 * 1024
ROBOTS_TXT = "User-agent: *\nDisallow: /private/\n"
TRACKING = ("utm_source=newsletter&utm_medium=email", "utm_campaign=spring", "gclid=EAIaIQobChMI")

_WORDS = [
    "crawl",
    "frontier",
    "origin",
    "politeness",
    "robots",
    "canonical",
    "fetch",
    "parse",
    "sink",
    "kafka",
    "partition",
    "table",
    "rocksdb",
    "cassandra",
    "worker",
    "agent",
    "stream",
    "offset",
    "record",
    "schema",
    "page",
    "link",
    "anchor",
    "fragment",
    "query",
    "delay",
    "budget",
    "depth",
    "scope",
    "host",
    "port",
    "queue",
    "backoff",
    "retry",
    "timeout",
    "redirect",
    "charset",
    "title",
    "body",
]


@dataclass(frozen=True)
class SiteSpec:
    """What was generated; saved as ``site.json`` beside the pages."""

    root: str
    origins: int
    pages: int
    base_port: int
    seed: int
    links_per_page: int
    expected_pages: int

    @property
    def ports(self) -> list[int]:
        return [self.base_port + i for i in range(self.origins)]

    def origin(self, i: int) -> str:
        return f"http://127.0.0.1:{self.base_port + i}"

    @property
    def seeds(self) -> list[str]:
        return [self.origin(i) + "/" for i in range(self.origins)]

    @classmethod
    def load(cls, root: str | Path) -> SiteSpec:
        return cls(**json.loads((Path(root) / "site.json").read_text()))


def page_path(n: int) -> str:
    """URL path of page ``n`` of an origin."""
    return "/" if n == 0 else f"/s{n % SECTIONS}/p{n}.html"


def file_path(n: int) -> str:
    """File (relative to the origin directory) that serves page ``n``."""
    return "index.html" if n == 0 else f"s{n % SECTIONS}/p{n}.html"


def relative_href(from_path: str, to_path: str) -> str:
    """A relative reference from the page at ``from_path`` to ``to_path`` (both URL paths)."""
    from_dir = posixpath.dirname(from_path)
    rel = posixpath.relpath(to_path, from_dir or "/")
    if to_path.endswith("/") and not rel.endswith("/"):
        rel += "/"
    return "./" if rel in (".", "./") else rel


def expected_urls(origins: int, pages: int, base_port: int) -> list[str]:
    """The exact set of canonical URLs a complete, robots-respecting crawl fetches."""
    return [
        f"http://127.0.0.1:{base_port + i}{page_path(n)}"
        for i in range(origins)
        for n in range(pages)
    ]


def _paragraphs(rng: random.Random, count: int) -> list[str]:
    return [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(40, 90))) for _ in range(count)]


class _PageWriter:
    def __init__(self, spec: SiteSpec, rng: random.Random) -> None:
        self.spec = spec
        self.rng = rng
        self.paras = _paragraphs(rng, 64)

    def links(self, origin: int, n: int) -> list[str]:
        """The hrefs of page ``n`` of origin index ``origin`` (order is shuffled, fixed by seed)."""
        spec, rng = self.spec, self.rng
        me = page_path(n)
        own = spec.origin(origin)
        hrefs: list[str] = []
        for child in (2 * n + 1, 2 * n + 2):  # tree: reachability without any canonicalization
            if child < spec.pages:
                hrefs.append(relative_href(me, page_path(child)))
        if n == 0 and spec.origins > 1:  # ring of roots: every origin reachable from any root
            hrefs.append(spec.origin((origin + 1) % spec.origins) + "/")
        if n > 0:
            hrefs.append(relative_href(me, page_path((n - 1) // 2)))  # parent
        spellings = (
            lambda p: relative_href(me, p),
            lambda p: p,
            lambda p: own + p,
            lambda p: relative_href(me, p) + f"#sec{rng.randint(1, 5)}",
            lambda p: p + "?" + rng.choice(TRACKING),
            lambda p: own + p + "?" + rng.choice(TRACKING) + "#top",
        )
        for _ in range(20):
            target = page_path(rng.randrange(spec.pages))
            hrefs.append(rng.choice(spellings)(target))
        if spec.origins > 1:
            for _ in range(4):
                other = rng.randrange(spec.origins - 1)
                other += other >= origin
                hrefs.append(spec.origin(other) + page_path(rng.randrange(spec.pages)))
        private = f"/private/x{rng.randrange(PRIVATE_PAGES)}.html"
        hrefs.append(relative_href(me, private))
        hrefs.append(own + f"/private/x{rng.randrange(PRIVATE_PAGES)}.html?utm_source=leak")
        rng.shuffle(hrefs)
        return hrefs

    def html(self, origin: int, n: int) -> str:
        hrefs = self.links(origin, n)
        rng = self.rng
        head = (
            f"<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            f"<title>Origin {origin} page {n}</title></head>\n<body>\n"
            f"<h1 id=top>Origin {origin} page {n}</h1>\n"
        )
        parts = [head]
        # Interleave links with text so that the page looks like a page, not a link farm.
        for i, href in enumerate(hrefs):
            parts.append(
                f'<p id=sec{i % 5 + 1}>{rng.choice(self.paras)} <a href="{href}">link {i}</a></p>\n'
            )
        size = sum(len(p) for p in parts)
        while size < TARGET_BYTES - 200:
            para = f"<p>{rng.choice(self.paras)}</p>\n"
            parts.append(para)
            size += len(para)
        parts.append("</body></html>\n")
        return "".join(parts)


def generate(
    root: str | Path, origins: int = 4, pages: int = 500, base_port: int = 20000, seed: int = 6
) -> SiteSpec:
    """Write the site under ``root`` (created; files are overwritten); return its spec."""
    if origins < 1 or pages < 1:
        raise ValueError("need at least one origin and one page")
    root = Path(root)
    spec = SiteSpec(str(root), origins, pages, base_port, seed, 0, origins * pages)
    writer = _PageWriter(spec, random.Random(seed))
    link_total = 0
    for i, port in enumerate(spec.ports):
        odir = root / str(port)
        for d in [odir / "private"] + [odir / f"s{s}" for s in range(SECTIONS)]:
            d.mkdir(parents=True, exist_ok=True)
        (odir / "robots.txt").write_text(ROBOTS_TXT)
        for k in range(PRIVATE_PAGES):
            (odir / "private" / f"x{k}.html").write_text(f"<html><body>private {k}</body></html>\n")
        for n in range(pages):
            text = writer.html(i, n)
            link_total += text.count("<a href=")
            (odir / file_path(n)).write_text(text)
    spec = SiteSpec(**{**asdict(spec), "links_per_page": round(link_total / spec.expected_pages)})
    (root / "site.json").write_text(json.dumps(asdict(spec), indent=1) + "\n")
    (root / "expected.txt").write_text("\n".join(expected_urls(origins, pages, base_port)) + "\n")
    (root / "seeds.txt").write_text("\n".join(spec.seeds) + "\n")
    return spec


def read_expected(root: str | Path) -> set[str]:
    return set(Path(root, "expected.txt").read_text().split())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root")
    ap.add_argument("--origins", type=int, default=4)
    ap.add_argument("--pages", type=int, default=500)
    ap.add_argument("--base-port", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=6)
    a = ap.parse_args(argv)
    spec = generate(a.root, a.origins, a.pages, a.base_port, a.seed)
    os.sync()
    print(json.dumps(asdict(spec)))


if __name__ == "__main__":
    main()
