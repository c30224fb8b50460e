"""The events of the old inputs the workers did not commit, planned into the new inputs: pure.

Catch-up markers (no key) are left out: they mean something to the worker that sent them only.
Each other event goes to the partition its key (the origin) hashes to, as the producers send it.
Per new partition, the events their old partition had counted already (offset up to its counts'
``offsets``: a batch a killed worker applied in part) go first, so the new counts can say up to
where counting is done (``tally.py``); the order of an origin's events is kept, since an origin's
events come from one old partition and its counted events precede its others there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from streamcrawl.agents.stream.partitioner import key_hash

Event = tuple[int, bytes | None, bytes | None]  # offset, key, value


class Copy(NamedTuple):
    counted: bool
    name: bytes  # the event's old name, ``topic/partition@offset`` (the seen marks use it)
    key: bytes
    value: bytes | None


def plan(
    topic: str,
    tails: Mapping[int, Iterable[Event]],
    limit: Callable[[int], int],
    new_count: int,
) -> dict[int, list[Copy]]:
    """New partition -> the events of ``tails`` (old partition -> its uncommitted events, in
    offset order) to copy there, in order; ``limit(p)``: the last offset old partition ``p``
    counted (-1: none)."""
    found: dict[int, list[Copy]] = {}
    for p, events in tails.items():
        last = None
        for offset, key, value in events:
            if key is None:
                continue
            if last is None:
                last = limit(p)
            name = f"{topic}/{p}@{offset}".encode()
            found.setdefault(key_hash(key) % new_count, []).append(
                Copy(offset <= last, name, key, value)
            )
    for copies in found.values():
        copies.sort(key=lambda c: not c.counted)  # stable
    return found


def counted_up_to(copies: Iterable[Copy], copied: Mapping[bytes, tuple[int, int]]) -> int:
    """The new offset of the last counted event among ``copies`` (-1: none); ``copied``: old
    name -> (new partition, new offset) of the events copied."""
    return max((copied[c.name][1] for c in copies if c.counted and c.name in copied), default=-1)
