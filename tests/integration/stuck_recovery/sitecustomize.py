"""A fault for the worker started with this folder on ``PYTHONPATH``: its first table
recovery reads nothing of one changelog partition.

Once Faust's recovery has sought its active changelog partitions to where it reads from, the
first of them with records left whose topic ends with ``-<STREAMCRAWL_FAULT_STUCK_TABLE>-changelog``
is moved to its end, where every fetch comes back empty: the recovery waits for records that
never come, as in the stall once seen in the kill -9 loops (topology/worker/recovery_watch.py).
Only the first recovery: a later seek (the worker's own) reads it.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from faust.tables.recovery import Recovery

log = logging.getLogger("streamcrawl.tests.fault")
seek_offsets = Recovery._seek_offsets
done = False


async def stuck_seek_offsets(self: Any, consumer: Any, tps: Any, offsets: Any, title: str) -> None:
    global done
    await seek_offsets(self, consumer, tps, offsets, title)
    if done or title != "active":
        return
    suffix = f"-{os.environ['STREAMCRAWL_FAULT_STUCK_TABLE']}-changelog"
    for tp in sorted(tps):
        highwater = self.active_highwaters.get(tp)
        if tp.topic.endswith(suffix) and highwater is not None and highwater > offsets[tp]:
            done = True
            log.warning("fault: recovery of %s[%d] moved to its end", tp.topic, tp.partition)
            await consumer.seek_wait({tp: highwater + 1})
            return


Recovery._seek_offsets = stuck_seek_offsets  # type: ignore[method-assign]
