"""The worker's RocksDB stores let a revoked partition's database go without a full
collection, and still release its lock when only a reference cycle held it."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import rocksdict
from faust.types import TP

from streamcrawl.topology.settings import load_settings
from streamcrawl.topology.worker import table_stores
from streamcrawl.topology.worker.app import create_app
from streamcrawl.topology.worker.table_stores import FaustRocksStore, drop_databases


@pytest.fixture
def collections(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Full collections asked for by ``table_stores``; automatic ones off meanwhile, so a
    cycle is freed only by a collection the code under test asked for."""
    asked: list[int] = []
    collect = gc.collect

    def counted(*args: Any) -> int:
        asked.append(1)
        return collect(*args)

    monkeypatch.setattr(table_stores.gc, "collect", counted)
    enabled = gc.isenabled()
    gc.disable()
    yield asked
    if enabled:
        gc.enable()


def _in_a_cycle(dbs: dict[int, Any], path: Path) -> None:
    db = rocksdict.Rdict(str(path))
    dbs[0] = db
    cycle: list[Any] = [db]
    cycle.append(cycle)  # garbage once this returns, freed only by a collection


def test_a_database_nothing_else_holds_closes_without_a_collection(
    tmp_path: Path, collections: list[int]
) -> None:
    dbs: dict[int, Any] = {0: rocksdict.Rdict(str(tmp_path / "p0"))}
    assert drop_databases(dbs, {0, 5}) is False  # 5: a partition it never opened
    assert dbs == {} and collections == []
    rocksdict.Rdict(str(tmp_path / "p0")).close()  # its lock was released at once


def test_a_database_a_cycle_holds_is_collected(tmp_path: Path, collections: list[int]) -> None:
    dbs: dict[int, Any] = {}
    _in_a_cycle(dbs, tmp_path / "p0")
    assert drop_databases(dbs, {0}) is True
    assert collections == [1]
    rocksdict.Rdict(str(tmp_path / "p0")).close()


def test_without_the_collection_a_cycle_keeps_the_lock(
    tmp_path: Path, collections: list[int]
) -> None:
    """Why the collection is kept for that case: the partition could not be opened again."""
    dbs: dict[int, Any] = {}
    _in_a_cycle(dbs, tmp_path / "p0")
    dbs.clear()
    with pytest.raises(Exception, match="lock"):
        rocksdict.Rdict(str(tmp_path / "p0"))
    gc.collect()


def test_a_database_still_referenced_is_collected_for(
    tmp_path: Path, collections: list[int]
) -> None:
    db = rocksdict.Rdict(str(tmp_path / "p0"))
    dbs: dict[int, Any] = {0: db}
    assert drop_databases(dbs, {0}) is True
    db.close()


def test_the_worker_tables_revoke_and_stop_without_collections(
    tmp_path: Path, collections: list[int]
) -> None:
    app = create_app(load_settings(state_dir=tmp_path, partitions=3))
    table = app.tables["seen"]
    store = table.data
    assert isinstance(store, FaustRocksStore)
    for partition in (0, 1, 2):
        store._db_for_partition(partition)
    changelog = next(iter(table.changelog_topic.topics))
    store.revoke_partitions(table, {TP(changelog, 1), TP("other-topic", 2)})
    assert set(store._dbs) == {0, 2}
    store._db_for_partition(1)  # reopened: the revoked database let its lock go
    asyncio.run(store.stop())
    assert store._dbs == {} and collections == []
    rocksdict.Rdict(str(store.partition_path(0))).close()
