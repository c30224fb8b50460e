"""The cyclic garbage collector's thresholds for the worker, a long-running process.

CPython starts a young collection after 700 net allocations of container objects, a middle
one after 10 young ones and a full one after 10 middle ones. A saturated worker (one worker,
8 origins x 500 pages at delay 0) allocates fast enough to run 1,200 young, 110 middle and 12
full collections in a 25 s crawl; each full one walks every tracked object of Faust, aiokafka
and the Cassandra driver (80-125 ms), and together they took 1.5-2.2 s of the worker's
13-15 s of CPU. Almost every object the crawl allocates is freed by its reference count, so
collecting less often finds the same garbage at a fraction of the walks: with ``THRESHOLDS``
the same crawl ran 17 young collections and no middle one, 0.25-0.31 s in all (the full
collections left are Faust's own ``gc.collect()`` at a rebalance). Measured in
docs/architecture.md ("The garbage collector").
"""

from __future__ import annotations

import gc
from typing import Final

THRESHOLDS: Final = (20_000, 20, 20)


def tune_gc() -> None:
    """Collect cyclic garbage at ``THRESHOLDS`` instead of CPython's (700, 10, 10)."""
    gc.set_threshold(*THRESHOLDS)
