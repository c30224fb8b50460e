"""The model of ``bench/probes/heavy_tail_sim.py``: the web's origins and one worker's crawl of its
partitions, with the real ``Scheduler``, on a virtual clock.

The web: origin ``i`` is ``http://o<i>.example``; its partition is murmur2 of that key mod P
(``agents.stream.partitioner.key_hash``, what ``agents.stream.tables.partition_for`` and every
producer use); worker ``w`` of W owns partitions ``p % W == w``. Its size is a discrete Pareto:
P(size >= n) = n ** -ZIPF (ZIPF = 1: half the origins have one page, one in a thousand has 1,000
or more, about one in a million a million), at most MAX_PAGES; every page is queued at the
start (a crawl seeded with its sites' pages: no discovery). A share SLOW of the origins answers
SLOW_FACTOR times slower. A fetch takes a lognormal time (median LATENCY, sigma SIGMA), times
the origin's factor, at most the fetch timeout (30 s, ``CrawlPolicy.timeout``).

A worker is modelled on ``agents/stream/fetch_service.py``: the real ``Scheduler`` (delay 1 s,
one request per origin, ``CrawlPolicy``'s defaults; every origin with work in memory, which the
default ``max_origins_in_memory`` of 100,000 allows up to ~100,000 origins per worker) hands
out dispatches at each turn of the loop, up to ``concurrency`` (64) fetches in flight and
``max(4 x concurrency, 1024)`` unapplied (the worker's bound when docs/performance.md's numbers
were computed; 4,096 since); a fetch's report costs CPU_MS of the worker's one core
(the Kafka worker's CPU per page, docs/benchmarks.md: median run of the main row), queued
behind the others; its publication ends the task and frees the slot (``Scheduler.fetched``);
the frontier applies the outcome APPLY_S later (the frontier agent's batch window,
``topology/worker/batching.py``) and the scheduler gets the origin's new state (``done``). The
loop turns when a task ends, an outcome is applied, an origin becomes ready, or after 1 s.

Simulated for a window; the origins with pages left then are politeness-bound (the report says
whether the workers still had CPU and slots to spare), so each finishes after its remaining
pages x its mean cycle (max(delay, fetch + CPU), from the same distributions): ``extrapolate``.

Informs: what bench/probes/heavy_tail_sim.py informs (docs/performance.md, "Heavy tails,
simulated"); its command runs this model: ``python -m bench.probes.heavy_tail_sim``.
"""

from __future__ import annotations

import heapq
import math
import random
import statistics
from dataclasses import dataclass, field

import msgspec

from streamcrawl.agents.frontier.queue import SEGMENT, Segment
from streamcrawl.agents.frontier.scheduler import Scheduler
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.stream.partitioner import key_hash
from streamcrawl.schemas.records import CrawlPolicy, OriginState, QueueEntry

ZIPF = 1.0
MAX_PAGES = 5_000_000
SLOW, SLOW_FACTOR = 0.05, 10.0
LATENCY, SIGMA = 0.2, 0.8
CPU_MS = 2.4
APPLY_S = 0.2

CRAWL = "sim"
# (time, tie-break, kind, origin, seq, when its request started)
Event = tuple[float, int, int, str, int, float]


@dataclass(frozen=True, slots=True)
class Web:
    """Origins: sizes, slowness, murmur2 hashes (the partition is ``hash % P``)."""

    sizes: tuple[int, ...]
    slow: tuple[bool, ...]
    hashes: tuple[int, ...]


def origin_name(i: int) -> str:
    return f"http://o{i}.example"


def make_web(origins: int, seed: int, zipf: float = ZIPF, max_pages: int = MAX_PAGES) -> Web:
    rng = random.Random(f"web {seed}")
    sizes = tuple(
        min(max_pages, int((1.0 - rng.random()) ** (-1.0 / zipf))) for _ in range(origins)
    )
    slow = tuple(rng.random() < SLOW for _ in range(origins))
    hashes = tuple(key_hash(origin_name(i).encode()) for i in range(origins))
    return Web(sizes, slow, hashes)


def latency(rng: random.Random, slow: bool, timeout: float) -> float:
    return min(timeout, rng.lognormvariate(math.log(LATENCY), SIGMA) * (SLOW_FACTOR if slow else 1))


# -- one worker's crawl on the virtual clock -------------------------------------------------


class SegmentStore:
    """Sealed segments of identical entries, made on read (``queue.entry_at`` reads them)."""

    def __init__(self) -> None:
        self.entry = QueueEntry(crawl_id=CRAWL, url=origin_name(0) + "/", depth=1)
        self._raw: dict[int, bytes] = {}
        self._encode = msgspec.msgpack.Encoder().encode

    def get(self, key: bytes) -> bytes | None:
        number = int.from_bytes(key[-8:], "big")
        raw = self._raw.get(number)
        if raw is None:
            segment = Segment(first=number * SEGMENT, entries=(self.entry,) * SEGMENT)
            raw = self._raw[number] = self._encode(segment)
        return raw


