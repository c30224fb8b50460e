"""A fault for the worker started with this folder on ``PYTHONPATH``: its first table
recovery reads nothing of one changelog partition.

Once Faust's recovery has sought its active changelog partitions to where it reads from, the
first of them with records left whose topic ends with
``-<STREAMCRAWL_FAULT_STUCK_TABLE>-changelog`` is moved to its end, where every fetch comes back
empty: the recovery waits for records that never come, as in the stall once seen in the kill -9
loops (topology/worker/recovery_watch.py). A later seek (the worker's own) reads it, unless
``STREAMCRAWL_FAULT_STUCK_ALWAYS`` is set: then every seek of it lands at its end too.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from faust.tables.recovery import Recovery
from faust.transport.drivers import aiokafka as driver
from faust.types import TP

log = logging.getLogger("streamcrawl.tests.fault")
seek_offsets = Recovery._seek_offsets
seek_wait = driver.Consumer.seek_wait
stuck: dict[TP, int] = {}  # the partition moved -> its end


async def stuck_seek_offsets(self: Any, consumer: Any, tps: Any, offsets: Any, title: str) -> None:
    await seek_offsets(self, consumer, tps, offsets, title)
    if stuck or title != "active":
        return
    suffix = f"-{os.environ['STREAMCRAWL_FAULT_STUCK_TABLE']}-changelog"
    for tp in sorted(tps):
        highwater = self.active_highwaters.get(tp)
        if tp.topic.endswith(suffix) and highwater is not None and highwater > offsets[tp]:
            stuck[tp] = highwater + 1
            log.warning("fault: recovery of %s[%d] moved to its end", tp.topic, tp.partition)
            await seek_wait(consumer, {tp: stuck[tp]})
            return


async def always_stuck_seek_wait(self: Any, partitions: Mapping[TP, int]) -> None:
    moved = {tp: stuck.get(tp, offset) for tp, offset in partitions.items()}
    if moved != dict(partitions):
        log.warning("fault: a seek of a stuck partition moved to its end again")
    await seek_wait(self, moved)


Recovery._seek_offsets = stuck_seek_offsets  # type: ignore[method-assign]
if os.environ.get("STREAMCRAWL_FAULT_STUCK_ALWAYS"):
    driver.Consumer.seek_wait = always_stuck_seek_wait  # type: ignore[method-assign]
