"""The capacity model: docs/capacity.md, derived from measured constants and stated assumptions.

Two steps, both re-runnable:

* ``python -m bench.probes.capacity --from RESULTS.json,STORAGE.json`` reads a ``bench.run`` results
  file with a many-origins section (bench/many_origins.py: CPU per page of the worker, the broker
  and Cassandra at the web's shape, the worker's memory) and a ``bench.probes.storage_bytes`` file
  (Kafka messages and bytes per page by topic, RocksDB bytes per seen URL and per origin,
  Cassandra bytes per row on disk), keeps the constants with where each was measured in
  ``bench/probes/capacity-constants.json`` (committed: the results files are not), and writes
  the doc.
* ``python -m bench.probes.capacity`` rewrites docs/capacity.md from the committed constants;
  ``--check`` exits 1 when the doc is not what they and ``ASSUMPTIONS`` give.

The arithmetic (``plan``) is pure and tested on a hand-made fixture
(tests/bench/test_capacity.py); bench/probes/capacity_doc.py writes the doc.

Informs: how many workers, partitions, Kafka brokers and Cassandra nodes a crawl of a given size
and period needs (docs/capacity.md, "The answer"; where each constant was measured:
docs/capacity.md, "Measured constants").
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONSTANTS = Path(__file__).with_name("capacity-constants.json")
DOC = REPO / "docs" / "capacity.md"
WEEK, MONTH = 7 * 86400, 30 * 86400
TARGETS = (("1 B pages a week", 1e9, WEEK), ("10 B pages a month", 1e10, MONTH))
# Topics keyed by origin with the crawl's partition count (``admin create-topics``): frontier,
# outcomes, pages, status, counts and the three table changelogs (captures: WARC crawls only).
PARTITIONED_TOPICS = 8
# Topics whose records are deleted by age (the rest are compacted: one record per key).
RETAINED = ("frontier", "outcomes", "pages", "status")


@dataclass(frozen=True)
class Assumptions:
    """What the model assumes rather than measures; each is a row of the doc's table."""

    replication_factor: int = 3  # Kafka topics and the Cassandra keyspace
    cpu_utilisation: float = 0.6  # planned share of each core: 40 % headroom for peaks and loss
    page_kib: float = 24.0  # HTML per page; the `pages` topic's bytes scale with it
    links_per_page: float = 30.0  # distinct links a page lists (the bench's site has ~30)
    seen_per_page: float = 4.0  # URLs admitted to the seen-set per page fetched
    pages_per_origin: float = 20.0  # mean pages an origin gives the crawl: origins = pages / it
    politeness_bound_share: float = 0.5  # share of pages from origins held to their delay
    delay_s: float = 1.0  # per-origin delay between request starts
    fetch_latency_s: float = 1.0  # mean time a request is in flight on the real web
    partition_growth: float = 2.0  # partitions = workers x this, rounded up to a multiple of 12
    kafka_retention_days: float = 7.0  # how long frontier, outcomes, pages and status are kept
    broker_cores: int = 8
    broker_disk_tb: float = 4.0
    cassandra_cores: int = 8
    cassandra_disk_tb: float = 2.0
    kafka_disk_fill: float = 0.7  # share of a broker's disk planned full
    cassandra_disk_fill: float = 0.5  # size-tiered compaction needs as much free as it rewrites
    rocksdb_space_amp: float = 1.25  # RocksDB's disk over the measured, compacted tables
    worker_disk_fill: float = 0.5


ASSUMPTIONS = Assumptions()


def _ceil(x: float) -> int:
    return max(1, math.ceil(x - 1e-9))


