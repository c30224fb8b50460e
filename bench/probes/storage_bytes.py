"""What a crawled page leaves in storage: Kafka, the workers' RocksDB tables and Cassandra.

One crawl of the synthetic web (bench/site.py, served by the bench's nginx) through the Kafka
wiring with one worker (``bench.kafka_runner``'s steps: topics and keyspace of its own, ``seed
--delay 0``, drained when every page is fetched and the sink's lag is 0), then, with the crawl
over:

* **Kafka**, per topic of the run (changelogs included): messages, key + value bytes as produced
  (what a consumer decodes) and the bytes of its log segments on the broker's disk (record
  batches as the producer compressed them, before any compaction; ``--kafka-data``, the
  broker's data directory).
* **Cassandra**, per table of the run's keyspace: rows and bytes on disk. Every table is made
  to flush its memtable (``memtable_flush_period_in_ms``, so no JMX or nodetool is needed) and
  the SSTable files under ``--cassandra-data`` are summed once they stop growing.
* **RocksDB**, once the worker has stopped: each table of its state directory is opened,
  flushed and compacted (``agents.frontier.store.rocks_options``, the options the worker runs
  with): its SST bytes, and its keys and their key + value bytes by namespace (``s`` seen
  marks, ``o`` origin records, ``m`` counts, ``q`` queue segments).

Writes one JSON file (``--out``, default ``bench/results/storage-<time>.json``) that
``bench/probes/capacity.py`` reads, and prints it:

    source .services/env
    .venv/bin/python -m bench.probes.storage_bytes --origins 100 --pages 100 \\
        --kafka-data .services/kafka/data --cassandra-data .services/cassandra/data/data

Informs: the byte constants of the capacity model (docs/capacity.md, "Measured constants") and
how many Kafka messages a page makes by topic (docs/performance.md, "Kafka messages per page").
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench import server
from bench.kafka_runner import drain, seed
from bench.kafka_topology import start_topology
from bench.probes.page_records import disk_bytes, topic_messages
from bench.site import SiteSpec, generate

REPO = Path(__file__).resolve().parents[2]


def topic_bytes(bootstrap: str, topic: str) -> dict[str, int]:
    """Messages and key + value bytes of ``topic``, read once from the beginning."""
    out = {"messages": 0, "key_bytes": 0, "value_bytes": 0}
    for msg in topic_messages(bootstrap, topic):
        out["messages"] += 1
        out["key_bytes"] += len(msg.key() or b"")
        out["value_bytes"] += len(msg.value() or b"")
    return out


def kafka_figures(env: dict[str, str], data: Path | None) -> dict[str, dict]:
    """``topic_bytes`` and the bytes on disk of every topic of the run's prefix."""
    from confluent_kafka.admin import AdminClient

    bootstrap, prefix = env["STREAMCRAWL_KAFKA_BOOTSTRAP"], env["STREAMCRAWL_TOPIC_PREFIX"]
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    out = {}
    for topic in sorted(
        t for t in topics if t.startswith(prefix + ".") or t.startswith(prefix + "-")
    ):
        figures: dict[str, Any] = topic_bytes(bootstrap, topic)
        figures["disk_bytes"] = disk_bytes(data, topic) if data else None
        out[topic.removeprefix(prefix).lstrip(".-")] = figures
    return out


def _sstable_bytes(table_dir: Path) -> int:
    """Bytes of the table's SSTables: every file of its directory (snapshots and backups,
    in subdirectories, left out)."""
    return sum(f.stat().st_size for f in table_dir.iterdir() if f.is_file())


def cassandra_figures(env: dict[str, str], data: Path, settle: float = 90.0) -> dict[str, dict]:
    """Rows and bytes on disk of each table of the run's keyspace, once flushed."""
    from streamcrawl.agents.sinks.cassandra.driver import connect
    from streamcrawl.topology.settings import load_settings

    keyspace = env["STREAMCRAWL_CASSANDRA_KEYSPACE"]
    config = load_settings(
        cassandra_hosts=env["STREAMCRAWL_CASSANDRA_HOSTS"], cassandra_keyspace=keyspace
    ).cassandra_config()
    cluster, session = connect(config)
    try:
        tables = sorted(cluster.metadata.keyspaces[keyspace].tables)
        rows = {
            t: session.execute(f"SELECT count(*) FROM {keyspace}.{t}", timeout=120).one()[0]
            for t in tables
        }
        for t in tables:  # the memtables reach disk within a second, no nodetool needed
            session.execute(f"ALTER TABLE {keyspace}.{t} WITH memtable_flush_period_in_ms = 1000")
        dirs = {t: [d for d in (data / keyspace).glob(f"{t}-*") if d.is_dir()] for t in tables}
        sizes: dict[str, int] = {}
        deadline = time.monotonic() + settle
        stable = 0
        while time.monotonic() < deadline and stable < 3:
            time.sleep(3.0)
            now = {t: sum(_sstable_bytes(d) for d in ds) for t, ds in dirs.items()}
            flushed = all(now[t] or not rows[t] for t in tables)
            stable = stable + 1 if now == sizes and flushed else 0
            sizes = now
        for t in tables:
            session.execute(f"ALTER TABLE {keyspace}.{t} WITH memtable_flush_period_in_ms = 0")
        return {t: {"rows": rows[t], "disk_bytes": sizes.get(t, 0)} for t in tables}
    finally:
        cluster.shutdown()


