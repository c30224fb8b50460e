"""The cyclic garbage collector's thresholds for the worker, a long-running process.

CPython starts a young collection after 700 net allocations of container objects, a middle
one after 10 young ones and a full one after 10 middle ones. A saturated worker allocates fast
enough to run all three often, and each full one walks every tracked object of Faust, aiokafka
and the Cassandra driver while the event loop waits. Almost every object the crawl allocates is
freed by its reference count, so collecting less often finds the same garbage at a fraction of
the walks: with ``THRESHOLDS`` the same crawl runs a few young collections and no middle one
(the full collections left are Faust's own ``gc.collect()`` at a rebalance, which
``topology.worker.table_stores`` skips when it is not needed). Measured in docs/performance.md
("The garbage collector").
"""

from __future__ import annotations

import gc
from typing import Final

THRESHOLDS: Final = (20_000, 20, 20)


def tune_gc() -> None:
    """Collect cyclic garbage at ``THRESHOLDS`` instead of CPython's (700, 10, 10)."""
    gc.set_threshold(*THRESHOLDS)