def plan(c: dict[str, float], a: Assumptions, pages: float, seconds: float) -> dict[str, float]:
    """Machines for ``pages`` pages in ``seconds`` from the constants ``c`` (``CONSTANT_KEYS``)
    under ``a``. CPU constants are CPU-ms per page measured at replication 1 (one broker, one
    Cassandra node): replication multiplies the services' work by ``a.replication_factor``."""
    rate = pages / seconds
    out: dict[str, float] = {
        "pages_per_s": rate,
        "seen_urls": pages * a.seen_per_page,
        "origins": pages / a.pages_per_origin,
        "polite_origins_busy": rate * a.politeness_bound_share * a.delay_s,
        "max_pages_per_polite_origin": seconds / a.delay_s,
    }
    out.update(_workers(c, a, out))
    out.update(_kafka(c, a, out, seconds))
    out.update(_cassandra(c, a, pages, rate))
    return out


def _workers(c: dict[str, float], a: Assumptions, p: dict[str, float]) -> dict[str, float]:
    """Workers (one core each), their partitions, requests in flight, memory and RocksDB."""
    rate = p["pages_per_s"]
    workers = _ceil(rate * c["worker_ms_per_page"] / 1000 / a.cpu_utilisation)
    rocksdb_gb = (
        (
            (p["seen_urls"] * c["rocksdb_bytes_per_seen_url"])
            + p["origins"] * c["rocksdb_bytes_per_origin"]
        )
        * a.rocksdb_space_amp
        / 1e9
    )
    return {
        "workers": workers,
        "partitions": 12 * _ceil(workers * a.partition_growth / 12),
        "worker_concurrency": _ceil(rate * a.fetch_latency_s / workers),
        "worker_memory_gb": workers * c["worker_peak_rss_mb"] / 1000,
        "rocksdb_gb": rocksdb_gb,
        "worker_disk_gb": rocksdb_gb / workers / a.worker_disk_fill,
    }


def _kafka(c: dict[str, float], a: Assumptions, p: dict[str, float], seconds: float) -> dict:
    """Brokers: the most of the replication factor, their CPU and their disk."""
    rf, rate = a.replication_factor, p["pages_per_s"]
    body_scale = a.page_kib / c["bench_page_kib"]
    retained = sum(c[f"kafka_{t}_disk_bytes_per_page"] for t in RETAINED if t != "pages")
    retained += c["kafka_pages_disk_bytes_per_page"] * body_scale
    retention_pages = rate * min(seconds, a.kafka_retention_days * 86400)
    compacted = p["seen_urls"] * c["kafka_seen_changelog_bytes_per_url"]
    compacted += p["origins"] * c["kafka_origins_changelog_bytes_per_origin"]
    disk_tb = (retention_pages * retained + compacted) * rf / 1e12
    cpu = rate * c["broker_ms_per_page"] * rf / 1000 / (a.broker_cores * a.cpu_utilisation)
    brokers = max(rf, _ceil(cpu), _ceil(disk_tb / (a.broker_disk_tb * a.kafka_disk_fill)))
    value_bytes = c["kafka_value_bytes_per_page"]
    value_bytes += c["kafka_pages_value_bytes_per_page"] * (body_scale - 1)
    return {
        "brokers": brokers,
        "broker_cpu_cores": cpu * a.broker_cores,
        "partition_replicas_per_broker": PARTITIONED_TOPICS * p["partitions"] * rf / brokers,
        "kafka_disk_tb": disk_tb,
        "kafka_disk_per_broker_tb": disk_tb / brokers,
        "kafka_produce_mb_s": rate * value_bytes / 1e6,
    }


def _cassandra(c: dict[str, float], a: Assumptions, pages: float, rate: float) -> dict:
    """Cassandra nodes: the most of the replication factor, their CPU and their disk."""
    rf = a.replication_factor
    row_bytes = c["cassandra_page_bytes"] + a.seen_per_page * c["cassandra_status_bytes"]
    disk_tb = pages * row_bytes * rf / 1e12 / a.cassandra_disk_fill  # with compaction's room
    cpu = rate * c["cassandra_ms_per_page"] * rf / 1000 / (a.cassandra_cores * a.cpu_utilisation)
    nodes = max(rf, _ceil(cpu), _ceil(disk_tb / a.cassandra_disk_tb))
    return {
        "cassandra_nodes": nodes,
        "cassandra_cpu_cores": cpu * a.cassandra_cores,
        "cassandra_disk_tb": disk_tb,
        "cassandra_disk_per_node_tb": disk_tb / nodes,
    }


