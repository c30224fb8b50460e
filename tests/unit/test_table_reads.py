"""DirectReads: a Faust table read from its store in one lookup, written through the table."""

from __future__ import annotations

from typing import Any

import pytest

from streamcrawl.agents.stream.tables import TableStore
from streamcrawl.topology.worker.table_reads import DirectReads


class _Store:
    def __init__(self) -> None:
        self.rows: dict[bytes, bytes] = {}
        self.lookups = 0

    def _get(self, key: bytes) -> bytes | None:
        self.lookups += 1
        return self.rows.get(key)


class _Table(dict[bytes, Any]):
    """A table: its writes land in its store (as Faust's do); its own reads must not be used."""

    def __init__(self) -> None:
        super().__init__()
        self.data = _Store()

    def __setitem__(self, key: bytes, value: Any) -> None:
        super().__setitem__(key, value)
        self.data.rows[key] = value

    def __delitem__(self, key: bytes) -> None:
        super().__delitem__(key)
        del self.data.rows[key]

    def get(self, key: bytes, default: Any = None) -> Any:
        raise AssertionError("read through the table")

    def __getitem__(self, key: bytes) -> Any:
        raise AssertionError("read through the table")


def test_reads_are_one_store_lookup_and_writes_go_through_the_table() -> None:
    tables = [_Table() for _ in range(3)]
    store = TableStore(*(DirectReads(t) for t in tables))
    key = b"s" + b"crawl" + b"h" * 16
    assert store.get(key) is None
    store.write({key: b"3", b"o" + b"https://a.example": b"{}"})
    assert store.get(key) == b"3"
    assert tables[0].data.lookups == 2  # one per read
    assert dict(tables[0]) == {key: b"3"}  # written through the table (its changelog)
    store.write({key: None})
    assert store.get(key) is None
    assert key not in dict(tables[0])
    reads = DirectReads(tables[2])
    assert list(reads.items()) == [(b"o" + b"https://a.example", b"{}")]
    assert len(reads) == 1 and list(reads) == [b"o" + b"https://a.example"]
    with pytest.raises(KeyError):
        reads[b"o-missing"]
