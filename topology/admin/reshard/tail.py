"""The events of the old inputs the workers did not commit, planned into the new inputs: pure.

Catch-up markers (no key) are left out: they mean something to the worker that sent them only.
Each other event goes to the partition its key (the origin) hashes to, as the producers send it.
A ``frontier`` batch of links merged per partition (``agents.stream.links.by_partition``: the
URLs of several origins of one old partition, keyed by the first) is split by the new partition
of each URL's origin (``agents.stream.links.frontier_pieces``), each piece keyed by an origin
of its own: its URLs meet their origins' tables there, and the seen marks the event wrote are
renamed per partition to the piece there (``layout.renamed``), so the replay of a partly
applied event recognises its own marks wherever they moved. A piece is named
``<old name>#<new partition>``.
Per new partition, the events their old partition had counted already (offset up to its counts'
``offsets``: a batch a killed worker applied in part) go first, so the new counts can say up to
where counting is done (``tally.py``); the order of an origin's events is kept, since an origin's
events come from one old partition and its counted events precede its others there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

from streamcrawl.agents.stream.links import Piece
from streamcrawl.agents.stream.partitioner import key_hash

__all__ = ["Copy", "Piece", "counted_up_to", "piece_name", "plan"]

Event = tuple[int, bytes | None, bytes | None]  # offset, key, value
Split = Callable[[bytes, bytes | None, int], Sequence[Piece]]  # key, value, new count


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
    split: Split | None = None,
) -> dict[int, list[Copy]]:
    """New partition -> the events of ``tails`` (old partition -> its uncommitted events, in
    offset order) to copy there, in order; ``limit(p)``: the last offset old partition ``p``
    counted (-1: none); ``split``: an event's pieces at ``new_count`` partitions (``frontier``:
    ``frontier_pieces``), each copied to its key's partition."""
    found: dict[int, list[Copy]] = {}
    for p, events in tails.items():
        last = None
        for offset, key, value in events:
            if key is None:
                continue
            if last is None:
                last = limit(p)
            name = f"{topic}/{p}@{offset}".encode()
            pieces = split(key, value, new_count) if split is not None else ((key, value),)
            for k, v in pieces:
                q = key_hash(k) % new_count
                named = name if len(pieces) == 1 else piece_name(name, q)
                found.setdefault(q, []).append(Copy(offset <= last, named, k, v))
    for copies in found.values():
        copies.sort(key=lambda c: not c.counted)  # stable
    return found


def counted_up_to(copies: Iterable[Copy], copied: Mapping[bytes, tuple[int, int]]) -> int:
    """The new offset of the last counted event among ``copies`` (-1: none); ``copied``: old
    name -> (new partition, new offset) of the events copied."""
    return max((copied[c.name][1] for c in copies if c.counted and c.name in copied), default=-1)


def piece_name(name: bytes, partition: int) -> bytes:
    """The name of the piece of event ``name`` copied to new partition ``partition``."""
    return name + b"#" + str(partition).encode()
