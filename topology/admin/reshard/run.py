"""``admin reshard``: move the crawls to a new generation of topics with another partition count.

Steps, each recorded in the pointer (``topology/admin/generation.py``) once complete, each safe
to run again over a part of itself, so a run killed at any point is resumed by running the same
command again:

1. ``planned``: the workers are stopped (their consumer group has no member) and the new
   generation (the next number, its partition count) is recorded as ``next``; from then on a
   worker refuses to start until the reshard ends.
2. ``topics``: the new generation's frontier topics, changelogs and budget topic exist;
   ``pages``, ``status`` and ``captures`` have at least the new count (their consumers do not
   depend on it: they only grow).
3. ``tail``: the events of ``frontier`` and ``outcomes`` the workers did not commit are copied
   to the new topics (``tail.py``), each with its old name in a header: a rerun skips those
   already copied; the switch copies what arrived since (a seed sent meanwhile).
4. ``tables``: every table entry is written to its new partition's changelog
   (``layout.py``), the counts merged (``tally.py``), the budget and ``counts`` topics
   written, and each new partition's manifest recorded (``manifest.py``).
5. ``verified``: the new changelogs read back match the manifests.

Then the switch: the pointer names the new generation current and keeps the old one as
``previous`` (``rollback`` goes back to it; ``delete_old`` deletes the others).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

import msgspec

from streamcrawl.agents.errors import ConfigError, CrawlError
from streamcrawl.agents.stream.control import budget_key
from streamcrawl.agents.stream.counts import PartitionCounts, counts_key, decode_counts, message_key
from streamcrawl.agents.stream.links import frontier_pieces
from streamcrawl.topology.admin import generation, topics
from streamcrawl.topology.admin.generation import Generation, Pointer
from streamcrawl.topology.admin.reshard import layout, manifest, tail, tally
from streamcrawl.topology.admin.reshard.broker import Broker
from streamcrawl.topology.admin.reshard.lock import Lock
from streamcrawl.topology.settings import Settings

STEPS = ("planned", "topics", "tail", "tables", "verified")
INPUTS = ("frontier", "outcomes")  # what the frontier agents consume
GROWN = ("pages", "status", "captures")  # keyed by origin, read by consumers of any count
Say = Callable[[str], None]


def reshard(settings: Settings, partitions: int, say: Say = print) -> None:
    """Move the crawls to ``partitions`` partitions (module docstring), or say in one line that
    nothing is to do (``decide``). Raises ConfigError for another reshard's count, CrawlError
    for a state that forbids it now (no topics, workers running, the lock held)."""
    with _Run(settings, say) as run:
        pointer = run.pointer()
        action = decide(pointer, partitions)
        if action == "nothing":
            say(
                f"reshard: the topics already have {partitions} partitions (generation "
                f"{pointer.current.number}): nothing to do"
            )
            return
        run.stopped(pointer.current)
        if action == "plan":
            nxt = Generation(number=pointer.highest + 1, partitions=partitions)
            pointer = Pointer(
                current=pointer.current,
                previous=pointer.previous,
                next=nxt,
                step="planned",
                highest=nxt.number,
            )
            run.save(pointer)
            say(f"planned generation {nxt.number} with {partitions} partitions")
        else:
            assert pointer.next is not None
            say(f"resuming generation {pointer.next.number} after step {pointer.step}")
        pointer = run.migrate(pointer)
        run.switch(pointer)


def decide(pointer: Pointer, partitions: int) -> Literal["nothing", "plan", "resume"]:
    """What ``reshard --partitions`` does from ``pointer``: ``resume`` the reshard under way to
    that count; ``nothing`` when none is and the generation served has that count (a finished
    reshard run again, as a deploy pipeline does: the workers may run); else ``plan`` a new
    generation. A reshard under way to another count raises ConfigError."""
    if pointer.next is not None:
        if pointer.next.partitions != partitions:
            raise ConfigError(
                f"a reshard to {pointer.next.partitions} partitions is under way: run it again "
                f"with --partitions {pointer.next.partitions}, or --rollback"
            )
        return "resume"
    return "nothing" if partitions == pointer.current.partitions else "plan"


def rollback(settings: Settings, say: Say = print) -> None:
    """Serve the previous generation again (or abandon a reshard under way)."""
    with _Run(settings, say) as run:
        pointer = run.pointer()
        if pointer.next is not None:
            run.save(
                Pointer(current=pointer.current, previous=pointer.previous, highest=pointer.highest)
            )
            say(
                f"abandoned generation {pointer.next.number}; generation "
                f"{pointer.current.number} ({pointer.current.partitions} partitions) serves"
            )
            return
        if pointer.previous is None:
            raise CrawlError("no previous generation to roll back to")
        run.stopped(pointer.current)
        run.save(
            Pointer(current=pointer.previous, previous=pointer.current, highest=pointer.highest)
        )
        say(
            f"generation {pointer.previous.number} serves again: start the workers with "
            f"{pointer.previous.partitions} partitions (what generation {pointer.current.number} "
            "did since the switch is not in it)"
        )


def delete_old(settings: Settings, say: Say = print) -> None:
    """Delete the topics, changelogs, groups and manifests of every generation but the one
    served."""
    with _Run(settings, say) as run:
        pointer = run.pointer()
        if pointer.next is not None:
            raise CrawlError("a reshard is under way: finish it or --rollback first")
        names: list[str] = []
        groups: list[str] = []
        for number in range(1, pointer.highest + 1):
            if number == pointer.current.number:
                continue
            old = generation.at(settings, Generation(number=number, partitions=1))
            names += [topics.topic_name(old, s) for s in topics.GENERATION_TOPICS]
            names += [topics.changelog_name(old, t) for t in layout.TABLES]
            groups.append(topics.app_id(old))
        for number in range(1, pointer.highest + 1):
            if number != pointer.current.number:
                run.tombstone_manifests(number)
        run.broker.delete(names, groups)
        run.save(Pointer(current=pointer.current, highest=pointer.highest))
        say(f"deleted generations other than {pointer.current.number}: {len(names)} topics")


@dataclass
class _Run:
    settings: Settings
    say: Say
    broker: Broker = field(init=False)
    lock: Lock = field(init=False)
    _offsets: dict[int, dict[str, int]] = field(init=False, default_factory=dict)

    def __enter__(self) -> _Run:
        self.broker = Broker(self.settings)
        try:
            self._first = self._check_topics()
            self.lock = Lock(self.settings)
            self.lock.acquire()
        except BaseException:
            self.broker.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.lock.release()
        finally:
            self.broker.close()

    def _check_topics(self) -> Generation:
        """Generation 1 as the topics have it; creates ``<prefix>.generation``."""
        name = topics.topic_name(self.settings.model_copy(update={"generation": 1}), "frontier")
        count = self.broker.partitions().get(name)
        pointer = generation.read_pointer(self.settings)
        if count is None and pointer is None:
            raise CrawlError(
                f"no topics with prefix {self.settings.topic_prefix} (no {name}): run "
                "`streamcrawl admin create-topics` (and check STREAMCRAWL_TOPIC_PREFIX)"
            )
        config = topics.durability_configs(self.settings) | {
            "cleanup.policy": "compact",
            "max.message.bytes": str(self.settings.max_message_bytes),
        }
        self.broker.create([(generation.topic(self.settings), 1, config)])
        return Generation(number=1, partitions=count or 0)

    def pointer(self) -> Pointer:
        found = generation.read_pointer(self.settings)
        return found if found is not None else Pointer(current=self._first)

    def save(self, pointer: Pointer) -> None:
        generation.write_pointer(self.settings, pointer)

    def at(self, gen: Generation) -> Settings:
        return generation.at(self.settings, gen)

    def stopped(self, gen: Generation) -> None:
        group = topics.app_id(self.at(gen))
        members = self.broker.members(group)
        if members:
            raise CrawlError(
                f"{members} worker(s) of generation {gen.number} still run (consumer group "
                f"{group}): stop them (chart: `helm upgrade ... --set worker.replicas=0`) and "
                "run again"
            )

    def migrate(self, pointer: Pointer) -> Pointer:
        assert pointer.next is not None
        old, new = self.at(pointer.current), self.at(pointer.next)
        done = STEPS.index(pointer.step)
        for step in STEPS[done + 1 :]:
            self.lock.check()
            started = time.monotonic()
            getattr(self, f"_{step}")(old, new, pointer)
            pointer = Pointer(
                current=pointer.current,
                previous=pointer.previous,
                next=pointer.next,
                step=step,
                highest=pointer.highest,
            )
            self.save(pointer)
            self.say(f"step {step} done in {time.monotonic() - started:.1f} s")
        return pointer

    def switch(self, pointer: Pointer) -> None:
        assert pointer.next is not None
        old, new = self.at(pointer.current), self.at(pointer.next)
        late = self._copy_tail(old, new)[2]  # what arrived on the old inputs meanwhile
        self.lock.check()
        self.save(Pointer(current=pointer.next, previous=pointer.current, highest=pointer.highest))
        self.say(
            f"generation {pointer.next.number} serves {pointer.next.partitions} partitions"
            f"{f' ({late} late events copied)' if late else ''}: start the workers with "
            f"STREAMCRAWL_PARTITIONS={pointer.next.partitions} (chart: `helm upgrade ... --set "
            f"kafka.partitions={pointer.next.partitions}`)"
        )

    # --- the steps -------------------------------------------------------------------------

    def _topics(self, old: Settings, new: Settings, pointer: Pointer) -> None:
        topics.create_topics(new, warn=lambda line: self.say(f"warning: {line}"))
        budget = topics.durability_configs(new) | {"cleanup.policy": "compact"}
        self.broker.create([(topics.topic_name(new, "budget"), 1, budget)])
        grown = self.broker.grow([topics.topic_name(new, s) for s in GROWN], new.partitions)
        if grown:
            self.say(f"grew {', '.join(grown)} to {new.partitions} partitions")

    def _tail(self, old: Settings, new: Settings, pointer: Pointer) -> None:
        copied = self._copy_tail(old, new)[2]
        self.say(f"copied {copied} events the workers had not committed")

    def _tables(self, old: Settings, new: Settings, pointer: Pointer) -> None:
        events, counted, _ = self._copy_tail(old, new, copy=False)
        step = math.gcd(old.partitions, new.partitions)
        moved = skipped = 0
        for part in range(step):  # one class of partitions in memory at a time
            olds = [p for p in range(old.partitions) if p % step == part]
            news: dict[int, dict[str, dict[bytes, bytes]]] = {
                q: {t: {} for t in layout.TABLES} for q in range(new.partitions) if q % step == part
            }
            old_counts: dict[int, PartitionCounts] = {}
            queued: dict[int, Counter[str]] = {}
            read = {
                t: self.broker.states(topics.changelog_name(old, t), olds) for t in layout.TABLES
            }
            for p in olds:
                tables = {t: read[t].pop(p) for t in layout.TABLES}
                raw = tables["origins"].get(counts_key(p))
                if raw is not None:
                    old_counts[p] = decode_counts(raw)
                for placed in layout.place(tables, p, old.partitions, new.partitions, events):
                    news[placed.partition][placed.table][placed.key] = placed.value
                for q, by_crawl in layout.queued(tables, new.partitions).items():
                    queued.setdefault(q, Counter()).update(by_crawl)
                skipped += layout.skipped(tables)
            merged = tally.merge(old_counts, new.partitions, queued, counted)
            for q, record in merged.items():
                news[q]["origins"][counts_key(q)] = tally_bytes(record)
            moved += self._write_partitions(new, pointer, news, merged)
        self.say(
            f"moved {moved} table entries" + (f" ({skipped} unread keys left)" if skipped else "")
        )

    def _write_partitions(
        self,
        new: Settings,
        pointer: Pointer,
        news: dict[int, dict[str, dict[bytes, bytes]]],
        merged: dict[int, PartitionCounts],
    ) -> int:
        assert pointer.next is not None
        written = 0
        manifests = []
        for q, tables in news.items():
            for table, rows in tables.items():
                name = topics.changelog_name(new, table)
                for key, value in rows.items():
                    self.broker.send(name, q, key, value)
                written += len(rows)
            manifests.append(
                (
                    manifest.manifest_key(pointer.next.number, q),
                    manifest.encode(manifest.of_tables(pointer.next.number, q, tables)),
                )
            )
            record = merged.get(q)
            if record is None:
                continue
            for crawl_id, counts in record.crawls.items():
                if counts.admitted is not None:
                    value = str(counts.admitted).encode()
                    self.broker.send(
                        topics.topic_name(new, "budget"), 0, budget_key(crawl_id, q), value
                    )
            key = message_key(q, new.partitions)
            self.broker.send(topics.topic_name(new, "counts"), q, key, tally_bytes(record))
        self.broker.flush()
        generation.write(self.settings, manifests)
        return written

    def _verified(self, old: Settings, new: Settings, pointer: Pointer) -> None:
        assert pointer.next is not None
        number = pointer.next.number
        found = generation.latest(generation.read_records(self.settings))
        step = math.gcd(old.partitions, new.partitions)
        for part in range(step):  # as the tables step: one class in memory at a time
            news = [q for q in range(new.partitions) if q % step == part]
            read = {
                t: self.broker.states(topics.changelog_name(new, t), news) for t in layout.TABLES
            }
            for q in news:
                self._check(number, q, {t: read[t].pop(q) for t in layout.TABLES}, found)

    def _check(
        self, number: int, q: int, tables: dict[str, dict[bytes, bytes]], found: dict[bytes, bytes]
    ) -> None:
        raw = found.get(manifest.manifest_key(number, q))
        if raw is None:
            raise CrawlError(f"no manifest for partition {q}: run the reshard again")
        lines = manifest.differences(manifest.decode(raw), manifest.of_tables(number, q, tables))
        if lines:
            raise CrawlError(f"partition {q} does not match its manifest: {'; '.join(lines)}")

    def _copy_tail(
        self, old: Settings, new: Settings, *, copy: bool = True
    ) -> tuple[dict[bytes, bytes], dict[int, dict[str, int]], int]:
        """Copy the events of the old inputs the workers did not commit to the new inputs, in
        the order ``tail.plan`` gives, each once (a copy carries its old name in a header).

        Returns old -> new event names, the new partitions' counted offsets per input, and
        the events copied now (``copy=False``: none, only what earlier copies did)."""
        group = topics.app_id(old)
        events: dict[bytes, bytes] = {}
        counted: dict[int, dict[str, int]] = {}
        copied = 0
        for short in INPUTS:
            old_t, new_t = topics.topic_name(old, short), topics.topic_name(new, short)
            done: dict[bytes, tuple[int, int]] = {}
            copies = self.broker.read_all(new_t, dict.fromkeys(range(new.partitions)))
            for q, records in copies.items():
                for r in records:
                    if r.origin is not None:
                        done[r.origin] = (q, r.offset)
            committed = self.broker.committed(group, old_t, old.partitions)
            tails = self.broker.read_all(
                old_t, {p: committed.get(p) for p in range(old.partitions)}
            )
            events_of = {p: [(r.offset, r.key, r.value) for r in rs] for p, rs in tails.items()}
            split = frontier_pieces if short == "frontier" else None
            limit = partial(self._limit, old, short)
            planned = tail.plan(old_t, events_of, limit, new.partitions, split)
            for q, items in planned.items():
                for item in items:
                    if item.name in done or not copy:
                        continue
                    delivered = partial(_note, done, item.name, q)
                    self.broker.send(new_t, q, item.key, item.value, item.name, delivered)
                    copied += 1
            self.broker.flush()
            for q, items in planned.items():
                at = tail.counted_up_to(items, done)
                if at >= 0:
                    counted.setdefault(q, {})[short] = at
            events |= {name: f"{new_t}/{q}@{at}".encode() for name, (q, at) in done.items()}
        return events, counted, copied

    def _limit(self, old: Settings, short: str, partition: int) -> int:
        return self._counted(old, partition).get(short, -1)

    def _counted(self, old: Settings, partition: int) -> dict[str, int]:
        """The offsets up to which old ``partition`` counted its inputs' events (read once)."""
        if partition not in self._offsets:
            name = topics.changelog_name(old, "origins")
            raw = self.broker.state(name, partition).get(counts_key(partition))
            self._offsets[partition] = {} if raw is None else decode_counts(raw).offsets
        return self._offsets[partition]

    def tombstone_manifests(self, number: int) -> None:
        prefix = f"manifest/{number}/".encode()
        keys = [
            k
            for k in generation.latest(generation.read_records(self.settings))
            if k.startswith(prefix)
        ]
        generation.write(self.settings, [(k, None) for k in keys])


def _note(done: dict[bytes, tuple[int, int]], name: bytes, q: int, offset: int) -> None:
    done[name] = (q, offset)


def tally_bytes(record: PartitionCounts) -> bytes:
    """A counts record as the frontier agent encodes it (JSON)."""
    return msgspec.json.encode(record)
