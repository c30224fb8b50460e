"""The frontier's tables in Faust's RocksDB store, without a full collection at every revoke.

``faust.stores.rocksdb.Store`` drops the databases of the partitions a rebalance revoked (all
of them when the worker stops) and then calls ``gc.collect()``: a database kept alive only by
a reference cycle would otherwise hold its lock, and the partition could not be opened again.
A full collection walks every object the worker tracks, stalling the event loop meanwhile. It
ran at every rebalance, once per table (three), whether or not anything was revoked, and three
times more at stop (timed with ``gc.callbacks``: docs/performance.md, "The garbage
collector").

Nothing of ours keeps a database: CPython frees it, and RocksDB closes it, as soon as the
store lets it go. So ``FaustRocksStore`` collects only when a database it let go is still
referenced elsewhere (``sys.getrefcount``), which is when Faust's collection was needed.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import MutableMapping, Set
from typing import Any

from faust.stores import rocksdb
from faust.types import TP
from yarl import URL

from streamcrawl.topology.worker.internals import rocksdb_table, store_databases

# References to a database while ``_held`` looks at it: the caller's, ``_held``'s argument,
# ``getrefcount``'s argument. More: something else keeps it.
_OWN_REFERENCES = 3


def _held(db: object) -> bool:
    return sys.getrefcount(db) > _OWN_REFERENCES


def drop_databases(dbs: MutableMapping[int, Any], partitions: Set[int]) -> bool:
    """Remove the databases of ``partitions`` from ``dbs`` and let them close; a full
    collection only if one of them is still referenced elsewhere. True if it ran."""
    held = False
    for partition in partitions:
        db = dbs.pop(partition, None)
        if db is not None:
            held = held or _held(db)
            del db
    if held:
        gc.collect()
    return held


class FaustRocksStore(rocksdb.Store):  # type: ignore[misc]  # Faust's classes are untyped
    """Faust's RocksDB store; revoke and stop let databases go by ``drop_databases``."""

    def revoke_partitions(self, table: Any, tps: Set[TP]) -> None:
        topics = table.changelog_topic.topics
        dbs = store_databases(self)
        gone = {tp.partition for tp in tps if tp.topic in topics and tp.partition in dbs}
        if gone:
            self.logger.info("closing dbs of %s partitions %s", table.name, sorted(gone))
        drop_databases(dbs, gone)

    async def stop(self) -> None:
        self.logger.info("Closing rocksdb on stop")
        dbs = store_databases(self)
        drop_databases(dbs, set(dbs))


def new_rocks_store(table: Any, url: str | URL) -> FaustRocksStore:
    """The ``FaustRocksStore`` of ``table`` at ``url``, made as Faust makes its own."""
    return FaustRocksStore(
        url,
        table.app,
        table,
        table_name=table.name,
        key_type=table.key_type,
        key_serializer=table.key_serializer,
        value_serializer=table.value_serializer,
        value_type=table.value_type,
        loop=table.loop,
        options=table.options,
    )


# A Faust table whose ``rocksdb://`` store is ``FaustRocksStore`` (``App(Table=RocksTable)``).
RocksTable = rocksdb_table(new_rocks_store)
