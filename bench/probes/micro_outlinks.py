"""What a page's outlinks cost the worker: CPU per page of link extraction on a real HTML tree.

``python -m bench.probes.micro_outlinks [--html DIR] [--baseline FILE]`` parses every ``*.html`` of
``DIR`` (default: the Debian postgresql-doc-15 tree) and prints, per page, medians of 5 rounds of
process CPU time: ``parse_html`` (which now also reads anchor texts and rel tokens),
``page_links`` (canonicalize, deduplicate, scope-check the listed links: ``Page.links``) and
``Canonicalizer.links`` of the same hrefs (what the stages already paid to group them). With
``--baseline FILE`` (an earlier ``agents/content/parse.py``, e.g.
``git show REV:agents/content/parse.py > /tmp/parse_before.py``) that parser is timed too.
Then the distribution of links per page and of bytes per listed link and per page's ``links`` array.

Informs: the default bound on the links a page record lists, and what listing them costs the
worker (docs/performance.md, "Outlinks in the page record").
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from streamcrawl.agents.content.outlinks import page_links
from streamcrawl.agents.content.parse import ParsedPage, parse_html
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.schemas.records import CrawlPolicy

BASE = "http://127.0.0.1:8000/"
ROUNDS = 5


def cpu_us_per_page(run: Callable[[], object], pages: int) -> float:
    """Median over ``ROUNDS`` of the process CPU microseconds of ``run`` per page."""
    samples = []
    for _ in range(ROUNDS):
        start = time.process_time()
        run()
        samples.append((time.process_time() - start) / pages * 1e6)
    return round(statistics.median(samples), 1)


def load_parser(path: Path) -> Callable[[str, str], Any]:
    spec = importlib.util.spec_from_file_location("parse_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    parse: Callable[[str, str], Any] = module.parse_html
    return parse


def percentiles(values: list[int]) -> dict[str, float]:
    values = sorted(values)
    return {
        "median": statistics.median(values),
        "p90": values[9 * len(values) // 10],
        "p99": values[99 * len(values) // 100],
        "max": values[-1],
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.probes.micro_outlinks", description=__doc__)
    ap.add_argument("--html", type=Path, default=Path("/usr/share/doc/postgresql-doc-15/html"))
    ap.add_argument(
        "--baseline", type=Path, help="an earlier agents/content/parse.py to time as well"
    )
    args = ap.parse_args(argv)
    docs = [
        (BASE + f.name, f.read_text("utf-8", errors="replace"))
        for f in sorted(args.html.glob("*.html"))
    ]
    rules = CrawlRules.from_policy(CrawlPolicy(crawl_id="c", seeds=(BASE + "index.html",)))
    parsed: list[ParsedPage] = [parse_html(html, url) for url, html in docs]
    out: dict[str, Any] = {"pages": len(docs)}
    if args.baseline:
        old = load_parser(args.baseline)
        out["baseline_parse_us"] = cpu_us_per_page(lambda: [old(h, u) for u, h in docs], len(docs))
    out["parse_us"] = cpu_us_per_page(lambda: [parse_html(h, u) for u, h in docs], len(docs))
    out["page_links_us"] = cpu_us_per_page(
        lambda: [page_links(p.links, (), rules, p.base, 1) for p in parsed], len(docs)
    )
    out["canonical_links_us"] = cpu_us_per_page(
        lambda: [rules.canonicalizer.links([x.href for x in p.links], p.base) for p in parsed],
        len(docs),
    )
    listed = [page_links(p.links, (), rules, p.base, 1) for p in parsed]
    encode = msgspec.json.encode
    out["links_per_page"] = percentiles([found.total for found in listed])
    out["bytes_per_link"] = percentiles([len(encode(x)) + 1 for f in listed for x in f.links])
    out["links_bytes_per_page"] = percentiles([len(encode(found.links)) for found in listed])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
