"""Heavy tails, simulated: the real ``Scheduler`` over origins partitioned as Kafka partitions
them, on a virtual clock, with Zipf-like origin sizes and a slow tail of fetch latencies
(the model: ``bench/probes/heavy_tail_model.py``).

Run: ``python -m bench.probes.heavy_tail_sim [--origins N] [--partitions P] [--workers W]
[--hours H] [--concurrency C] [--reshard] [--json]``. No network, no Kafka, no sleeping; each
worker is simulated on its own (workers share nothing but the partitioning), one after the
other: 1 M origins over one window of an hour take some 4 CPU-minutes (the real scheduler's
~30 us a page).

Reported: pages, origins and state bytes (the real frontier's, ``measure_bytes``) per partition
and per worker (max / mean, p99 / median), at P partitions and at 2 x P (a reshard that doubles:
partition p splits into p and p + P, murmur2 mod 2P); then, simulated: the rate, the workers'
CPU and slots, per partition the share of its time with work in which it had nothing in flight
although its worker had a free slot (idle behind politeness), in the window and over its life,
and the share of that spent behind one origin; when each partition finishes; ``--reshard``: the
same at 2 x P partitions on 2 x W workers.

Informs: whether giving each origin one partition (and so one worker) lets a partition stall
behind a slow or huge origin or hold far more than its share, and what a reshard to twice the
partitions changes (docs/performance.md, "Heavy tails, simulated").
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bench.probes.heavy_tail_model import (
    CPU_MS,
    CRAWL,
    MAX_PAGES,
    ZIPF,
    Partition,
    Setup,
    Web,
    make_web,
    origin_name,
    run_worker,
)
from streamcrawl.agents.frontier.frontier import Frontier
from streamcrawl.agents.frontier.queue import SEGMENT
from streamcrawl.agents.frontier.records import encode_origin
from streamcrawl.agents.frontier.store import SEEN, SEGMENTS, Changes, MemoryStore
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.stream.tables import partition_for
from streamcrawl.schemas.records import CrawlPolicy, FrontierBatch, OriginState, UrlRef

SCHEDULER_BYTES = 1_500  # per origin in memory (docs/performance.md, 1 M origins)


@dataclass(frozen=True, slots=True)
class Bytes:
    """State bytes (keys + values, before RocksDB's compression), from the real frontier."""

    seen: float  # per admitted URL, kept for the crawl's life
    queued: float  # per queued URL, while queued (its share of a sealed segment)
    origin: float  # per origin record (no robots.txt body)


def measure_bytes() -> Bytes:
    """Admit 640 URLs of one origin with the real ``Frontier`` as the Kafka agent does (each
    seen mark names its event: ``topic/partition@offset``) and weigh what it writes."""
    rules = CrawlRules.from_policy(CrawlPolicy(crawl_id=CRAWL, seeds=(origin_name(123456) + "/",)))
    ch = Changes(MemoryStore())
    refs = tuple(UrlRef(f"{origin_name(123456)}/section/page-{k}.html", 1) for k in range(640))
    batch = FrontierBatch(crawl_id=CRAWL, origin=origin_name(123456), urls=refs)
    admitted = Frontier(clock=lambda: 0.0).admit(
        ch, batch, rules, budget=None, source=b"crawl.frontier/17@123456789"
    )
    assert admitted.state is not None
    seen = [len(k) + len(v) for k, v in ch.writes.items() if k.startswith(SEEN) and v]
    segs = [len(k) + len(v) for k, v in ch.writes.items() if k.startswith(SEGMENTS) and v]
    done = OriginState(origin=origin_name(123456), head=640, tail=640)
    return Bytes(statistics.mean(seen), sum(segs) / (len(segs) * SEGMENT), len(encode_origin(done)))


# -- the report --------------------------------------------------------------------------------


def spread(values: Sequence[float]) -> dict[str, float]:
    """max / mean and p99 / median of ``values``."""
    ordered = sorted(values)
    mean = statistics.fmean(ordered)
    median = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]
    return {
        "max": ordered[-1],
        "max_over_mean": ordered[-1] / mean if mean else math.nan,
        "p99_over_median": p99 / median if median else math.nan,
    }


