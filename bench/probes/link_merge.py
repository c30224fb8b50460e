"""How many ``frontier`` messages a page makes, from the site's links and the partition count.

A worker sends a page's links to other origins in ``LinkBatches`` flushes: one message per
partition that any report of the flush links (``agents.stream.links``). A flush must go before
the earliest waiting report's origin may start its next request, so at a politeness-bound rate
it takes the reports of about one delay: ``r`` of them. With ``P`` partitions and reports that
each link a few of them, a flush of ``r`` reports sends ``P (1 - (1 - p/P)^r)`` messages at
most, one per partition once ``r`` is large; so ``W`` workers, each with ``r / W`` reports a
flush, send up to ``W`` times as many messages for the same pages.

This reads which partitions each page of a generated site (``bench/site.py``) links, then draws
flushes of ``r`` pages at random from each worker's pages (Monte Carlo) for the messages per
page; ``--measured M`` (one worker's messages per page, from its ``/metrics``) fits ``r`` and
predicts ``W`` workers. Which worker owns which partition is an assumption (round-robin by
partition number); every other figure is the site's and the partitioner's.

    python -m bench.probes.link_merge --origins 16 --pages 100 --partitions 12 --measured 0.62

The site is generated as ``bench.worker_rows`` generates it (seed 6, first port ``--base-port``).

Informs: whether the links' ``frontier`` messages are what makes two workers dearer than one,
and whether longer link flushes could merge them (docs/performance.md, "What a second worker
costs").
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections.abc import Sequence
from pathlib import Path

from streamcrawl.agents.stream.partitioner import key_hash

ABSOLUTE = re.compile(r'href="(https?://[^/"]+)')


def page_partitions(root: Path, partitions: int) -> list[tuple[int, frozenset[int]]]:
    """For each page of the site under ``root``: its origin's partition and the partitions of
    the other origins it links (absolute hrefs; the site's relative ones are its own origin's,
    which ride in the page's outcome, not in ``frontier``)."""
    from bench.site import SiteSpec

    spec = SiteSpec.load(root)
    origins = [spec.origin(i) for i in range(spec.origins)]
    partition = {o: key_hash(o.encode()) % partitions for o in origins}
    out = []
    for port, own in zip(spec.ports, origins, strict=True):
        for page in sorted((root / str(port)).rglob("*.html")):
            if "private" in page.parts:
                continue
            linked = set(ABSOLUTE.findall(page.read_text())) - {own}
            for o in linked - partition.keys():  # not one of the site's origins
                partition[o] = key_hash(o.encode()) % partitions
            out.append((partition[own], frozenset(partition[o] for o in linked)))
    return out


def messages_per_page(
    pages: Sequence[frozenset[int]], reports: float, trials: int = 2000, seed: int = 1
) -> float:
    """Mean messages per page of flushes of ``reports`` pages drawn from ``pages`` (a fraction
    is a flush of one more page that often)."""
    rng = random.Random(seed)
    whole, extra = int(reports), reports - int(reports)
    total = 0.0
    for _ in range(trials):
        n = max(1, min(len(pages), whole + (rng.random() < extra)))
        flush = rng.sample(pages, n)
        total += len(frozenset().union(*flush)) / n
    return total / trials


def with_workers(
    pages: Sequence[tuple[int, frozenset[int]]], reports: float, workers: int
) -> float:
    """Messages per page when ``workers`` workers share the partitions round-robin and each
    flush of a worker takes ``reports / workers`` of its own pages (the same delay, a share of
    the rate)."""
    total = 0.0
    for w in range(workers):
        own = [linked for part, linked in pages if part % workers == w]
        if own:
            total += messages_per_page(own, reports / workers) * len(own)
    return total / len(pages)


def fit_reports(pages: Sequence[tuple[int, frozenset[int]]], measured: float) -> float:
    """The reports per flush at which one worker makes ``measured`` messages per page (more
    reports, fewer messages: bisection over 1 to 1,000)."""
    low, high = 1.0, 1000.0
    for _ in range(30):
        mid = (low + high) / 2
        if with_workers(pages, mid, 1) > measured:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--site", type=Path, help="a generated site (default: generate one)")
    ap.add_argument("--origins", type=int, default=16)
    ap.add_argument("--pages", type=int, default=100)
    ap.add_argument(
        "--base-port",
        type=int,
        default=21000,
        help="the site's first port (origins hash to partitions by it): bench.worker_rows' 21000",
    )
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--measured", type=float, help="one worker's frontier messages per page")
    ap.add_argument("--reports", type=float, help="reports per flush (instead of --measured)")
    args = ap.parse_args(argv)
    root = args.site or Path(
        f"/tmp/streamcrawl-link-merge/{args.origins}x{args.pages}-p{args.base_port}"
    )
    if not (root / "site.json").exists():
        from bench.site import generate

        generate(root, origins=args.origins, pages=args.pages, base_port=args.base_port)
    pages = page_partitions(root, args.partitions)
    reports = args.reports or (fit_reports(pages, args.measured) if args.measured else 10.0)
    one = with_workers(pages, reports, 1)
    many = with_workers(pages, reports, args.workers)
    print(
        json.dumps(
            {
                "pages": len(pages),
                "partitions": args.partitions,
                "partitions_linked_per_page": round(
                    sum(len(linked) for _, linked in pages) / len(pages), 2
                ),
                "reports_per_flush": round(reports, 1),
                "one_worker_messages_per_page": round(one, 3),
                f"{args.workers}_workers_messages_per_page": round(many, 3),
                "ratio": round(many / one, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