@dataclass
class Partition:
    """One partition's time shares over the window (seconds) and its origins' remainders."""

    busy: float = 0.0  # a dispatch of it under way (its fetch, or its report's processing)
    idle: float = 0.0  # work queued, nothing in flight, its worker had a free slot
    idle_one: float = 0.0  # ...and all of it behind one origin
    queued: float = 0.0  # work queued, nothing in flight, its worker had no free slot
    none: float = 0.0  # nothing left to dispatch, nothing in flight
    pages: int = 0  # fetched in the window
    finished_at: float = 0.0  # its last page's outcome (extrapolated past the window)
    tail: float = 0.0  # seconds with work after the window (extrapolated)
    tail_idle: float = 0.0  # ...of which idle (expected)
    tail_idle_one: float = 0.0  # ...behind one origin
    peak_origins: int = 0  # origins with work (in the scheduler's memory) at the start


@dataclass
class Worker:
    partitions: list[int]
    pages: int = 0  # outcomes applied in the window
    total: int = 0  # pages of its origins
    dispatched: int = 0  # requests started in the window
    most_in_flight: int = 0  # most requests of one origin in flight at once
    cpu_busy: float = 0.0
    slot_seconds: float = 0.0  # integral of fetches in flight
    end_in_flight: int = 0
    end_active: int = 0  # origins with pages left at the end of the window
    end_demand: float = 0.0  # pages/s those origins could take politely
    end_slots: float = 0.0  # fetches in flight they would hold on average
    slow_slot_seconds: float = 0.0  # integral of fetches in flight to slow origins
    max_gap_violation: float = 0.0  # smallest (start gap - delay) seen, if negative
    per_minute: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Setup:
    partitions: int
    workers: int
    hours: float
    concurrency: int = 64
    delay: float = 1.0
    cpu_ms: float = CPU_MS
    apply_s: float = APPLY_S
    timeout: float = 30.0
    seed: int = 0


def mean_cycle(setup: Setup, slow: bool, samples: int = 20_000) -> tuple[float, float]:
    """An origin's mean cycle, max(delay, fetch + CPU), and mean slot time, fetch + CPU, when
    nothing else holds it (politeness-bound)."""
    rng = random.Random(f"cycle {setup.seed} {slow}")
    cpu = setup.cpu_ms / 1000
    held = [latency(rng, slow, setup.timeout) + cpu for _ in range(samples)]
    return statistics.fmean(max(setup.delay, h) for h in held), statistics.fmean(held)


