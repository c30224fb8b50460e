"""The memoised partitioner gives what aiokafka's DefaultPartitioner gives, for every key."""

from __future__ import annotations

from aiokafka.partitioner import DefaultPartitioner
from hypothesis import given
from hypothesis import strategies as st

from streamcrawl.agents.stream.partitioner import key_partition
from streamcrawl.agents.stream.tables import partition_for


@given(key=st.binary(min_size=1, max_size=80), n=st.integers(1, 64))
def test_same_partition_as_the_default_partitioner(key: bytes, n: int) -> None:
    partitions = list(range(n))
    expected = DefaultPartitioner()(key, partitions, partitions)
    assert key_partition(key, partitions, partitions) == expected
    assert key_partition(key, partitions, partitions) == expected  # remembered: the same


@given(origin=st.text(min_size=1, max_size=60), n=st.integers(1, 64))
def test_an_origin_goes_where_the_frontier_agent_looks_for_it(origin: str, n: int) -> None:
    partitions = list(range(n))
    assert key_partition(origin.encode(), partitions, []) == partition_for(origin, n)


def test_no_key_picks_an_available_partition_else_any() -> None:
    assert key_partition(None, [0, 1, 2], [2]) == 2
    assert key_partition(None, [0, 1, 2], []) in {0, 1, 2}