# Each constant: (key, unit, what it is); ``collect`` fills in the value and its source.
CONSTANT_KEYS = (
    ("worker_ms_per_page", "CPU-ms/page", "a Kafka worker's CPU per page at the web's shape"),
    ("broker_ms_per_page", "CPU-ms/page", "the broker's CPU per page, less its idle rate"),
    ("cassandra_ms_per_page", "CPU-ms/page", "Cassandra's CPU per page, less its idle rate"),
    ("worker_peak_rss_mb", "MB", "a worker's peak RSS over the row"),
    ("bench_page_kib", "KiB", "mean HTML size of the measured site's pages"),
    ("kafka_messages_per_page", "messages/page", "Kafka messages per page, every topic"),
    ("kafka_value_bytes_per_page", "B/page", "Kafka key + value bytes per page, every topic"),
    ("kafka_pages_value_bytes_per_page", "B/page", "`pages` key + value bytes per page"),
    ("kafka_frontier_disk_bytes_per_page", "B/page", "`frontier` on the broker's disk"),
    ("kafka_outcomes_disk_bytes_per_page", "B/page", "`outcomes` on the broker's disk"),
    ("kafka_pages_disk_bytes_per_page", "B/page", "`pages` on the broker's disk (zstd)"),
    ("kafka_status_disk_bytes_per_page", "B/page", "`status` on the broker's disk"),
    ("kafka_seen_changelog_bytes_per_url", "B/URL", "`seen` changelog on disk per record"),
    ("kafka_origins_changelog_bytes_per_origin", "B/origin", "`origins` changelog per record"),
    ("rocksdb_bytes_per_seen_url", "B/URL", "RocksDB `seen` SST bytes per seen URL, compacted"),
    ("rocksdb_bytes_per_origin", "B/origin", "RocksDB origin record, key + value"),
    ("cassandra_page_bytes", "B/row", "Cassandra `pages` on disk per row (no body)"),
    ("cassandra_status_bytes", "B/row", "Cassandra `url_status` on disk per row"),
)


def _topic(kafka: dict, *words: str) -> dict:
    """The figures of the one topic whose short name holds every word (changelogs included)."""
    found = [v for k, v in kafka.items() if all(w in k.split("-") or w == k for w in words)]
    if len(found) != 1:
        raise SystemExit(f"expected one topic named with {words}, found {len(found)}")
    return found[0]


def from_many_origins(results: dict, name: str) -> dict[str, tuple[float, str]]:
    """CPU and memory constants from a ``bench.run`` results file's many-origins kafka-1 row."""
    from bench.many_origins import figures

    part = results["many_origins"]
    row = part["kafka-1"]
    if row.get("status") != "ok":
        raise SystemExit(f"{name}: the many-origins kafka-1 row did not run: {row.get('reason')}")
    f = figures(row, part["_site"])
    s = part["_site"]
    where = f"many_origins/kafka-1 ({s['origins']} x {s['pages']} at {s['delay']:g} s)"
    return {
        "worker_ms_per_page": (f["ms_cpu_per_page"], where),
        "broker_ms_per_page": (f["kafka_ms_per_page"], where),
        "cassandra_ms_per_page": (f["cassandra_ms_per_page"], where),
        "worker_peak_rss_mb": (row["peak_rss_mb"], where),
    }


