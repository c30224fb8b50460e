"""A table recovery that stopped reading (``topology.worker.recovery_watch``): which changelog
partitions count as stuck, when one is sought again, and when the worker gives up."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from faust.types import TP

from streamcrawl.agents.stream.metrics import Metrics
from streamcrawl.topology.worker import recovery_watch
from streamcrawl.topology.worker.recovery_watch import RecoveryStalled, RecoveryWatch, Stalls

SEEN = TP("w-seen-changelog", 2)
ORIGINS = TP("w-origins-changelog", 2)


def test_a_partition_that_reads_is_never_stuck() -> None:
    stalls = Stalls(stall_s=20, reseeks=2)
    for t, offset in enumerate(range(-1, 50)):
        assert stalls.check(t * 10.0, {SEEN: offset}) == ({}, [])


def test_a_partition_that_reads_nothing_is_sought_again_then_given_up() -> None:
    stalls = Stalls(stall_s=20, reseeks=2)
    looks = [(t, stalls.check(t, {SEEN: -1, ORIGINS: 7})) for t in range(0, 100, 5)]
    acted = [(t, seek, stuck) for t, (seek, stuck) in looks if seek or stuck]
    # first seek 20 s after the first look, the second 20 s later, then given up
    assert acted[:3] == [
        (20, {SEEN: 0, ORIGINS: 7}, []),
        (40, {SEEN: 0, ORIGINS: 7}, []),
        (60, {}, [SEEN, ORIGINS]),
    ]


def test_reading_again_after_a_seek_gives_back_every_seek() -> None:
    stalls = Stalls(stall_s=20, reseeks=1)
    assert stalls.check(0, {SEEN: 3}) == ({}, [])
    assert stalls.check(20, {SEEN: 3}) == ({SEEN: 3}, [])
    assert stalls.check(25, {SEEN: 9}) == ({}, [])  # the seek worked
    assert stalls.check(45, {SEEN: 9}) == ({SEEN: 9}, [])  # stuck again: a seek again
    assert stalls.check(65, {SEEN: 9}) == ({}, [SEEN])


def test_nothing_counts_while_the_broker_does_not_answer() -> None:
    stalls = Stalls(stall_s=20, reseeks=2)
    for t in range(0, 200, 5):
        assert stalls.check(t, {SEEN: 4}, paused=True) == ({}, [])
    assert stalls.check(200, {SEEN: 4}) == ({}, [])  # its clock starts again
    assert stalls.check(220, {SEEN: 4}) == ({SEEN: 4}, [])


def test_a_complete_partition_and_a_new_recovery_are_forgotten() -> None:
    stalls = Stalls(stall_s=20, reseeks=1)
    stalls.check(0, {SEEN: 4})
    stalls.check(20, {SEEN: 4})  # sought once
    stalls.check(21, {})  # complete
    assert stalls.check(30, {SEEN: 4}) == ({}, [])  # a later recovery: from scratch
    assert stalls.check(50, {SEEN: 4}) == ({SEEN: 4}, [])
    stalls.reset()
    assert stalls.check(60, {SEEN: 4}) == ({}, [])


class FakeApp:
    """What the watch reads and calls of a Faust app: its recovery, consumer and crash."""

    def __init__(self, offsets: dict[TP, int], highwaters: dict[TP, int]) -> None:
        self.recovery = SimpleNamespace(
            in_recovery=True, active_offsets=offsets, active_highwaters=highwaters
        )
        self.tables = SimpleNamespace(recovery=self.recovery)
        self.seeks: list[dict[TP, int]] = []
        self.resumed: list[set[TP]] = []
        self.crashed: list[BaseException] = []
        self.consumer = self

    def assignment(self) -> set[TP]:
        return {SEEN, ORIGINS}

    async def seek_wait(self, partitions: dict[TP, int]) -> None:
        self.seeks.append(dict(partitions))

    def resume_partitions(self, tps: set[TP]) -> None:
        self.resumed.append(set(tps))

    async def crash(self, exc: BaseException) -> None:
        self.crashed.append(exc)


async def looks(watch: RecoveryWatch, clock: list[float], times: range) -> None:
    for t in times:
        clock[0] = float(t)
        await watch.check()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [0.0]
    monkeypatch.setattr(recovery_watch.time, "monotonic", lambda: now[0])
    return now


async def test_the_watch_seeks_resumes_and_crashes_the_worker(clock: list[float]) -> None:
    # ORIGINS is complete (offset == highwater); SEEN has records left and reads none
    app = FakeApp({SEEN: -1, ORIGINS: 57}, {SEEN: 61, ORIGINS: 57})
    metrics = Metrics()
    watch = RecoveryWatch(app, metrics, broker_down=lambda: False)
    await looks(watch, clock, range(0, 45, 5))
    assert app.seeks == [{SEEN: 0}, {SEEN: 0}]
    assert app.resumed == [{SEEN}, {SEEN}]
    assert app.crashed == []
    await looks(watch, clock, range(45, 65, 5))
    assert len(app.crashed) == 1 and isinstance(app.crashed[0], RecoveryStalled)
    assert "w-seen-changelog[2]" in str(app.crashed[0])
    assert metrics.recovery_reseeks._value.get() == 2


async def test_the_watch_leaves_a_recovery_that_reads_or_none(clock: list[float]) -> None:
    app = FakeApp({SEEN: -1}, {SEEN: 500})
    watch = RecoveryWatch(app, Metrics(), broker_down=lambda: False)
    for t in range(0, 200, 5):
        app.recovery.active_offsets[SEEN] = t  # reads on
        clock[0] = float(t)
        await watch.check()
    app.recovery.in_recovery = False
    app.recovery.active_offsets[SEEN] = 200  # left over from an unfinished one: not read
    await looks(watch, clock, range(200, 400, 5))
    assert app.seeks == [] and app.crashed == []


async def test_the_watch_waits_for_the_broker(clock: list[float]) -> None:
    app = FakeApp({SEEN: -1}, {SEEN: 61})
    down = [True]
    watch = RecoveryWatch(app, Metrics(), broker_down=lambda: down[0])
    await looks(watch, clock, range(0, 300, 5))
    assert app.seeks == [] and app.crashed == []
    down[0] = False
    await looks(watch, clock, range(300, 325, 5))
    assert app.seeks == [{SEEN: 0}]


def test_a_partition_not_assigned_any_more_is_not_watched() -> None:
    from streamcrawl.topology.worker.internals import recovery_left

    other = TP("w-seen-changelog", 5)  # of an interrupted recovery's assignment
    app: Any = FakeApp({SEEN: 3, other: -1}, {SEEN: 9, other: 40})
    assert recovery_left(app) == {SEEN: 3}
    app.recovery.in_recovery = False
    assert recovery_left(app) is None
