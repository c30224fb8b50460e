"""The Cassandra sink's requests (agents/sinks/cassandra/pack.py): few, and within the bounds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamcrawl.agents.sinks.cassandra.pack import BATCH_BYTES, MAX_PARTITIONS, Row, pack


def _row(name: str, i: int, nbytes: int, partition: object) -> Row:
    return (name, (i,), nbytes, partition)


rows = st.lists(st.tuples(st.integers(1, 2 * BATCH_BYTES), st.integers(0, 30)), max_size=60)


@given(big=rows, small=rows)
def test_every_row_once_in_order_and_each_request_within_the_bounds(
    big: list[tuple[int, int]], small: list[tuple[int, int]]
) -> None:
    pages = [_row("page", i, n, ("p", i)) for i, (n, _p) in enumerate(big)]
    states = [_row("status", 1000 + i, n, p) for i, (n, p) in enumerate(small)]
    size = {r[1]: r[2] for r in pages + states}
    part = {r[1]: r[3] for r in pages + states}
    groups = pack(pages, states)
    ids = [values for group in groups for _name, values in group]
    assert sorted(ids) == sorted(r[1] for r in pages + states)  # each row exactly once
    assert [v for v in ids if v[0] >= 1000] == [r[1] for r in states]  # small rows keep order
    for group in groups:
        assert group
        if len(group) > 1:  # a batch: under both of Cassandra's warnings
            assert sum(size[v] for _n, v in group) <= BATCH_BYTES
            assert len({part[v] for _n, v in group}) <= MAX_PARTITIONS


def test_small_rows_ride_with_the_pages_and_a_big_row_goes_alone() -> None:
    pages = [_row("page", i, 3000, ("p", i)) for i in range(4)]
    pages.append(_row("page", 4, 9000, ("p", 4)))  # with its body: alone
    states = [_row("status", 10 + i, 200, ("s", i)) for i in range(20)]
    groups = pack(pages, states)
    assert len(groups) == 5  # 4 pages x 5 states each, the big page alone
    assert [len(g) for g in groups] == [6, 6, 6, 6, 1]
    assert groups[4] == [("page", (4,))]
    small_pages = [_row("page", i, 1000, ("p", i)) for i in range(8)]
    assert [len(g) for g in pack(small_pages, [])] == [4, 4]  # pages share a request too


def test_no_request_spans_more_than_max_partitions() -> None:
    states = [_row("status", i, 10, ("s", i)) for i in range(3 * MAX_PARTITIONS)]
    assert [len(g) for g in pack([], states)] == [MAX_PARTITIONS] * 3
    same = [_row("status", i, 10, ("s", 0)) for i in range(50)]  # one partition: by size only
    assert [len(g) for g in pack([], same)] == [50]