def from_storage(st: dict) -> dict[str, tuple[float, str]]:
    """Byte constants from a ``bench.probes.storage_bytes`` file."""
    pages = st["states"]["fetched"]
    kafka = st["kafka"]
    if st.get("cassandra") is None or any(t["disk_bytes"] is None for t in kafka.values()):
        raise SystemExit("bench.probes.storage_bytes ran without --kafka-data or --cassandra-data")
    s = st["site"]
    where = f"storage_bytes ({s['origins']} x {s['pages']})"
    out = {
        "bench_page_kib": (s["page_bytes"] / 1024, where),
        "kafka_messages_per_page": (sum(t["messages"] for t in kafka.values()) / pages, where),
        "kafka_value_bytes_per_page": (
            sum(t["key_bytes"] + t["value_bytes"] for t in kafka.values()) / pages,
            where,
        ),
    }
    pages_topic = _topic(kafka, "pages")
    out["kafka_pages_value_bytes_per_page"] = (
        (pages_topic["key_bytes"] + pages_topic["value_bytes"]) / pages,
        where,
    )
    for t in RETAINED:
        out[f"kafka_{t}_disk_bytes_per_page"] = (_topic(kafka, t)["disk_bytes"] / pages, where)
    for table, key in (("seen", "per_url"), ("origins", "per_origin")):
        log = _topic(kafka, table, "changelog")
        out[f"kafka_{table}_changelog_bytes_{key}"] = (
            log["disk_bytes"] / max(1, log["messages"]),
            where,
        )
    seen, origins = st["rocksdb"]["seen"], st["rocksdb"]["origins"]
    # Seen marks: their compacted SST files (thousands of keys a partition, so the files' fixed
    # part is small); origin records: their keys and values (a few a partition: the files would
    # be mostly fixed part).
    out["rocksdb_bytes_per_seen_url"] = (seen["sst_bytes"] / seen["keys"]["s"], where)
    out["rocksdb_bytes_per_origin"] = (origins["bytes"]["o"] / origins["keys"]["o"], where)
    cass = st["cassandra"]
    for table, key in (("pages", "page"), ("url_status", "status")):
        out[f"cassandra_{key}_bytes"] = (cass[table]["disk_bytes"] / cass[table]["rows"], where)
    return out


def collect(paths: list[Path]) -> dict:
    """The constants file's content from ``bench.run`` and ``bench.probes.storage_bytes``
    results."""
    found: dict[str, tuple[float, str]] = {}
    sources: dict[str, dict] = {}
    for path in paths:
        data = json.loads(path.read_text())
        if data.get("kind") == "storage_bytes":
            got = from_storage(data)
            command, date, commit = data["command"], data["date"], data["code"]["commit"]
        else:
            from bench.report import command as bench_command

            got = from_many_origins(data, path.name)
            env = data["env"]
            command, date, commit = bench_command(data["args"]), env["date"], env["repo_commit"]
        sources[path.name] = {"command": command, "date": date, "commit": commit}
        found.update({k: (v, f"{path.name}: {where}") for k, (v, where) in got.items()})
    missing = [k for k, _, _ in CONSTANT_KEYS if k not in found]
    if missing:
        raise SystemExit(f"not measured by the files given: {', '.join(missing)}")
    constants = {
        key: {"value": round(found[key][0], 4), "unit": unit, "what": what, "row": found[key][1]}
        for key, unit, what in CONSTANT_KEYS
    }
    return {"constants": constants, "sources": sources}


def _load_constants() -> dict:
    if not CONSTANTS.exists():
        raise SystemExit(f"{CONSTANTS} missing: run python -m bench.probes.capacity --from FILES")
    return json.loads(CONSTANTS.read_text())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.probes.capacity", description=__doc__)
    ap.add_argument(
        "--from",
        dest="sources",
        metavar="JSON[,JSON...]",
        help="bench.run results (with the many-origins row) and bench.probes.storage_bytes "
        "results: keep their constants in bench/probes/capacity-constants.json, then write the doc",
    )
    ap.add_argument("--check", action="store_true", help="fail if docs/capacity.md is stale")
    args = ap.parse_args(argv)
    if args.sources:
        data = collect([Path(p) for p in args.sources.split(",")])
        CONSTANTS.write_text(json.dumps(data, indent=1) + "\n")
        print(f"wrote {CONSTANTS}")
    from bench.probes.capacity_doc import render

    text = render(_load_constants())
    if args.check:
        if not DOC.exists() or DOC.read_text() != text:
            print(f"{DOC} is stale: run python -m bench.probes.capacity", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
