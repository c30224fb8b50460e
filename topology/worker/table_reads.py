"""The frontier's Faust tables, read straight from their RocksDB stores.

``Table.get`` goes through Faust's per-key layers (``Mapping.get``, the table's sensors,
``FastUserDict``) and asks RocksDB twice: ``key in data``, then ``data[key]``. The frontier
agent reads a seen mark for almost every link of every page (most are hits: links seen
before), so the second lookup and the layers were a visible share of a saturated worker's
profile (docs/performance.md, "Table reads and the partitioner"). ``DirectReads`` answers
``get`` with one lookup in the table's store (``internals.store_get``: the current event's
partition, as ``Table.get`` reads it) and hands everything else, writes included, to the table
itself.
"""

from __future__ import annotations

from collections.abc import Callable, ItemsView, Iterator, MutableMapping
from typing import Any

from streamcrawl.topology.worker.internals import store_get


class DirectReads(MutableMapping[bytes, Any]):
    """``table`` with its reads from its store (resolved at the first read: Faust creates the
    store lazily, and it must be the one the table opens)."""

    def __init__(self, table: Any) -> None:
        self._table = table
        self._get: Callable[[bytes], bytes | None] | None = None

    def get(self, key: bytes, default: Any = None) -> Any:
        get = self._get
        if get is None:
            get = self._get = store_get(self._table)
        value = get(key)
        return default if value is None else value

    def __getitem__(self, key: bytes) -> Any:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def __setitem__(self, key: bytes, value: Any) -> None:
        self._table[key] = value

    def __delitem__(self, key: bytes) -> None:
        del self._table[key]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)

    def items(self) -> ItemsView[bytes, Any]:
        items: ItemsView[bytes, Any] = self._table.items()
        return items
