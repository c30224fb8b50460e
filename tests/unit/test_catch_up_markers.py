"""A catch-up marker counts only once every offset of its partition before it was applied:
in a looped two-worker rebalance (``scripts/loop_tests.py``) the consumer read the marker at
``outcomes/3@13`` before seeking back to ``@12``, an outcome it had skipped while revoking; the
worker indexed the partition and fetched that outcome's URL again."""

from __future__ import annotations

import asyncio

from streamcrawl.agents.frontier.records import load_origin
from streamcrawl.agents.stream.frontier_agent import MARKER, FrontierAgent, Where
from streamcrawl.agents.stream.tables import TableStore
from tests.unit.test_frontier_batches import agent as batch_agent
from tests.unit.test_frontier_batches import fetched, links
from tests.unit.test_kafka_frontier import HERE, ORIGIN, Hook

OUT, IN = "x.outcomes", "x.frontier"


def agent(committed: dict[tuple[str, int], int]) -> tuple[FrontierAgent, Hook, TableStore]:
    a, _, hook, store = batch_agent()
    a.committed = lambda topic, partition: committed.get((topic, partition))
    return a, hook, store


def caught_up(hook: Hook) -> int:
    return sum(1 for name, _ in hook.calls if name == "caught_up")


def run(a: FrontierAgent, *events: tuple[Where, bytes]) -> set[int]:
    return asyncio.run(a.handle_batch(list(events)))


def test_a_marker_read_before_the_outcome_it_follows_is_ignored_until_read_again() -> None:
    committed: dict[tuple[str, int], int] = {}
    a, hook, store = agent(committed)
    run(a, (Where(IN, HERE, 0), links(ORIGIN, "/", "/a")))
    run(a, (Where(OUT, HERE, 0), fetched(ORIGIN, 0, "/")))  # outcomes @0 applied
    # The consumer skipped @1 (the outcome of /a) while revoking and reads the marker @2 first.
    refused = run(a, (Where(OUT, HERE, 2), MARKER + b"t"))
    assert refused == {0} and caught_up(hook) == 0  # not indexed, not acknowledged
    # The seek back to the committed offset: @1, then the marker again.
    committed[(OUT, HERE)] = 1
    refused = run(a, (Where(OUT, HERE, 1), fetched(ORIGIN, 1, "/a")), (Where(OUT, HERE, 2), MARKER))
    assert refused == set() and caught_up(hook) == 1
    assert load_origin(store, ORIGIN).head == 2  # indexed with /a's outcome applied


def test_a_marker_at_the_committed_offset_counts() -> None:
    # A partition new to this worker: what came before the committed offset was applied by
    # its previous owner (only applied events are acknowledged: topology/worker/acks.py).
    a, hook, _ = agent({(OUT, HERE): 13})
    assert run(a, (Where(OUT, HERE, 13), MARKER + b"t")) == set()
    assert caught_up(hook) == 1


def test_a_marker_past_the_committed_offset_waits_for_what_lies_between() -> None:
    a, hook, _ = agent({(OUT, HERE): 12})
    assert run(a, (Where(OUT, HERE, 13), MARKER + b"t")) == {0}
    assert caught_up(hook) == 0
    # Read again in order (or resent later): it counts.
    run(a, (Where(OUT, HERE, 12), fetched(ORIGIN, 0, "/")), (Where(OUT, HERE, 13), MARKER))
    assert caught_up(hook) == 1


def test_the_first_offset_of_a_partition_needs_nothing_before_it() -> None:
    a, hook, _ = agent({})  # nothing committed yet (Faust reads 0 as None)
    assert run(a, (Where(OUT, HERE, 0), MARKER + b"t")) == set()
    assert caught_up(hook) == 1


def test_an_ignored_marker_does_not_count_as_applied() -> None:
    # Two markers read before @1: the resend @3 must not follow the ignored @2 into the run.
    a, hook, _ = agent({})
    run(a, (Where(OUT, HERE, 0), fetched(ORIGIN, 0, "/")))
    assert run(a, (Where(OUT, HERE, 2), MARKER + b"t"), (Where(OUT, HERE, 3), MARKER)) == {0, 1}
    assert caught_up(hook) == 0


def test_an_event_read_out_of_order_is_applied_but_not_acknowledged() -> None:
    # Read before the seek back to the skipped @1: acknowledged, Faust could commit past @1
    # (before the seek it knows no committed offset to hold the commit back at).
    a, _, store = agent({})
    run(a, (Where(IN, HERE, 0), links(ORIGIN, "/", "/a", "/b")))
    run(a, (Where(OUT, HERE, 0), fetched(ORIGIN, 0, "/")))
    assert run(a, (Where(OUT, HERE, 2), fetched(ORIGIN, 2, "/b"))) == {0}
    assert run(a, (Where(OUT, HERE, 1), fetched(ORIGIN, 1, "/a"))) == set()
    assert run(a, (Where(OUT, HERE, 2), fetched(ORIGIN, 2, "/b"))) == set()  # read again
    assert load_origin(store, ORIGIN).head == 3


def with_log_start(a: FrontierAgent, start: int) -> list[tuple[str, int]]:
    """The partitions' log starts at ``start`` (retention deleted what came before); the
    look-ups made."""
    calls: list[tuple[str, int]] = []

    async def log_start(topic: str, partition: int) -> int:
        calls.append((topic, partition))
        return start

    a.log_start = log_start
    return calls


def test_with_no_committed_offset_the_log_start_is_the_floor() -> None:
    # The group's offsets expired and retention deleted outcomes @0..@9: the consumer resets
    # to the earliest offset, @10, where nothing before can ever be applied.
    a, hook, store = agent({})
    calls = with_log_start(a, 10)
    run(a, (Where(IN, HERE, 0), links(ORIGIN, "/", "/a")))
    refused = run(
        a,
        (Where(OUT, HERE, 10), fetched(ORIGIN, 0, "/")),
        (Where(OUT, HERE, 11), MARKER + b"t"),
        (Where(OUT, HERE, 12), fetched(ORIGIN, 1, "/a")),
    )
    assert refused == set() and caught_up(hook) == 1
    assert load_origin(store, ORIGIN).head == 2
    assert calls == [(OUT, HERE)]  # looked up once, when @10 would have been refused
    assert run(a, (Where(OUT, HERE, 13), MARKER)) == set() and calls == [(OUT, HERE)]


def test_a_committed_offset_below_the_log_start_gives_way_to_it() -> None:
    a, hook, _ = agent({(OUT, HERE): 4})  # committed, then deleted by retention
    with_log_start(a, 10)
    assert run(a, (Where(OUT, HERE, 10), MARKER + b"t")) == set()
    assert caught_up(hook) == 1


def test_past_the_log_start_a_stale_position_is_still_refused() -> None:
    # Before the seek that ends a recovery (no committed offset known yet), a later event read
    # at a position left over from before the rebalance: @11 is not in order after @10.
    a, hook, _ = agent({})
    calls = with_log_start(a, 10)
    assert run(a, (Where(OUT, HERE, 12), MARKER + b"t"), (Where(OUT, HERE, 13), MARKER)) == {
        0,
        1,
    }
    assert caught_up(hook) == 0
    assert calls == [(OUT, HERE)]  # not one look-up per refused event


def test_a_failed_log_start_look_up_refuses_as_before() -> None:
    a, hook, _ = agent({})

    async def log_start(_topic: str, _partition: int) -> int:
        raise OSError("broker unreachable")

    a.log_start = log_start
    assert run(a, (Where(OUT, HERE, 10), MARKER + b"t")) == {0}
    assert caught_up(hook) == 0