def layout(web: Web, partitions: int, workers: int, size: Bytes) -> dict[str, Any]:
    """Pages, origins and state bytes per partition and per worker (no clock needed)."""
    pages = [0] * partitions
    origins = [0] * partitions
    largest = [0] * partitions
    for n, h in zip(web.sizes, web.hashes, strict=True):
        p = h % partitions
        pages[p] += n
        origins[p] += 1
        largest[p] = max(largest[p], n)
    per_worker = [sum(pages[p] for p in range(w, partitions, workers)) for w in range(workers)]
    # State at its largest: every page seen and queued (all pages are queued at the start).
    state = [
        n * (size.seen + size.queued) + o * size.origin for n, o in zip(pages, origins, strict=True)
    ]
    hot = sorted(range(partitions), key=lambda p: -pages[p])[:5]
    return {
        "partitions": partitions,
        "workers": workers,
        "pages": spread(pages),
        "origins": spread(origins),
        "pages_per_worker": spread(per_worker),
        "state_mb": {k: v / 1e6 if k == "max" else v for k, v in spread(state).items()},
        "mean_state_mb": statistics.fmean(state) / 1e6,
        "hot": [
            {"partition": p, "pages": pages[p], "largest_origin": largest[p], "origins": origins[p]}
            for p in hot
        ],
        "largest_share_of_hot": largest[hot[0]] / pages[hot[0]],
    }


def quantiles(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]
    return {"median": statistics.median(ordered), "p99": p99, "max": ordered[-1]}


def simulate(web: Web, setup: Setup) -> dict[str, Any]:
    """Every worker's window, then the partitions' time shares and finishing times."""
    parts: dict[int, Partition] = {}
    workers = [run_worker(web, setup, w, parts) for w in range(setup.workers)]
    horizon = setup.hours * 3600.0
    live = {p: x for p, x in parts.items() if x.busy + x.idle + x.queued > 0}
    window = [x.idle / (x.busy + x.idle + x.queued) for x in live.values()]
    life = [(x.idle + x.tail_idle) / (x.busy + x.idle + x.queued + x.tail) for x in live.values()]
    one = [
        (x.idle_one + x.tail_idle_one) / (x.idle + x.tail_idle)
        for x in live.values()
        if x.idle + x.tail_idle
    ]
    hot = max(parts.values(), key=lambda x: x.finished_at)
    finished = [x.finished_at / 3600 for x in parts.values()]
    end = max(x.finished_at for x in parts.values())
    cpu = sum(web.sizes) * setup.cpu_ms / 1000
    return {
        "setup": asdict(setup),
        "pages": sum(x.pages for x in workers),
        "pages_per_worker": spread([x.pages for x in workers]),
        "pages_per_s_by_minute": [
            round(sum(x.per_minute[m] for x in workers if m < len(x.per_minute)) / 60)
            for m in range(max(len(x.per_minute) for x in workers))
        ],
        "cpu_share": statistics.fmean(x.cpu_busy / horizon for x in workers),
        "slots_in_use": statistics.fmean(x.slot_seconds / horizon for x in workers),
        "slow_share_of_slots": sum(x.slow_slot_seconds for x in workers)
        / max(1e-9, sum(x.slot_seconds for x in workers)),
        "idle_share_window": quantiles(window),
        "queued_share_window": statistics.fmean(
            x.queued / (x.busy + x.idle + x.queued) for x in live.values()
        ),
        "idle_share_life": quantiles(life),
        "idle_behind_one_origin_life": quantiles(one),
        "hot_partition": {
            "finish_hours": hot.finished_at / 3600,
            "idle_share_life": (hot.idle + hot.tail_idle)
            / (hot.busy + hot.idle + hot.queued + hot.tail),
            "behind_one_origin": (hot.idle_one + hot.tail_idle_one)
            / max(1e-9, hot.idle + hot.tail_idle),
        },
        "finish_hours": {
            "median": statistics.median(finished),
            "p90": sorted(finished)[math.ceil(0.9 * len(finished)) - 1],
            "max": max(finished),
        },
        "finished_in_window": sum(1 for t in finished if t <= setup.hours),
        # The workers' CPU the whole crawl needs, over what they have until its last page.
        "cpu_share_crawl": cpu / (setup.workers * end),
        "end_active_origins": sum(x.end_active for x in workers),
        # Under 1: what is left at the end of the window is politeness-bound (the
        # extrapolation's premise): the pages/s its origins can take politely x CPU per page,
        # and the fetches they keep in flight over the concurrency, of the busiest worker.
        "end_demand_over_cpu": max(x.end_demand * setup.cpu_ms / 1000 for x in workers),
        "end_slots_over_concurrency": max(x.end_slots / setup.concurrency for x in workers),
        "gap_violation": min(x.max_gap_violation for x in workers),
        "peak_origins_per_worker": max(
            sum(parts[p].peak_origins for p in x.partitions) for x in workers
        ),
    }


