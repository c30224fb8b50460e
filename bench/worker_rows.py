"""The Kafka worker's own rows: an idle worker, and a crawl that does not saturate.

* ``idle``: one worker with ``partitions`` partitions and nothing to crawl; after ``settle``
  seconds (group join, recovery, catch-up markers) its CPU over ``seconds`` as a share of one
  core, and the broker's and Cassandra's over the same interval. Also ``python -m
  bench.worker_rows --idle 60 --partitions 12 [--profile OUT]``.
* ``not_saturated``: many origins with a long delay (default 16 x 100 at 0.5 s), so the rate
  is set by politeness, not by CPU: one worker and two workers, CPU per page and their ratio.
* ``politeness``: the politeness-bound row alone (default 256 x 20 at 0.5 s, one worker),
  ``--runs`` times behind the bench's nginx: pages/s over the access log's span against the
  ideal origins/delay, the smallest per-origin gap at the server, and the worker's CPU per
  page. ``python -m bench.worker_rows --politeness 256x20@0.5 [--workers 2] [--runs 3]``
  (``--port``: the site's first port, one per origin, when 21000 and up are taken;
  ``--per-origin-concurrency N``: N requests in flight per origin instead of the seed's
  default, 8 at delay 0 and 1 with a delay, e.g. ``4x500@0 --per-origin-concurrency 1`` for
  the few-origins shape; ``--embedded``: the embedded crawl, ``streamcrawl crawl``, on the
  same site instead of the workers, the baseline of the many-origins ratios).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
from pathlib import Path

from bench.cpu_split import less_idle, less_idle_cell
from bench.kafka_topology import start_topology
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


def _source(section: dict) -> list[str]:
    """Where a section merged from another results file (``bench.run --report-from``) came from."""
    return [f"From `{section['source']}`.", ""] if section.get("source") else []


def idle_section(row: dict) -> list[str]:
    lines = ["## Idle worker", "", *_source(row)]
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
    """The not-saturated rows at the section's delay and, when measured (``--split``), at the
    second delay; a row is a single run (older results) or the medians of its ``runs``."""
    s = part["_site"]
    parts = [part, *([part["split"]] if part.get("split") else [])]
    delays = " and ".join(f"{p['_site']['delay']:g} s" for p in parts)
    ideal = " and ".join(f"{p['_site']['ideal_pages_per_s']:.0f}" for p in parts)
    lines = [
        f"## Not saturated: {s['origins']} origins x {s['pages']} pages, delay {delays}",
        "",
        f"The rate is set by the delay (ideal {ideal} pages/s), not by CPU: what a page costs "
        "a worker when the machine has room, with one worker and with two (median of the runs). "
        "Min gap: the smallest gap between one origin's request arrivals in any run, in the "
        "access log and on the wire (bench/wire.py).",
        "",
        *_source(part),
        "| delay s | workers | runs | pages | log span s | pages/s | worker CPU s | ms CPU/page "
        "| vs 1 worker | min gap s (log) | min gap s (wire) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in parts:
        lines += _not_saturated_rows(p)
    return [*lines, ""]


def _not_saturated_rows(part: dict) -> list[str]:
    delay = f"{part['_site']['delay']:g}"
    one = part.get("kafka-1", {})
    base = one.get("ms_cpu_per_page") if one.get("status") == "ok" else None
    lines = []
    for name in ("kafka-1", "kafka-2"):
        e = part.get(name)
        if not e:
            continue
        if e.get("status") != "ok":
            lines.append(
                f"| {delay} | {name[-1]} | **{e.get('status')}**: {e.get('reason', '')} ||||||||"
            )
            continue
        ms = e["ms_cpu_per_page"]
        ratio = f"{ms / base:.2f}x" if base and ms else "-"
        lines.append(
            f"| {delay} | {name[-1]} | {len(e.get('runs') or [e])} | {e['pages']:,.0f} | "
            f"{e['span_s']:.1f} | {e['span_pages_per_s']:.0f} | {e['cpu_s']:.1f} | {ms:.2f} | "
            f"{ratio} | {_gap(e.get('min_gap'))} | {_gap((e.get('wire') or {}).get('min_gap'))} |"
        )
    return lines


def few_origins_section(part: dict) -> list[str]:
    """The few-origins rows at delay 0 (``suite.few_origins``): medians of the runs."""
    s = part["_site"]
    lines = [
        f"## Few origins at delay 0: {s['origins']} origins x {s['pages']} pages, "
        f"{s['per_origin_concurrency']} request per origin at a time",
        "",
        "No delay, but one request in flight per origin: the rate is set by how soon the crawler "
        "sends an origin's next request once a response is in (median of the runs). Pages/s "
        "over the access log's span (first request to last response); CPU over *wall s* (as in "
        "the main table). Broker and Cassandra: their CPU during the row less their idle rate "
        "(measured before each seed) x wall s, the idle part in brackets.",
        "",
        *_source(part),
        "| crawler | runs | pages | wall s | log span s | pages/s | per origin | CPU s "
        "| ms CPU/page | CPU / wall | peak RSS MB | broker CPU s less idle (idle) "
        "| Cassandra CPU s less idle (idle) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in ("embedded", "kafka-1"):
        e = part.get(name)
        if not e:
            continue
        if e.get("status") != "ok":
            lines.append(
                f"| {e['label']} | **{e.get('status')}**: {e.get('reason', '')} ||||||||||||"
            )
            continue
        wall, span = e["wall_s"], e["span_s"]
        rate = e["pages"] / span if span else 0.0
        rates = e.get("idle_rates") or {}
        services = [
            less_idle_cell(less_idle(e.get(f"{svc}_cpu_s"), rates.get(svc), wall))
            for svc in ("kafka", "cassandra")
        ]
        lines.append(
            f"| {e['label']} | {len(e['runs'])} | {e['pages']:,.0f} / {s['expected']:,} | "
            f"{wall:.1f} | {span:.1f} | {rate:.0f} | {rate / s['origins']:.1f} | "
            f"{e['cpu_s']:.2f} | {e['ms_cpu_per_page']:.2f} | {e['cpu_s'] / wall:.0%} | "
            f"{e['peak_rss_mb']:.0f} | {' | '.join(services)} |"
        )
    return [*lines, ""]


def _gap(g: float | None) -> str:
    return "-" if g is None else f"{g:.4f}"


class RunQueueMeter:
    """CPU time and run-queue wait of the workers started under ``workdir`` (Linux
    ``/proc/PID/task/*/schedstat``: nanoseconds on a CPU, nanoseconds runnable but waiting for
    one). A wait much larger than the CPU time says the worker was starved by other work on
    the machine, not held back by its own latencies."""

    def __init__(self, workdir: Path, interval: float = 0.5) -> None:
        self.workdir = str(workdir.resolve())
        self.interval = interval
        self.threads: dict[tuple[int, int], tuple[int, int]] = {}  # (pid, tid) -> (cpu, wait)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _workers(self) -> list[int]:
        import psutil

        pids = []
        for proc in psutil.process_iter(["cmdline", "cwd"]):
            cmd, cwd = proc.info["cmdline"] or [], proc.info["cwd"] or ""
            worker = "worker" in cmd and any("streamcrawl" in c for c in cmd)
            if worker and cwd.startswith(self.workdir):
                pids.append(proc.pid)
        return pids

    def _sample(self) -> None:
        for pid in self._workers():
            for task in Path(f"/proc/{pid}/task").glob("*"):
                try:
                    cpu, wait, _ = (int(x) for x in (task / "schedstat").read_text().split())
                except (OSError, ValueError):
                    continue
                self.threads[(pid, int(task.name))] = (cpu, wait)

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def start(self) -> RunQueueMeter:
        self._thread.start()
        return self

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        cpu = sum(c for c, _ in self.threads.values()) / 1e9
        wait = sum(w for _, w in self.threads.values()) / 1e9
        return {"sched_cpu_s": cpu, "runqueue_wait_s": wait}


def politeness_rows(
    workdir: Path,
    size: str,
    workers: int,
    runs: int,
    timeout: float = 1800.0,
    profile: Path | None = None,
    port: int = 21000,
    per_origin_concurrency: int | None = None,
    embedded: bool = False,
) -> dict:
    """The politeness-bound row ``runs`` times: each run's figures and their medians; with
    ``profile``, every worker of each run under ``py-spy record`` (``profile`` + run number,
    then ``.wN`` for worker N > 1). Each run's figures include ``worker_pages`` and
    ``worker_cpu_s``: the pages each worker fetched and its CPU-seconds; ``per_page``: the
    messages the workers sent by topic, their frontier batches and events and sink writes, per
    page; ``embedded``: the embedded crawl instead of the workers (no worker counts)."""
    from bench import suite

    spec_s, _, delay_s = size.partition("@")
    origins, _, pages = spec_s.partition("x")
    delay = float(delay_s or 0.5)
    site = suite.ensure_site(workdir, int(origins), int(pages), port)
    name = "embedded" if embedded else f"kafka-{workers}"
    args = argparse.Namespace(timeout=timeout, stock=False)
    results = []
    for i in range(runs):
        meter = RunQueueMeter(workdir / f"run-{i + 1}").start()
        kw: dict = {"profile": profile.with_suffix(f".{i + 1}.raw.txt")} if profile else {}
        if per_origin_concurrency is not None:
            kw["per_origin_concurrency"] = per_origin_concurrency
        r = suite._try(name, site, workdir / f"run-{i + 1}" / name, args, delay=delay, **kw)
        sched = meter.stop()
        keep = ("status", "reason", "pages", "span_s", "span_pages_per_s", "cpu_s")
        wire = r.get("wire") or {}
        out = {k: r.get(k) for k in keep}
        out.update(
            of_ideal=(r.get("span_pages_per_s") or 0) * delay / site.origins,
            ms_cpu_per_page=r.get("ms_cpu_per_page"),
            min_gap=r.get("min_gap"),
            min_gap_with_robots=r.get("min_gap_with_robots"),
            origins_under_delay=len(r.get("origins_under_delay") or ()),
            wire_min_gap=wire.get("min_gap"),
            wire_min_gap_with_robots=wire.get("min_gap_with_robots"),
            wire_origins_under_delay=wire.get("origins_under_delay"),
            wire_status=wire.get("status"),
            loadavg_1m=r.get("loadavg_1m"),
            other_cpu_s=r.get("other_cpu_s"),
            worker_pages=(r.get("self_report") or {}).get("worker_pages"),
            worker_cpu_s=(r.get("self_report") or {}).get("worker_cpu_s"),
            per_page=per_page((r.get("self_report") or {}).get("worker_counts"), r.get("pages")),
            **sched,
        )
        print(json.dumps(out, default=str), flush=True)
        results.append(out)
    ok = [r for r in results if r["status"] == "ok"]
    med = {
        k: statistics.median(r[k] for r in ok) if ok else None
        for k in ("span_pages_per_s", "of_ideal", "ms_cpu_per_page", "min_gap")
    }
    wire_gaps = [r["wire_min_gap"] for r in ok if r["wire_min_gap"] is not None]
    med["wire_min_gap"] = min(wire_gaps) if wire_gaps else None  # the smallest of every run
    return {"site": size, "workers": workers, "runs": results, "median": med}


def per_page(counts: dict[str, float] | None, pages: int | None) -> dict[str, float] | None:
    """The workers' counts (``bench.kafka_topology.worker_counts``) per page, 3 decimals."""
    if not counts or not pages:
        return None
    return {k: round(v / pages, 3) for k, v in sorted(counts.items())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--idle", type=float, default=60.0, help="seconds measured")
    ap.add_argument("--settle", type=float, default=15.0)
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--profile", type=Path, help="py-spy record each worker (N > 1: FILE.wN)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/streamcrawl-idle"))
    ap.add_argument("--politeness", metavar="OxP@DELAY", help="run the politeness row instead")
    ap.add_argument("--workers", type=int, default=1, help="workers of the politeness row")
    ap.add_argument("--runs", type=int, default=1, help="runs of the politeness row")
    ap.add_argument(
        "--port", type=int, default=21000, help="first port of the site (one per origin)"
    )
    ap.add_argument(
        "--per-origin-concurrency",
        type=int,
        help="requests in flight per origin (default: 8 at delay 0, else 1)",
    )
    ap.add_argument(
        "--embedded",
        action="store_true",
        help="the politeness row by the embedded crawl (streamcrawl crawl), not the workers",
    )
    args = ap.parse_args()
    if args.politeness:
        row = politeness_rows(
            args.workdir,
            args.politeness,
            args.workers,
            args.runs,
            profile=args.profile,
            port=args.port,
            per_origin_concurrency=args.per_origin_concurrency,
            embedded=args.embedded,
        )
        print(json.dumps(row["median"], indent=1, default=str))
        return
    row = idle(args.workdir, args.partitions, args.idle, args.settle, args.profile)
    print(json.dumps(row, indent=1, default=str))


if __name__ == "__main__":
    main()
