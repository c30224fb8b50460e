"""``admin reshard`` without Kafka: generation naming and resolution, what a run does from the
pointer (nothing, a new generation, resume), the resumed steps, the lock's rules, the command
line's bad input."""

from __future__ import annotations

import os
import socket
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from streamcrawl.agents.errors import ConfigError
from streamcrawl.agents.stream.links import frontier_pieces
from streamcrawl.topology.admin import generation, topics
from streamcrawl.topology.admin.generation import Generation, Pointer
from streamcrawl.topology.admin.reshard import lock, tail
from streamcrawl.topology.admin.reshard import run as reshard_run
from streamcrawl.topology.cli import main as cli
from streamcrawl.topology.settings import load_settings


def test_a_generation_names_its_frontier_topics_and_group_and_keeps_the_others() -> None:
    first = load_settings(topic_prefix="t", partitions=3)
    second = generation.at(first, Generation(number=2, partitions=6))
    assert (topics.topic_name(first, "frontier"), topics.app_id(first)) == (
        "t.frontier",
        "t-worker",
    )
    assert topics.topic_name(second, "frontier") == "t.g2.frontier"
    assert topics.topic_name(second, "budget") == "t.g2.budget"
    assert topics.topic_name(second, "counts") == "t.g2.counts"
    assert topics.changelog_name(second, "seen") == "t-g2-worker-seen-changelog"
    assert [topics.topic_name(second, s) for s in ("pages", "status", "captures", "control")] == [
        "t.pages", "t.status", "t.captures", "t.control"
    ]  # fmt: skip
    assert second.partitions == 6


@pytest.mark.parametrize(
    ("pointer", "partitions", "error"),
    [
        (None, 3, None),
        (Pointer(current=Generation(number=2, partitions=6)), 6, None),
        (Pointer(current=Generation(number=2, partitions=6)), 3, "STREAMCRAWL_PARTITIONS=6"),
        (
            Pointer(
                current=Generation(number=1, partitions=3),
                next=Generation(number=2, partitions=6),
                step="tail",
            ),
            3,
            "a reshard to 6 partitions is under way",
        ),
    ],
)
def test_the_worker_serves_only_a_whole_generation_of_its_partition_count(
    monkeypatch: pytest.MonkeyPatch, pointer: Pointer | None, partitions: int, error: str | None
) -> None:
    monkeypatch.setattr(generation, "read_pointer", lambda settings: pointer)
    settings = load_settings(topic_prefix="t", partitions=partitions)
    if error is not None:
        with pytest.raises(ConfigError, match=error):
            generation.resolve(settings, strict=True)
        return
    resolved = generation.resolve(settings, strict=True)
    assert resolved.generation == (pointer.current.number if pointer else 1)
    # the commands that only publish follow the pointer whatever their partition setting
    loose = generation.resolve(load_settings(topic_prefix="t", partitions=1))
    assert loose.partitions == (pointer.current.partitions if pointer else 1)


def test_a_rerun_resumes_after_the_last_step_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []
    saved: list[str] = []
    run = reshard_run._Run(load_settings(topic_prefix="t"), say=lambda line: None)
    for step in reshard_run.STEPS[1:]:
        monkeypatch.setattr(run, f"_{step}", lambda old, new, p, step=step: ran.append(step))
    monkeypatch.setattr(run, "save", lambda pointer: saved.append(pointer.step))
    run.lock = SimpleNamespace(check=lambda: ran.append("lock"))  # type: ignore[assignment]
    pointer = Pointer(
        current=Generation(number=1, partitions=3),
        next=Generation(number=2, partitions=6),
        step="tail",
        highest=2,
    )
    done = run.migrate(pointer)
    assert ran == ["lock", "tables", "lock", "verified"] and saved == ["tables", "verified"]
    assert done.step == "verified" and done.next == pointer.next


SERVED_6 = Pointer(
    current=Generation(number=2, partitions=6),
    previous=Generation(number=1, partitions=3),
    highest=2,
)
HALF_WAY_6 = Pointer(  # a reshard from 3 to 6 killed after a step
    current=Generation(number=1, partitions=3),
    next=Generation(number=2, partitions=6),
    step="tail",
    highest=2,
)


