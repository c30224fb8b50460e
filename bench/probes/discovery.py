"""Discovery bench: CPU per page of a site found only through a gzipped sitemap index, against
a link-only crawl of the same pages (docs/performance.md, "Canonicalization and discovery").

Run: ``python -m bench.probes.discovery [--pages N] [--runs R]``. Two sites of N pages with the same
body filler, served by ``python -m http.server`` in a subprocess (its CPU is not counted):

* ``links``: page n links to pages 2n+1 and 2n+2 (a tree from ``/``), no sitemap;
* ``sitemap``: no page links to another; robots.txt lists a gzipped sitemap index of two
  gzipped sitemaps that list every page (with ``lastmod``).

Each run is one embedded crawl (delay 0, concurrency 16) in this process; the row is the
median over runs of process CPU seconds (``time.process_time``) divided by pages fetched. The
sitemap crawl also pays for its three sitemap fetches and their parsing.

Informs: whether finding a site's pages through its sitemaps costs more per page than following
its links, and so needs work of its own (docs/performance.md, "Canonicalization and discovery":
it costs the same).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from streamcrawl.schemas.records import CrawlPolicy
from streamcrawl.topology.embedded.runner import EmbeddedCrawl

FILLER = " ".join(f"word{i % 97}" for i in range(1500))  # about 12 KB of text per page


def _page(n: int, links: list[int]) -> str:
    anchors = "".join(f'<a href="/p{j}.html">page {j}</a> ' for j in links)
    return f"<html><head><title>p{n}</title></head><body><p>{FILLER}</p>{anchors}</body></html>"


def build(root: Path, pages: int, kind: str, origin: str) -> None:
    root.mkdir(parents=True)
    for n in range(pages):
        children = [j for j in (2 * n + 1, 2 * n + 2) if j < pages] if kind == "links" else []
        name = "index.html" if n == 0 else f"p{n}.html"
        (root / name).write_text(_page(n, children))
    robots = "User-agent: *\nAllow: /\n"
    if kind == "sitemap":
        ns = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
        half = pages // 2
        for part, rng in (("a", range(1, half)), ("b", range(half, pages))):
            rows = "".join(
                f"<url><loc>{origin}/p{n}.html</loc><lastmod>2024-01-01</lastmod></url>"
                for n in rng
            )
            (root / f"{part}.xml.gz").write_bytes(
                gzip.compress(f"<urlset {ns}>{rows}</urlset>".encode())
            )
        index = "".join(f"<sitemap><loc>{origin}/{p}.xml.gz</loc></sitemap>" for p in "ab")
        (root / "index.xml.gz").write_bytes(
            gzip.compress(f"<sitemapindex {ns}>{index}</sitemapindex>".encode())
        )
        robots += f"Sitemap: {origin}/index.xml.gz\n"
    (root / "robots.txt").write_text(robots)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(root: Path, port: int) -> subprocess.Popen[bytes]:
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/robots.txt", timeout=1).close()
            return server
        except OSError:
            time.sleep(0.05)
    server.kill()
    raise RuntimeError("http.server did not start")


def crawl_cpu(kind: str, pages: int, work: Path, run: int) -> tuple[float, int]:
    """(CPU seconds, pages fetched) of one embedded crawl of a fresh ``kind`` site."""
    port = _free_port()
    origin = f"http://127.0.0.1:{port}"
    root = work / f"{kind}-{run}"
    build(root / "site", pages, kind, origin)
    server = _serve(root / "site", port)
    try:
        policy = CrawlPolicy(crawl_id="bench", seeds=(origin + "/",), delay=0.0)
        crawl = EmbeddedCrawl(
            policy, out_dir=root / "out", state_dir=root / "state", concurrency=16
        )
        start = time.process_time()
        summary = asyncio.run(crawl.run())
        return time.process_time() - start, summary.pages
    finally:
        server.terminate()
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    per_page: dict[str, list[float]] = {"links": [], "sitemap": []}
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            for kind in per_page:  # alternated, so that machine load hits both alike
                cpu, fetched = crawl_cpu(kind, args.pages, Path(tmp), run)
                if fetched != args.pages:
                    raise SystemExit(f"{kind}: {fetched} of {args.pages} pages fetched")
                per_page[kind].append(cpu / fetched * 1e3)
    for kind, values in per_page.items():
        runs = ", ".join(f"{v:.2f}" for v in values)
        print(f"{kind:>8}: median {statistics.median(values):.2f} ms CPU/page ({runs})")


if __name__ == "__main__":
    main()