def rocksdb_figures(state_dir: Path) -> dict[str, dict]:
    """Per table (all partitions): keys and key + value bytes by namespace (``_``: Faust's own
    keys), and SST bytes once flushed and compacted (``wal_bytes``: the write-ahead logs the
    stopped worker left)."""
    from rocksdict import Rdict

    from streamcrawl.agents.frontier.store import rocks_options

    out: dict[str, dict] = {}
    for db in sorted(state_dir.rglob("*.db")):
        if not db.is_dir():
            continue
        table = db.name.rsplit("-", 1)[0]
        fig = out.setdefault(table, {"keys": Counter(), "bytes": Counter()})
        fig["wal_bytes"] = fig.get("wal_bytes", 0) + sum(f.stat().st_size for f in db.glob("*.log"))
        rdict = Rdict(str(db), rocks_options())
        try:
            for key, value in rdict.items():
                ns = key[:1].decode("latin-1")
                fig["keys"][ns] += 1
                fig["bytes"][ns] += len(key) + len(value)
            rdict.flush()
            rdict.compact_range(None, None)
        finally:
            rdict.close()
        fig["sst_bytes"] = fig.get("sst_bytes", 0) + sum(f.stat().st_size for f in db.glob("*.sst"))
    for fig in out.values():
        fig["keys"], fig["bytes"] = dict(fig["keys"]), dict(fig["bytes"])
    return out


def measure(workdir: Path, spec: SiteSpec, args: argparse.Namespace) -> dict:
    """The crawl and the three stores' figures (module docstring)."""
    nginx = server.Nginx(spec, workdir / "nginx").start()
    try:
        with start_topology(workdir, 1, args.partitions) as topo:
            seeded = seed(topo, spec.seeds, delay=0.0, max_pages=2 * spec.expected_pages)
            drained = drain(
                topo,
                seeded,
                expected_pages=spec.expected_pages,
                max_pages=None,
                timeout=args.timeout,
                access_log=nginx.access_log,
            )
            time.sleep(5.0)  # the last batches reach the segments
            env = topo.env
            result: dict[str, Any] = {
                "states": drained.states,
                "stalled": drained.stalled,
                "timed_out": drained.timed_out,
                "kafka": kafka_figures(env, args.kafka_data),
                "cassandra": cassandra_figures(env, args.cassandra_data)
                if args.cassandra_data
                else None,
                "partitions": topo.partitions,
                "code": topo.code,
            }
    finally:
        nginx.stop()
    result["rocksdb"] = rocksdb_figures(workdir / "state-w1")
    return result


def _mean_page_bytes(root: Path) -> float:
    """Mean size of the site's pages (their HTML files; robots.txt and /private/ left out)."""
    sizes = [f.stat().st_size for f in root.rglob("*.html") if f.parent.name != "private"]
    return sum(sizes) / len(sizes)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.probes.storage_bytes", description=__doc__)
    ap.add_argument("--origins", type=int, default=100)
    ap.add_argument("--pages", type=int, default=100, help="per origin (default 100)")
    ap.add_argument("--port", type=int, default=24000, help="first origin's port")
    ap.add_argument("--partitions", type=int, default=12)
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--kafka-data", type=Path, help="the broker's data directory")
    ap.add_argument("--cassandra-data", type=Path, help="Cassandra's data directory (data/data)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/streamcrawl-storage-bytes"))
    ap.add_argument("--out", type=Path, help="default bench/results/storage-<time>.json")
    args = ap.parse_args(argv)
    import shutil

    shutil.rmtree(args.workdir, ignore_errors=True)
    args.workdir.mkdir(parents=True)
    spec = generate(args.workdir / "site", args.origins, args.pages, args.port)
    t0 = time.time()
    figures = measure(args.workdir / "run", spec, args)
    result = {
        "kind": "storage_bytes",
        "command": "python -m bench.probes.storage_bytes "
        f"--origins {args.origins} --pages {args.pages} --partitions {args.partitions}",
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "elapsed_s": time.time() - t0,
        "loadavg_1m": os.getloadavg()[0],
        "site": {
            "origins": spec.origins,
            "pages": spec.pages,
            "expected": spec.expected_pages,
            "links_per_page": spec.links_per_page,
            "page_bytes": _mean_page_bytes(Path(spec.root)),
        },
        **figures,
    }
    out = args.out or REPO / "bench" / "results" / time.strftime("storage-%Y%m%d-%H%M%S.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=str) + "\n")
    print(json.dumps(result, indent=1, default=str))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