@pytest.mark.parametrize(
    ("pointer", "partitions", "action"),
    [
        (Pointer(current=Generation(number=1, partitions=3)), 3, "nothing"),  # never resharded
        (SERVED_6, 6, "nothing"),  # a finished reshard run again
        (SERVED_6, 4, "plan"),
        (SERVED_6, 3, "plan"),  # back to 3 is a new generation, not a rollback
        *[(msgspec.structs.replace(HALF_WAY_6, step=s), 6, "resume") for s in reshard_run.STEPS],
        (HALF_WAY_6, 3, "a reshard to 6 partitions is under way"),  # the count it serves
        (HALF_WAY_6, 4, "a reshard to 6 partitions is under way"),
    ],
)
def test_a_rerun_of_a_finished_reshard_does_nothing_and_an_unfinished_one_resumes(
    pointer: Pointer, partitions: int, action: str
) -> None:
    if action not in ("nothing", "plan", "resume"):  # the error's message
        with pytest.raises(ConfigError, match=action):
            reshard_run.decide(pointer, partitions)
        return
    assert reshard_run.decide(pointer, partitions) == action


class FakeRun:
    """``reshard_run._Run`` without Kafka: serves ``pointer`` and records what is done."""

    def __init__(self, pointer: Pointer) -> None:
        self._pointer = pointer
        self.calls: list[tuple[str, object]] = []

    def __call__(self, settings: object, say: object) -> FakeRun:  # as ``_Run(settings, say)``
        return self

    def __enter__(self) -> FakeRun:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def pointer(self) -> Pointer:
        return self._pointer

    def stopped(self, gen: Generation) -> None:
        self.calls.append(("stopped", gen.number))

    def save(self, pointer: Pointer) -> None:
        self.calls.append(("save", pointer.next))

    def migrate(self, pointer: Pointer) -> Pointer:
        self.calls.append(("migrate", pointer.step))
        return pointer

    def switch(self, pointer: Pointer) -> None:
        self.calls.append(("switch", pointer.next))


