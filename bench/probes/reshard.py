"""How long ``streamcrawl admin reshard`` takes per million seen URLs, on the local Kafka.

Builds a crawl's tables with the real frontier (``--origins`` origins, ``--seen`` URLs in all;
``--queued`` of each origin's URLs still queued, the rest fetched), writes them into the
changelogs of a generation of ``--from`` partitions, then runs ``streamcrawl admin reshard
--partitions --to`` as a subprocess and reports its wall time, its steps and its peak RSS,
with the time per million seen URLs extrapolated linearly from the run. Topics are deleted
after. Needs ``STREAMCRAWL_KAFKA_BOOTSTRAP`` (``scripts/services.sh start`` writes it).

    python -m bench.probes.reshard --seen 100000,1000000 --origins 10000 --from 3 --to 6 \
        --out bench/results/reshard-X.json

``--out`` writes a results file that ``python -m bench.run --report-from RUN.json,X.json``
merges into docs/benchmarks.md ("Reshard"); docs/kubernetes.md ("Partitions") cites it.

Informs: how long the workers must stay stopped while ``streamcrawl admin reshard`` moves a
crawl to another partition count (docs/kubernetes.md, "Scale").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient

from streamcrawl.agents.frontier.frontier import Frontier
from streamcrawl.agents.frontier.store import Changes
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.stream.tables import TableStore, partition_for
from streamcrawl.schemas.records import CrawlPolicy, FrontierBatch, Outcome, UrlRef
from streamcrawl.topology.admin import config, topics
from streamcrawl.topology.admin.reshard.broker import Broker
from streamcrawl.topology.settings import Settings, load_settings

STREAMCRAWL = str(Path(sys.executable).parent / "streamcrawl")


def build(settings: Settings, origins: int, seen: int, queued: float) -> dict[str, int]:
    """Admit ``seen`` URLs over ``origins`` origins and fetch all but ``queued`` of each
    origin's; write the tables into the generation's changelogs. Returns the entries."""
    names = [f"http://site{i}.test" for i in range(origins)]
    policy = CrawlPolicy(crawl_id="bench", seeds=tuple(n + "/" for n in names))  # in scope
    rules = CrawlRules.from_policy(policy)
    frontier = Frontier(clock=lambda: 50.0, jitter=lambda: 0.5)
    broker = Broker(settings)
    per_origin = seen // origins
    written = {"seen": 0, "pending": 0, "origins": 0}
    for i, origin in enumerate(names):
        tables: dict[str, dict[bytes, bytes]] = {t: {} for t in written}
        store = TableStore(tables["seen"], tables["pending"], tables["origins"])
        p = partition_for(origin, settings.partitions)
        for start in range(0, per_origin, 1000):
            refs = tuple(
                UrlRef(f"{origin}/p{j}", 1) for j in range(start, min(per_origin, start + 1000))
            )
            ch = Changes(store)
            frontier.admit(
                ch,
                FrontierBatch(crawl_id="bench", origin=origin, urls=refs),
                rules,
                budget=None,
                source=f"x/{p}@{i}".encode(),
                count_admitted=False,
            )
            ch.commit()
        for seq in range(int(per_origin * (1 - queued))):
            ch = Changes(store)
            outcome = Outcome(
                crawl_id="bench",
                origin=origin,
                kind="page",
                seq=seq,
                url=f"{origin}/p{seq}",
                state="fetched",
                started_at=1.0,
                finished_at=1.1,
                status=200,
            )
            frontier.apply(ch, outcome, rules)
            ch.commit()
        for table, rows in tables.items():
            name = topics.changelog_name(settings, table)
            for key, value in rows.items():
                broker.send(name, p, key, value)
            written[table] += len(rows)
        if i % 100 == 0:
            broker.flush()
    broker.flush()
    broker.close()
    return written


def measure(old: int, new: int, origins: int, seen: int, queued: float) -> dict:
    """One reshard of ``seen`` URLs over ``origins`` from ``old`` to ``new`` partitions, on
    topics of its own (deleted after)."""
    prefix = f"bench-reshard-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "STREAMCRAWL_TOPIC_PREFIX": prefix}
    settings = load_settings(topic_prefix=prefix, partitions=old)
    topics.create_topics(settings)
    try:
        started = time.monotonic()
        entries = build(settings, origins, seen, queued)
        built = time.monotonic() - started
        started = time.monotonic()
        run = subprocess.run(
            [STREAMCRAWL, "admin", "reshard", "--partitions", str(new)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=3600,
        )
        seconds = time.monotonic() - started
        if run.returncode != 0:
            raise SystemExit(f"reshard failed: {run.stderr.strip()}")
        # The largest child so far: sizes are measured smallest first.
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        return {
            "seen_urls": entries["seen"],
            "entries": entries,
            "origins": origins,
            "partitions": [old, new],
            "build_s": round(built, 1),
            "reshard_s": round(seconds, 1),
            "reshard_s_per_million_seen": round(seconds / entries["seen"] * 1e6, 1),
            "peak_rss_mb": round(peak),
            "steps": run.stdout.strip().splitlines(),
        }
    finally:
        client = AdminClient(config.librdkafka_config(settings))
        names = [t for t in client.list_topics(timeout=10).topics if t.startswith(prefix)]
        if names:
            for future in client.delete_topics(names, operation_timeout=30).values():
                future.result()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seen", default="200000", help="seen URLs, or several: 100000,1000000 (smallest first)"
    )
    parser.add_argument("--origins", type=int, default=2000)
    parser.add_argument("--queued", type=float, default=0.3, help="share of URLs still queued")
    parser.add_argument("--from", dest="old", type=int, default=3)
    parser.add_argument("--to", dest="new", type=int, default=6)
    parser.add_argument(
        "--out", type=Path, help="also write {'reshard': ...} there, for bench.run --report-from"
    )
    args = parser.parse_args(argv)
    sizes = sorted(int(n) for n in args.seen.split(","))
    runs = [measure(args.old, args.new, args.origins, n, args.queued) for n in sizes]
    command = "python -m bench.probes.reshard " + " ".join(sys.argv[1:] if argv is None else argv)
    print(json.dumps(runs, indent=1))
    if args.out:
        args.out.write_text(json.dumps({"reshard": {"command": command, "runs": runs}}))


if __name__ == "__main__":
    main()