def table(report: dict[str, Any]) -> str:
    """The report as markdown (docs/performance.md, "Heavy tails, simulated", keeps its
    figures)."""
    top = ", ".join(f"{n:,}" for n in report["largest_origins"][:3])
    lines = [
        f"{report['origins']:,} origins, P(size >= n) = n^-{ZIPF:g} (at most {MAX_PAGES:,}): "
        f"{report['total_pages']:,} pages, median origin {report['median_origin']:g}, largest "
        f"{top}. State bytes per seen URL {report['bytes']['seen']:.0f}, per queued URL "
        f"{report['bytes']['queued']:.0f}, per origin record {report['bytes']['origin']:.0f}.",
        "",
        "| partitions / workers | origins per partition, max / mean | pages per partition, max"
        " / mean, p99 / median | pages per worker, max / mean | state per partition, mean,"
        " max | hottest partition: pages, its largest origin |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for x in report["layout"]:
        hot = x["hot"][0]
        lines.append(
            f"| {x['partitions']} / {x['workers']} | {x['origins']['max_over_mean']:.2f} "
            f"| {x['pages']['max_over_mean']:.1f}, {x['pages']['p99_over_median']:.1f} "
            f"| {x['pages_per_worker']['max_over_mean']:.2f} "
            f"| {x['mean_state_mb']:.0f} MB, {x['state_mb']['max']:,.0f} MB "
            f"| {hot['pages']:,}, {hot['largest_origin']:,} |"
        )
    runs = report.get("runs", [])
    if runs:
        lines += [
            "",
            "| partitions / workers / concurrency | pages/s, peak minute (per worker) | minutes"
            " until the rate halves | worker"
            " CPU, slots in use | slow origins' share of slots | partitions idle with work,"
            " window: median, p99 | over their life: median, p99, max | of it behind one origin"
            " (median) | partitions done, hours: median, p90, max | crawl CPU / workers' CPU"
            " until its end | scheduler index per worker |",
            "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
        ]
    for r in runs:
        s, rate = r["setup"], r["pages_per_s_by_minute"]
        peak = max(rate)
        halved = next((m for m, x in enumerate(rate) if x < peak / 2), len(rate))
        w, life = r["idle_share_window"], r["idle_share_life"]
        done = r["finish_hours"]
        lines.append(
            f"| {s['partitions']} / {s['workers']} / {s['concurrency']} "
            f"| {peak:,.0f} ({peak / s['workers']:.0f}) | {halved} "
            f"| {r['cpu_share']:.0%}, {r['slots_in_use']:.0f} "
            f"| {r['slow_share_of_slots']:.0%} | {w['median']:.1%}, {w['p99']:.1%} "
            f"| {life['median']:.0%}, {life['p99']:.0%}, {life['max']:.0%} "
            f"| {r['idle_behind_one_origin_life']['median']:.0%} "
            f"| {done['median']:.1f}, {done['p90']:.1f}, {done['max']:,.0f} "
            f"| {r['cpu_share_crawl']:.2%} "
            f"| {r['peak_origins_per_worker'] * SCHEDULER_BYTES / 1e6:.0f} MB |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.probes.heavy_tail_sim", description=__doc__
    )
    parser.add_argument("--origins", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=96)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--hours", type=float, default=1.0, help="simulated window")
    parser.add_argument("--concurrency", type=int, default=64, help="fetches in flight per worker")
    parser.add_argument("--cpu-ms", type=float, default=CPU_MS, help="worker CPU per page")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--static-only", action="store_true", help="no clock: layout only")
    parser.add_argument(
        "--reshard", action="store_true", help="also simulate 2 x partitions on 2 x workers"
    )
    parser.add_argument("--json", action="store_true", help="JSON instead of markdown")
    args = parser.parse_args(argv)
    web = make_web(args.origins, args.seed)
    assert all(partition_for(origin_name(i), 96) == web.hashes[i] % 96 for i in range(100))
    size = measure_bytes()
    top = sorted(web.sizes, reverse=True)[:5]
    report: dict[str, Any] = {
        "origins": args.origins,
        "total_pages": sum(web.sizes),
        "largest_origins": top,
        "median_origin": statistics.median(web.sizes),
        "bytes": asdict(size),
        "layout": [
            layout(web, p, w, size)
            for p, w in (
                (args.partitions, args.workers),
                (2 * args.partitions, args.workers),
                (2 * args.partitions, 2 * args.workers),
            )
        ],
    }
    if not args.static_only:
        report["runs"] = [
            simulate(
                web, Setup(p, w, args.hours, args.concurrency, cpu_ms=args.cpu_ms, seed=args.seed)
            )
            for p, w in [(args.partitions, args.workers)]
            + ([(2 * args.partitions, 2 * args.workers)] if args.reshard else [])
        ]
    print(json.dumps(report, indent=1) if args.json else table(report))


if __name__ == "__main__":
    main()
