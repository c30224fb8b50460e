"""The Kafka worker's own rows (issue 11): an idle worker, and a crawl that does not saturate.

* ``idle``: one worker with ``partitions`` partitions and nothing to crawl; after ``settle``
  seconds (group join, recovery, catch-up markers) its CPU over ``seconds`` as a share of one
  core, and the broker's and Cassandra's over the same interval. Also ``python -m
  bench.worker_rows --idle 60 --partitions 12 [--profile OUT]``.
* ``not_saturated``: many origins with a long delay (default 16 x 100 at 0.5 s), so the rate
  is set by politeness, not by CPU: one worker and two workers, CPU per page and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from bench.kafka_runner import start_topology
from bench.measure import ServiceMeter


def idle(
    workdir: Path,
    partitions: int = 12,
    seconds: float = 60.0,
    settle: float = 15.0,
    profile: Path | None = None,
) -> dict:
    """An idle worker's CPU share of one core (median of ``seconds`` split in 5 windows)."""
    with start_topology(workdir, 1, partitions, profile=profile) as topo:
        time.sleep(settle)
        windows = []
        services = {
            name: ServiceMeter([pid]).start()
            for name, pid in (("kafka", topo.kafka_pid), ("cassandra", topo.cassandra_pid))
            if pid
        }
        total = ServiceMeter([p.pid for p in topo.procs]).start()
        for _ in range(5):
            meter = ServiceMeter([p.pid for p in topo.procs]).start()
            time.sleep(seconds / 5)
            windows.append(meter.stop() / (seconds / 5))
        worker_cpu = total.stop()
        service_cpu = {name: m.stop() for name, m in services.items()}
    return {
        "status": "ok",
        "partitions": partitions,
        "seconds": seconds,
        "worker_core_share": statistics.median(windows),
        "worker_core_share_windows": windows,
        "worker_cpu_s": worker_cpu,
        "service_core_share": {k: v / seconds for k, v in service_cpu.items()},
        "loadavg_1m": os.getloadavg()[0],
        "code": topo.code,
    }


def idle_section(row: dict) -> list[str]:
    lines = ["## Idle worker", ""]
    if row.get("status") != "ok":
        return [*lines, f"**{row.get('status')}**: {row.get('reason', '')}", ""]
    svc = row["service_core_share"]
    lines += [
        f"One `streamcrawl worker` with {row['partitions']} partitions and nothing to crawl, "
        f"measured for {row['seconds']:.0f} s after it was ready (median of 5 windows; "
        f"load average {row['loadavg_1m']:.1f} at the end, the machine is shared).",
        "",
        "| worker, share of one core | windows | Kafka broker | Cassandra |",
        "|---|---|---|---|",
        f"| **{row['worker_core_share']:.1%}** | "
        + ", ".join(f"{w:.1%}" for w in row["worker_core_share_windows"])
        + f" | {svc.get('kafka', 0):.1%} | {svc.get('cassandra', 0):.1%} |",
        "",
    ]
    return lines


def not_saturated_section(part: dict) -> list[str]:
    s = part["_site"]
    lines = [
        f"## Not saturated: {s['origins']} origins x {s['pages']} pages, delay {s['delay']} s",
        "",
        "The rate is set by the delay (ideal "
        f"{s['ideal_pages_per_s']:.0f} pages/s), not by CPU: what a page costs a worker when "
        "the machine has room, with one worker and with two.",
        "",
        "| workers | pages | log span s | pages/s | worker CPU s | ms CPU/page | vs 1 worker |",
        "|---|---|---|---|---|---|---|",
    ]
    one = part.get("kafka-1", {})
    base = one.get("ms_cpu_per_page") if one.get("status") == "ok" else None
    for name in ("kafka-1", "kafka-2"):
        e = part.get(name)
        if not e:
            continue
        if e.get("status") != "ok":
            lines.append(f"| {name} | **{e.get('status')}**: {e.get('reason', '')} |||||")
            continue
        ms = e["ms_cpu_per_page"]
        ratio = f"{ms / base:.2f}x" if base and ms else "-"
        lines.append(
            f"| {name[-1]} | {e['pages']:,} | {e['span_s']:.1f} | {e['span_pages_per_s']:.0f} | "
            f"{e['cpu_s']:.1f} | {ms:.2f} | {ratio} |"
        )
    return [*lines, ""]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--idle", type=float, default=60.0, help="seconds measured")
    ap.add_argument("--settle", type=float, default=15.0)
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--profile", type=Path, help="py-spy record the idle worker into this file")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/streamcrawl-idle"))
    args = ap.parse_args()
    row = idle(args.workdir, args.partitions, args.idle, args.settle, args.profile)
    print(json.dumps(row, indent=1, default=str))


if __name__ == "__main__":
    main()