@pytest.mark.parametrize(
    ("pointer", "partitions", "out", "calls"),
    [
        (
            SERVED_6,
            6,
            ["reshard: the topics already have 6 partitions (generation 2): nothing to do"],
            [],  # not even the workers checked: a deploy pipeline reruns it with them running
        ),
        (
            SERVED_6,
            4,
            ["planned generation 3 with 4 partitions"],
            [
                ("stopped", 2),
                ("save", Generation(number=3, partitions=4)),
                ("migrate", "planned"),
                ("switch", Generation(number=3, partitions=4)),
            ],
        ),
        (
            HALF_WAY_6,
            6,
            ["resuming generation 2 after step tail"],
            [("stopped", 1), ("migrate", "tail"), ("switch", Generation(number=2, partitions=6))],
        ),
    ],
)
def test_the_command_says_a_rerun_of_a_finished_reshard_in_one_line_and_exits_0(
    pointer: Pointer,
    partitions: int,
    out: list[str],
    calls: list[tuple[str, object]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = FakeRun(pointer)
    monkeypatch.setattr(reshard_run, "_Run", fake)
    assert cli.main(["admin", "reshard", "--partitions", str(partitions)]) == 0
    seen = capsys.readouterr()
    assert (seen.out.splitlines(), seen.err) == (out, "")
    assert fake.calls == calls


def lease(who: str, at: float, *, ttl: float = 10.0, released: bool = False) -> tuple:
    value = lock.Lease(holder=who, host="h", pid=1, at=at, expires=at + ttl, released=released)
    return generation.LOCK, msgspec.json.encode(value)


def test_the_first_claim_in_the_log_holds_the_lock_until_released_or_expired() -> None:
    held = lock.holder([lease("a", 0), lease("b", 1), lease("a", 5)])
    assert held is not None and held.holder == "a" and held.expires == 15
    assert lock.holder([lease("a", 0), lease("a", 2, released=True), lease("b", 3)]).holder == "b"
    assert lock.holder([lease("a", 0), lease("b", 11)]).holder == "b"  # a's lease lapsed
    assert lock.holder([(b"pointer", b"{}"), lease("a", 0, released=True)]) is None


def test_a_lease_of_a_dead_process_on_this_host_binds_no_more() -> None:
    me = socket.gethostname()
    alive = lock.Lease(holder="a", host=me, pid=os.getpid(), at=0, expires=100)
    assert lock.alive(alive, 50) and not lock.alive(alive, 100)
    gone = msgspec.structs.replace(alive, pid=2**22 + 12345)  # above any pid_max default
    assert not lock.alive(gone, 50)
    elsewhere = msgspec.structs.replace(gone, host=me + "-other")
    assert lock.alive(elsewhere, 50)  # another host: only the expiry tells


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["admin", "reshard"], "exactly one of --partitions N, --rollback, --delete-old"),
        (["admin", "reshard", "--partitions", "0"], "--partitions"),
        (["admin", "reshard", "--partitions", "4", "--delete-old"], "exactly one of"),
        (["admin", "create-topics", "--rollback"], "go with `admin reshard` only"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    monkeypatch.delenv("STREAMCRAWL_PARTITIONS", raising=False)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


def test_the_uncommitted_events_keep_their_order_per_origin_counted_ones_first() -> None:
    a, b = b"http://a.test", b"http://b.test"  # a and b: one partition of 2, the same of 1
    tails = {
        0: [(10, a, b"a10"), (11, None, b"marker"), (12, b, b"b12"), (13, a, b"a13")],
        1: [(5, b"http://c.test", b"c5")],
    }
    limits = {0: 12, 1: -1}  # partition 0 had counted up to 12 (a batch applied in part)
    planned = tail.plan("t.frontier", tails, limits.__getitem__, 1)
    names = [c.name for c in planned[0]]
    # counted first (a10, b12), in offset order; then the others; the marker left out
    assert names == [b"t.frontier/0@10", b"t.frontier/0@12", b"t.frontier/0@13", b"t.frontier/1@5"]
    assert [c.counted for c in planned[0]] == [True, True, False, False]
    copied = {n: (0, i) for i, n in enumerate(names)}
    assert tail.counted_up_to(planned[0], copied) == 1
    assert tail.counted_up_to(planned[0], {}) == -1  # nothing copied yet


def test_a_batch_merged_per_partition_is_copied_in_pieces_to_its_origins_new_partitions() -> None:
    """The fetch service merges links per partition (``agents.stream.links.by_partition``):
    one event holds the URLs of origins that share a partition of 3 but not of 6. Copied whole
    to its key's new partition, the others' URLs would be re-sent from there as new events,
    which a replay could no longer match with the seen marks the event wrote."""
    from streamcrawl.agents.stream.tables import partition_for
    from streamcrawl.schemas.codec import decode, encode
    from streamcrawl.schemas.records import FrontierBatch, UrlRef

    origins = [f"http://o{i}.test" for i in range(200)]
    a = origins[0]
    b = next(
        o
        for o in origins[1:]
        if partition_for(o, 3) == partition_for(a, 3) and partition_for(o, 6) != partition_for(a, 6)
    )
    urls = (UrlRef(a + "/1", 1), UrlRef(b + "/1", 1), UrlRef("HTTP://O0.TEST/2", 1))
    value = encode(FrontierBatch(crawl_id="c", origin=a, urls=urls))
    old = partition_for(a, 3)
    planned = tail.plan(
        "t.frontier", {old: [(4, a.encode(), value)]}, lambda _p: -1, 6, frontier_pieces
    )
    got = {
        q: [(c.name, c.key, [u.url for u in decode("frontier", c.value).urls]) for c in copies]
        for q, copies in planned.items()
    }
    name = f"t.frontier/{old}@4".encode()
    assert got == {
        partition_for(a, 6): [
            (tail.piece_name(name, partition_for(a, 6)), a.encode(), [a + "/1", "HTTP://O0.TEST/2"])
        ],
        partition_for(b, 6): [(tail.piece_name(name, partition_for(b, 6)), b.encode(), [b + "/1"])],
    }
    # One partition's origins only (nearly every event): the event itself, under its name.
    alone = encode(FrontierBatch(crawl_id="c", origin=a, urls=urls[:1]))
    assert frontier_pieces(a.encode(), alone, 6) == [(a.encode(), alone)]
    assert frontier_pieces(a.encode(), b"{not json", 6) == [(a.encode(), b"{not json")]
    assert frontier_pieces(b"\xff", value, 6) == [(b"\xff", value)]  # not an origin
