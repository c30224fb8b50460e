"""The capacity model (bench/probes/capacity.py): its arithmetic on hand-made constants, the
constants it takes from tiny results files, and the committed doc being the one the constants
give."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bench.probes import capacity, capacity_doc

WEEK_RATE = 1e9 / capacity.WEEK  # 1,653.4 pages/s

CONSTANTS = {
    "worker_ms_per_page": 3.0,
    "broker_ms_per_page": 1.0,
    "cassandra_ms_per_page": 1.0,
    "worker_peak_rss_mb": 250.0,
    "bench_page_kib": 24.0,
    "kafka_messages_per_page": 5.0,
    "kafka_value_bytes_per_page": 30000.0,
    "kafka_pages_value_bytes_per_page": 25000.0,
    "kafka_frontier_disk_bytes_per_page": 100.0,
    "kafka_outcomes_disk_bytes_per_page": 400.0,
    "kafka_pages_disk_bytes_per_page": 5000.0,
    "kafka_status_disk_bytes_per_page": 100.0,
    "kafka_seen_changelog_bytes_per_url": 50.0,
    "kafka_origins_changelog_bytes_per_origin": 1000.0,
    "rocksdb_bytes_per_seen_url": 40.0,
    "rocksdb_bytes_per_origin": 500.0,
    "cassandra_page_bytes": 1000.0,
    "cassandra_status_bytes": 100.0,
}


def test_a_week_of_1_b_pages_worked_by_hand() -> None:
    p = capacity.plan(CONSTANTS, capacity.Assumptions(), 1e9, capacity.WEEK)
    assert p["pages_per_s"] == pytest.approx(WEEK_RATE)
    # 1,653 pages/s x 3 ms / 60 % = 8.27 cores: 9 workers; x 2 growth = 18 -> 24 partitions.
    assert p["workers"] == 9
    assert p["partitions"] == 24
    # 1e9 pages x 5,600 B retained + 4e9 seen x 50 B + 5e7 origins x 1,000 B, x 3 replicas.
    assert p["kafka_disk_tb"] == pytest.approx(17.55)
    # Disk sets the brokers (17.55 / (4 TB x 0.7) = 6.3 -> 7), not CPU (1.03 of 8 x 60 %).
    assert p["brokers"] == 7
    assert p["broker_cpu_cores"] == pytest.approx(WEEK_RATE * 3 / 1000 / 0.6)
    # 1e9 x (1,000 + 4 x 100 B) x 3 = 4.2 TB, at half full of 2 TB nodes: 5 nodes.
    assert p["cassandra_disk_tb"] == pytest.approx(8.4)
    assert p["cassandra_nodes"] == 5
    assert p["rocksdb_gb"] == pytest.approx((4e9 * 40 + 5e7 * 500) * 1.25 / 1e9)
    assert p["worker_concurrency"] == 184  # 1,653 in flight at 1 s over 9 workers
    assert p["max_pages_per_polite_origin"] == capacity.WEEK


def test_replication_and_page_size_move_what_they_should() -> None:
    one = capacity.plan(CONSTANTS, capacity.Assumptions(replication_factor=1), 1e9, capacity.WEEK)
    assert one["kafka_disk_tb"] == pytest.approx(5.85)
    assert one["brokers"] == 3  # 5.85 / 2.8 = 2.1
    assert one["workers"] == 9  # the workers do not replicate
    big = capacity.plan(CONSTANTS, capacity.Assumptions(page_kib=48.0), 1e9, capacity.WEEK)
    # Only the `pages` topic scales with the page: 5,000 -> 10,000 B a page on disk.
    assert big["kafka_disk_tb"] == pytest.approx(17.55 + 1e9 * 5000 * 3 / 1e12)
    assert big["kafka_produce_mb_s"] == pytest.approx(WEEK_RATE * 55000 / 1e6)


def test_the_services_are_never_fewer_than_their_replicas() -> None:
    tiny = capacity.plan(CONSTANTS, capacity.Assumptions(), 1e3, capacity.WEEK)
    assert (tiny["workers"], tiny["brokers"], tiny["cassandra_nodes"]) == (1, 3, 3)
    assert tiny["partitions"] == 12


def _results() -> dict:
    site = {"origins": 2000, "pages": 5, "expected": 10000, "delay": 1.0}
    row = {
        "label": "kafka-1",
        "status": "ok",
        "runs": [{}],
        "pages": 10000,
        "span_s": 40.0,
        "wall_s": 50.0,
        "cpu_s": 30.0,
        "kafka_cpu_s": 12.0,  # less 0.04 x 50 s idle: 1.0 ms a page
        "cassandra_cpu_s": 11.0,  # less 0.02 x 50 s idle: 1.0 ms a page
        "idle_rates": {"worker": 0.01, "kafka": 0.04, "cassandra": 0.02},
        "peak_rss_mb": 250.0,
    }
    args = {
        "origins": 2,
        "pages": 20,
        "runs": 1,
        "only": ["kafka-1"],
        "memory": False,
        "stock": False,
        "no_politeness": True,
        "no_profile": True,
        "many_origins": "2000x5@1",
    }
    return {
        "args": args,
        "env": {"date": "2026-01-01 00:00:00 UTC", "repo_commit": "abc1234"},
        "many_origins": {"_site": {**site, "ideal_pages_per_s": 2000.0}, "kafka-1": row},
    }


def _topic(messages: int, key: int, value: int, disk: int) -> dict:
    return {"messages": messages, "key_bytes": key, "value_bytes": value, "disk_bytes": disk}


def _storage() -> dict:
    kafka = {
        "frontier": _topic(2000, 40000, 960000, 1000000),
        "outcomes": _topic(10000, 200000, 3800000, 4000000),
        "pages": _topic(10000, 200000, 249800000, 50000000),
        "status": _topic(10000, 200000, 1800000, 1000000),
        "worker-seen-changelog": _topic(10000, 300000, 200000, 500000),
        "worker-origins-changelog": _topic(500, 10000, 490000, 400000),
    }
    return {
        "kind": "storage_bytes",
        "command": "python -m bench.probes.storage_bytes --origins 100 --pages 100 --partitions 12",
        "date": "2026-01-01 00:00:00 UTC",
        "code": {"commit": "abc1234"},
        "site": {"origins": 100, "pages": 100, "expected": 10000, "page_bytes": 24576},
        "states": {"fetched": 10000, "robots_denied": 400},
        "kafka": kafka,
        "rocksdb": {
            "seen": {"keys": {"s": 10400, "_": 12}, "bytes": {"s": 740000}, "sst_bytes": 416000},
            "origins": {"keys": {"o": 100, "m": 12}, "bytes": {"o": 60000, "m": 6600}},
        },
        "cassandra": {
            "pages": {"rows": 10000, "disk_bytes": 9000000},
            "url_status": {"rows": 10400, "disk_bytes": 1040000},
        },
    }


def test_the_constants_come_from_the_rows_that_measured_them(tmp_path: Path) -> None:
    files = [tmp_path / "run.json", tmp_path / "storage.json"]
    files[0].write_text(json.dumps(_results()))
    files[1].write_text(json.dumps(_storage()))
    data = capacity.collect(files)
    got = {k: v["value"] for k, v in data["constants"].items()}
    assert got["worker_ms_per_page"] == 3.0
    assert got["broker_ms_per_page"] == 1.0
    assert got["cassandra_ms_per_page"] == 1.0
    assert got["bench_page_kib"] == 24.0
    assert got["kafka_messages_per_page"] == pytest.approx(4.25)
    assert got["kafka_pages_value_bytes_per_page"] == 25000.0
    assert got["kafka_pages_disk_bytes_per_page"] == 5000.0
    assert got["kafka_seen_changelog_bytes_per_url"] == 50.0
    assert got["kafka_origins_changelog_bytes_per_origin"] == 800.0
    assert got["rocksdb_bytes_per_seen_url"] == 40.0
    assert got["rocksdb_bytes_per_origin"] == 600.0  # the partitions' counts are not origins
    assert got["cassandra_page_bytes"] == 900.0
    assert got["cassandra_status_bytes"] == 100.0
    assert data["constants"]["worker_ms_per_page"]["row"].startswith("run.json: many_origins")
    assert data["sources"]["storage.json"]["commit"] == "abc1234"
    assert "--many-origins" not in data["sources"]["run.json"]["command"]  # the default


def test_a_results_file_without_a_constant_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(_results()))
    with pytest.raises(SystemExit, match="rocksdb_bytes_per_seen_url"):
        capacity.collect([path])


def test_the_doc_states_every_assumption_and_constant() -> None:
    data = {
        "constants": {
            k: {"value": v, "unit": "u", "what": "w", "row": "r"} for k, v in CONSTANTS.items()
        },
        "sources": {"run.json": {"command": "c", "date": "d", "commit": "x"}},
    }
    text = capacity_doc.render(data)
    for field in dataclasses.fields(capacity.Assumptions):
        assert f"| `{field.name}` |" in text
    for key in CONSTANTS:
        assert f"| `{key}` |" in text


def test_the_committed_doc_is_the_one_the_constants_give() -> None:
    assert capacity.main(["--check"]) == 0, "run: python -m bench.probes.capacity"
