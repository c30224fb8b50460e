"""The Cassandra sink's requests (agents/sinks/cassandra/pack.py): few, and within the bounds."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamcrawl.agents.sinks.cassandra.driver import batch_bounds
from streamcrawl.agents.sinks.cassandra.pack import (
    DEFAULT_BOUNDS,
    MAX_PARTITIONS,
    SHARE,
    Bounds,
    Row,
    lowest,
    node_bounds,
    pack,
)

BATCH_BYTES, PARTITIONS = DEFAULT_BOUNDS.nbytes, DEFAULT_BOUNDS.partitions


def _row(name: str, i: int, nbytes: int, partition: object) -> Row:
    return (name, (i,), nbytes, partition)


rows = st.lists(st.tuples(st.integers(1, 2 * BATCH_BYTES), st.integers(0, 30)), max_size=60)


@given(big=rows, small=rows, bounds=st.builds(Bounds, st.integers(1, 12), st.integers(1, 9000)))
def test_every_row_once_in_order_and_each_request_within_the_bounds(
    big: list[tuple[int, int]], small: list[tuple[int, int]], bounds: Bounds
) -> None:
    pages = [_row("page", i, n, ("p", i)) for i, (n, _p) in enumerate(big)]
    states = [_row("status", 1000 + i, n, p) for i, (n, p) in enumerate(small)]
    size = {r[1]: r[2] for r in pages + states}
    part = {r[1]: r[3] for r in pages + states}
    groups = pack(pages, states, bounds)
    ids = [values for group in groups for _name, values in group]
    assert sorted(ids) == sorted(r[1] for r in pages + states)  # each row exactly once
    assert [v for v in ids if v[0] >= 1000] == [r[1] for r in states]  # small rows keep order
    for group in groups:
        assert group
        if len(group) > 1:  # a batch: under both of Cassandra's warnings
            assert sum(size[v] for _n, v in group) <= bounds.nbytes
            assert len({part[v] for _n, v in group}) <= bounds.partitions


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


def test_no_request_spans_more_partitions_than_the_bounds() -> None:
    states = [_row("status", i, 10, ("s", i)) for i in range(3 * PARTITIONS)]
    assert [len(g) for g in pack([], states)] == [PARTITIONS] * 3
    same = [_row("status", i, 10, ("s", 0)) for i in range(50)]  # one partition: by size only
    assert [len(g) for g in pack([], same)] == [50]
    assert [len(g) for g in pack([], states, Bounds(25, 32768))] == [25, 5]


def test_raised_bounds_put_many_pages_in_a_request() -> None:
    pages = [_row("page", i, 3000, ("p", i)) for i in range(40)]
    states = [_row("status", 100 + i, 200, ("s", i)) for i in range(40)]
    assert len(pack(pages, states)) == 40  # the defaults: a page a request
    groups = pack(pages, states, Bounds(50, 32768))
    assert [sum(n == "page" for n, _v in g) for g in groups] == [10, 10, 10, 10]
    assert sum(len(g) for g in groups) == 80  # 2,768 bytes left in each: 13 states fit


_NAMES = ("batch_size_warn_threshold_in_kb", "batch_size_fail_threshold_in_kb",
          "unlogged_batch_across_partitions_warn_threshold")  # fmt: skip


@pytest.mark.parametrize(
    ("values", "bounds"),
    [
        (("5", "50", "10"), DEFAULT_BOUNDS),  # Cassandra's defaults: the bounds the sink had
        (("40", "50", "50"), Bounds(50, int(40 * 1024 * SHARE))),  # raised for a crawl
        (("80", "50", "10"), Bounds(10, int(50 * 1024 * SHARE))),  # the fail threshold is lower
        (("40", "50", "1000"), Bounds(MAX_PARTITIONS, int(40 * 1024 * SHARE))),  # capped
        ((None, None, None), DEFAULT_BOUNDS),  # not said: the defaults
        (("lots", "0", "-1"), DEFAULT_BOUNDS),  # unreadable or none set: the defaults
        (("0.5", "50", "1"), Bounds(1, 409)),  # tiny: still a row a request
    ],
)
def test_node_bounds_under_the_nodes_warnings(values: tuple, bounds: Bounds) -> None:
    said = {n: v for n, v in zip(_NAMES, values, strict=True) if v is not None}
    assert node_bounds(said)[0] == bounds


def test_a_cluster_batches_within_every_nodes_bounds() -> None:
    assert lowest([Bounds(50, 32768), Bounds(10, 40960)]) == Bounds(10, 32768)
    assert lowest([]) == DEFAULT_BOUNDS


class _Host:
    def __init__(self, endpoint: str, up: bool, said: dict[str, str] | None) -> None:
        self.endpoint, self.is_up, self.said = endpoint, up, said


class _Session:
    def execute(self, query: str, *, host: _Host, timeout: float) -> list[object]:
        assert "system_views.settings" in query and timeout > 0
        if host.said is None:
            raise TimeoutError("no answer")
        return [SimpleNamespace(name=n, value=v) for n, v in host.said.items()]


def test_batch_bounds_asks_each_node_that_is_up_and_keeps_the_lowest() -> None:
    raised = dict(zip(_NAMES, ("40", "50", "50"), strict=True))
    hosts = [
        _Host("a:9042", True, raised),
        _Host("b:9042", True, dict(raised, unlogged_batch_across_partitions_warn_threshold="20")),
        _Host("c:9042", False, None),  # down: not asked
    ]
    cluster = SimpleNamespace(metadata=SimpleNamespace(all_hosts=lambda: hosts))
    bounds, said = batch_bounds(cluster, _Session())
    assert bounds == Bounds(20, 32768)
    assert (
        said == "a:9042: warns over 40 KiB or 50 partitions, refuses over 50 KiB; "
        "b:9042: warns over 40 KiB or 20 partitions, refuses over 50 KiB"
    )
    hosts.append(_Host("d:9042", True, None))  # up, but cannot say: Cassandra's defaults
    assert batch_bounds(cluster, _Session())[0] == DEFAULT_BOUNDS
    assert batch_bounds(SimpleNamespace(metadata=SimpleNamespace(all_hosts=list)), _Session()) == (
        DEFAULT_BOUNDS,
        "no node up: the defaults",
    )
