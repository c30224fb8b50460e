"""Only events the frontier agent applied may move its committed offsets.

faust-streaming 0.15's pure-Python stream iterator acknowledges an event it skips without
delivering it (``Stream._py_aiter``: flow control inactive, i.e. a rebalance under way, or an
event of an earlier generation), and an acknowledged offset is a committable one. (Its compiled
iterator, ``faust._cython.streams``, used where the extension is built, acknowledges nothing
it skips; the pure-Python one runs with ``NO_CYTHON`` set or without the extension.) Such an
event is an outcome or a URL batch nobody applied: committed, its URL would stay at its queue
head and be fetched again by the next owner (or, a batch, never be admitted). A delivered event is
``tracked`` (the stream marks it before yielding it); a skipped one is not. So the consumer
refuses to acknowledge an untracked event of the agent's topics: its offset holds the commit
back, and the event is read again after the rebalance (the consumer seeks to the committed
offset), this time applied.

Faust's other offset bookkeeping (``Consumer._new_offset``, ``_add_gap``) counts the first
event after a gap in the log as acknowledged once a later one is, and lets one unacknowledged
offset at the head of a partition through; neither can pass an unapplied event here, because
``topology.worker.batching.run_batches`` acknowledges every event it gets, in offset order, once its
batch is durable (and the agent's topics have no gaps: not compacted, no transactions).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Any

from faust.types import TP

from streamcrawl.topology.worker.internals import replace_ack

log = logging.getLogger(__name__)


async def log_start_offset(consumer: Any, topic: str, partition: int) -> int:
    """The first offset the log of ``topic``/``partition`` still holds (``FrontierAgent``'s
    ``log_start``): where the consumer resumes (auto offset reset: earliest) when the group
    has no committed offset for it, or one below it. One ListOffsets round trip to the broker
    (Faust's ``Consumer.earliest_offsets``: aiokafka's ``beginning_offsets``)."""
    tp = TP(topic, partition)
    offsets = await consumer.earliest_offsets(tp)
    return int(offsets[tp])


def refuse_untracked_acks(consumer: Any, topics: Collection[str]) -> None:
    """Make ``consumer.ack`` refuse events of ``topics`` that no stream delivered (installed
    by ``internals.replace_ack``)."""
    ack: Callable[[Any], bool] = consumer.ack
    if getattr(ack, "refuses_untracked", False):
        return  # installed already (the agent restarted)

    def guarded(message: Any) -> bool:
        if message.topic in topics and not message.tracked:
            log.warning(
                "not acknowledging %s/%s@%s: skipped by the stream, never applied (read "
                "again after the rebalance)",
                message.topic,
                message.partition,
                message.offset,
                extra={"topic": message.topic, "partition": message.partition},
            )
            return False
        return ack(message)

    guarded.refuses_untracked = True  # type: ignore[attr-defined]
    replace_ack(consumer, guarded)


def untrack(consumer: Any, event: Any) -> None:
    """Stop ``consumer`` waiting for ``event``, which will never be acknowledged (the frontier
    refused it: read out of order, it is read again after the consumer's seek).

    Faust's rebalance and stop wait (``Consumer.wait_empty``) until every event a stream
    delivered and nobody acknowledged is acknowledged or garbage (``consumer.unacked``, a
    WeakSet), and its compiled stream iterator keeps the last event it yielded while it awaits
    the next one. Leaving the event out changes no offset: only acknowledged offsets are
    committed, so the commit still stops before it."""
    consumer.unacked.discard(event.message)