def run_worker(web: Web, setup: Setup, w: int, parts: dict[int, Partition]) -> Worker:
    """Simulate worker ``w``; fills ``parts`` for its partitions."""
    P, W = setup.partitions, setup.workers
    mine = [i for i, h in enumerate(web.hashes) if (h % P) % W == w]
    worker = Worker(partitions=sorted({web.hashes[i] % P for i in mine}))
    for p in worker.partitions:
        parts[p] = Partition()
    rules = CrawlRules.from_policy(
        CrawlPolicy(crawl_id=CRAWL, obey_robots=False, delay=setup.delay)
    )
    store = SegmentStore()
    sched = Scheduler(store, lambda c: rules)  # type: ignore[arg-type]  # duck-typed store
    rng = random.Random(f"fetch {setup.seed} {w}")
    states: dict[str, OriginState] = {}
    index: dict[str, int] = {}
    started = dict.fromkeys(mine, 0)  # pages dispatched per origin
    requests = dict.fromkeys(mine, 0)  # requests in flight per origin (start to response)
    last_start: dict[int, float] = {}
    work = dict.fromkeys(worker.partitions, 0)  # origins with pages not yet dispatched
    flying = dict.fromkeys(worker.partitions, 0)
    grounded = set(worker.partitions)  # nothing in flight
    for i in mine:
        name, size = origin_name(i), web.sizes[i]
        st = OriginState(origin=name, tail=size, inline=[store.entry] * (size % SEGMENT))
        states[name], index[name] = st, i
        sched.track(st)
        work[web.hashes[i] % P] += 1
    for p in worker.partitions:
        parts[p].peak_origins = work[p]
    horizon = setup.hours * 3600.0
    cpu, delay = setup.cpu_ms / 1000, setup.delay
    cap = max(4 * setup.concurrency, 1024)
    events: list[Event] = []
    tick = 0
    END, PUBLISHED, APPLIED = 0, 1, 2
    fetching = 0
    slow_fetching = 0
    cpu_free = 0.0
    now = 0.0
    minute = [0]

    def account(until: float) -> None:
        """Time shares of every partition between ``now`` and ``until`` (state is constant)."""
        span = min(until, horizon) - now
        if span <= 0:
            return
        room = fetching < setup.concurrency and fetching + sched.settling < cap
        worker.slot_seconds += fetching * span
        worker.slow_slot_seconds += slow_fetching * span
        for p in grounded:  # the others are busy: counted at the end
            part = parts[p]
            if not work[p]:
                part.none += span
            elif room:
                part.idle += span
                if work[p] == 1:
                    part.idle_one += span
            else:
                part.queued += span

    while now < horizon:
        room = min(setup.concurrency - fetching, cap - sched.settling - fetching)
        if room > 0:
            for d in sched.take(now, room):
                i = index[d.origin]
                gap = now - last_start.get(i, -math.inf) - delay
                worker.max_gap_violation = min(worker.max_gap_violation, gap, 0.0)
                last_start[i] = now
                started[i] += 1
                requests[i] += 1
                worker.most_in_flight = max(worker.most_in_flight, requests[i])
                p = web.hashes[i] % P
                if started[i] == web.sizes[i]:
                    work[p] -= 1
                flying[p] += 1
                grounded.discard(p)
                fetching += 1
                slow_fetching += web.slow[i]
                tick += 1
                end = now + latency(rng, web.slow[i], setup.timeout)
                heapq.heappush(events, (end, tick, END, d.origin, d.seq, now))
        ready = sched.next_ready_at()
        wake = now + 1.0
        if ready is not None and ready > now and room > 0:
            wake = min(wake, ready)
        wake = min(wake, horizon)
        while events and events[0][0] <= wake:
            t, _, kind, name, seq, start = heapq.heappop(events)
            account(t)
            now = t
            i = index[name]
            if kind == END:  # the report is processed on the worker's one core, then published
                requests[i] -= 1
                cpu_free = max(cpu_free, t) + cpu
                worker.cpu_busy += cpu
                tick += 1
                heapq.heappush(events, (cpu_free, tick, PUBLISHED, name, seq, start))
                continue
            if kind == PUBLISHED:
                fetching -= 1
                slow_fetching -= web.slow[i]
                p = web.hashes[i] % P
                flying[p] -= 1
                if not flying[p]:
                    grounded.add(p)
                sched.fetched(name, seq, start)
                tick += 1
                heapq.heappush(events, (t + setup.apply_s, tick, APPLIED, name, seq, start))
                break  # the task ended: the loop turns
            st = states[name]  # APPLIED: what Frontier.apply does to the record
            st.head = seq + 1
            st.next_fetch_at = max(st.next_fetch_at, start + delay)
            if st.head >= st.tail:
                st.inline = []
            part = parts[web.hashes[i] % P]
            part.pages += 1
            part.finished_at = t
            worker.pages += 1
            while len(minute) <= int(t // 60):
                minute.append(0)
            minute[int(t // 60)] += 1
            sched.done(name, seq, st)
            break  # applied wakes the loop
        else:
            account(wake)
            now = wake
    worker.per_minute = minute
    for p in worker.partitions:
        part = parts[p]
        part.busy = now - part.idle - part.queued - part.none
    worker.total = sum(web.sizes[i] for i in mine)
    worker.dispatched = sum(started.values())
    worker.end_in_flight = fetching
    cycles = {s: mean_cycle(setup, s) for s in (False, True)}
    tails: dict[int, list[tuple[float, float]]] = {p: [] for p in worker.partitions}
    for i in mine:
        p, left = web.hashes[i] % P, web.sizes[i] - started[i]
        if left:
            cycle, held = cycles[web.slow[i]]
            tails[p].append((horizon + left * cycle, held / cycle))
            worker.end_active += 1
            worker.end_demand += 1 / cycle
            worker.end_slots += held / cycle
    for p, tail in tails.items():
        extrapolate(parts[p], horizon, tail)
    return worker


def extrapolate(part: Partition, horizon: float, tail: list[tuple[float, float]]) -> None:
    """The partition after the window, politeness-bound: each origin left, (its finishing
    time, its share of time in flight), runs alone; the partition idles when none of them has
    a request in flight (independently: the product of their idle shares)."""
    tail.sort()
    t = horizon
    for k, (end, _) in enumerate(tail):
        if end > t:
            idle = math.prod(1 - busy for _, busy in tail[k:])
            part.tail += end - t
            part.tail_idle += (end - t) * idle
            if k == len(tail) - 1:
                part.tail_idle_one += (end - t) * idle
            t = end
    if tail:
        part.finished_at = max(part.finished_at, t)
