"""The embedded wiring: every crawl stage in one process, state in RocksDB, output in files.

The loop only orchestrates: the scheduler says what may start, ``Stages`` does the I/O, the
frontier computes state changes, and one atomic write commits them with the output offsets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import msgspec

from streamcrawl.agents.content.listings import plan_seeds
from streamcrawl.agents.errors import ConfigError
from streamcrawl.agents.frontier.frontier import Applied, Frontier
from streamcrawl.agents.frontier.records import admitted_count, decode_origin, load_origin, seen_key
from streamcrawl.agents.frontier.scheduler import Scheduler
from streamcrawl.agents.frontier.settle import settle
from streamcrawl.agents.frontier.store import META, ORIGINS, Changes, RocksStore, Store
from streamcrawl.agents.net.core import CrawlCore
from streamcrawl.agents.net.dispatch import Dispatcher, Ended
from streamcrawl.agents.net.fetch import Resolver
from streamcrawl.agents.net.guard import AddressGuard, IPNetwork, seed_addresses
from streamcrawl.agents.net.network import Network
from streamcrawl.agents.net.stages import Report, Stages
from streamcrawl.agents.plugins.registry import Registry
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.sinks.files import JsonlOutput
from streamcrawl.schemas.records import (
    CrawlPolicy,
    OriginState,
    Page,
    UrlStatus,
)
from streamcrawl.topology.embedded.offline import OfflineCopy

if TYPE_CHECKING:
    from streamcrawl.agents.sinks.warc.files import WarcFiles

log = logging.getLogger(__name__)

OFFSETS_KEY = META + b"offsets"
POLICY_KEY = META + b"policy"
STOP_GRACE = 5.0  # seconds in-flight requests get to finish after Ctrl-C


@dataclass
class Summary:
    """What a crawl did; printed at the end (``--json``: as one object)."""

    crawl_id: str
    states: Counter[str] = field(default_factory=Counter)
    pages: int = 0
    bytes: int = 0
    retries: int = 0
    duplicates: int = 0
    queued: int = 0  # admitted URLs still waiting for a terminal state
    # Continuous crawling: revisits fetched, and what they found (Page.change).
    revisits: int = 0
    changes: Counter[str] = field(default_factory=Counter)
    elapsed: float = 0.0
    interrupted: bool = False
    out_dir: str = ""

    def as_dict(self) -> dict[str, object]:
        return {
            "crawl_id": self.crawl_id,
            "pages": self.pages,
            "states": dict(sorted(self.states.items())),
            "bytes": self.bytes,
            "retries": self.retries,
            "duplicates_filtered": self.duplicates,
            "queued": self.queued,
            "revisits": self.revisits,
            "changes": dict(sorted(self.changes.items())),
            "elapsed_s": round(self.elapsed, 3),
            "pages_per_s": round(self.pages / self.elapsed, 2) if self.elapsed > 0 else 0.0,
            "interrupted": self.interrupted,
            "out_dir": self.out_dir,
        }


class EmbeddedCrawl:
    """One crawl in one process; resumable from ``state_dir`` after any stop, even ``kill -9``.

    ``run`` crawls to the end; ``start``, ``step`` and ``close`` are its loop in the caller's
    hands (``streamcrawl.crawl`` yields the pages each ``step`` committed).
    """

    def __init__(
        self,
        policy: CrawlPolicy,
        *,
        out_dir: Path,
        state_dir: Path,
        concurrency: int = 64,
        store: Store | None = None,
        allow_networks: Sequence[IPNetwork] = (),
        resolver: Resolver | None = None,
        warc: Path | None = None,
        warc_max_size: int = 1 << 30,
        core: CrawlCore | None = None,
        plugins: Registry | None = None,
        save_to: Path | None = None,
    ) -> None:
        """``core``: the factory of the stages, over the process's network (proxy, credentials,
        SSRF guard); without it, one with the guard of ``allow_networks`` (non-public networks
        fetches may reach) and ``resolver`` (aiohttp's DNS resolver instead of the system's:
        tests), no proxy and no credentials. Either way the addresses the seeds' hosts resolve
        to at start are allowed too, so a local crawl works, but a link to any other non-public
        address is refused (``blocked``). ``warc``: the directory of the WARC archive of a
        crawl with ``policy.warc`` (docs/warc.md). ``plugins``: where the crawl's plugins are found
        (default: the installed entry points; docs/plugins.md). ``save_to``: the directory of an
        offline copy of the pages and assets (``topology/embedded/offline.py``)."""
        if policy.warc and warc is None:
            raise ConfigError("a crawl that archives (policy.warc) needs a WARC directory")
        self.policy = policy
        if core is None:
            core = CrawlCore(Network(AddressGuard(allow_networks), resolver=resolver))
        self.core = core
        self.rules = CrawlRules.from_policy(policy, plugins)
        self.out_dir = out_dir
        self.concurrency = concurrency
        self.store = store if store is not None else RocksStore(state_dir / policy.crawl_id)
        offsets = self.store.get(OFFSETS_KEY)
        committed = tuple(int(x) for x in offsets.split(b",")) if offsets else (0, 0)
        self.sink = JsonlOutput(out_dir, (committed[0], committed[1]))
        self.frontier = Frontier()
        self.scheduler = Scheduler(self.store, self._rules_for)
        self.summary = Summary(crawl_id=policy.crawl_id, out_dir=str(out_dir))
        self._stopping = asyncio.Event()
        self._dispatcher: Dispatcher[Report] = Dispatcher(concurrency)
        self._progress: ProgressHook | None = None
        self.warc_dir = warc
        self.warc_max_size = warc_max_size
        self.warc: WarcFiles | None = None
        self._stages: Stages | None = None
        self.copy = OfflineCopy(save_to, self._canonical) if save_to is not None else None
        self._committed: list[Page] = []  # pages committed since the last ``step``
        self._started = time.monotonic()
        self._complete = False  # every URL has its terminal state
        self._closed = False

    def _canonical(self, href: str, base: str) -> str | None:
        canon = self.rules.canonicalizer.try_canonicalize(href, base)
        return canon.url if canon is not None else None

    def _rules_for(self, crawl_id: str) -> CrawlRules | None:
        return self.rules if crawl_id == self.policy.crawl_id else None

    def stop(self) -> None:
        """Stop dispatching; in-flight requests get ``STOP_GRACE`` seconds to finish."""
        self._stopping.set()
        self._dispatcher.wake()

    def _seen(self, crawl_id: str, url: str) -> bool:
        return self.store.get(seen_key(crawl_id, url)) is not None

    def _restore(self) -> None:
        """Index every origin with queued URLs (a resumed crawl) and admit the seeds."""
        for _, raw in self.store.scan(ORIGINS):
            state = decode_origin(raw)
            if state.head < state.tail or state.lanes:
                self.scheduler.track(state)
                self.summary.queued += state.tail - state.head
        ch = Changes(self.store)
        statuses = []
        for batch in plan_seeds(self.rules):
            admission = self.frontier.admit(ch, batch, self.rules, budget=self._budget(ch))
            statuses.extend(admission.statuses)
            self.summary.queued += len(admission.queued)
            if admission.state is not None:
                self.scheduler.track(admission.state)
        self._commit(ch, [(None, statuses)])
        self.store.write({POLICY_KEY: msgspec.json.encode(self.policy)})

    def _budget(self, ch: Changes) -> int | None:
        if self.policy.max_pages is None:
            return None
        return max(0, self.policy.max_pages - admitted_count(ch, self.policy.crawl_id))

    def _commit(self, ch: Changes, applied: list[tuple[Report | None, list[UrlStatus]]]) -> None:
        """Write the output of ``applied`` (each report, or none, with the statuses it ended),
        then commit ``ch`` with the output's offsets: one atomic state write."""
        captures = [r.capture for r, _ in applied if r is not None and r.capture is not None]
        if captures and self.warc is not None:
            # Archived before the state commit: a crash in between fetches the URL again on
            # resume (a second capture, in a new file), never loses the first.
            self.warc.write(captures)
        if self.copy is not None:  # saved before the commit, like the archive
            for report, _ in applied:
                if report is not None and report.body is not None:
                    self.copy.save(report.body)
        output = []
        for report, statuses in applied:
            page = report.page if report is not None else None
            if page is not None and page.body is not None and not self.policy.store_bodies:
                page = msgspec.structs.replace(page, body=None)  # no page stream: files only
            output.append((page, statuses))
        self.sink.write(output)
        pages_off, urls_off = self.sink.offsets()
        ch.commit({OFFSETS_KEY: f"{pages_off},{urls_off}".encode()})
        for page, statuses in output:
            self._count(page, statuses)
            if page is not None:
                self._committed.append(page)

    def _count(self, page: Page | None, statuses: list[UrlStatus]) -> None:
        for status in statuses:
            self.summary.states[status.state] += 1
            if status.previous is not None:  # a revisit moved the URL from that state
                self.summary.states[status.previous] -= 1
        if page is not None:
            self.summary.pages += 1
            self.summary.bytes += page.body_bytes
            if page.change is not None:
                self.summary.changes[page.change] += 1

    def _apply(self, reports: list[Report]) -> None:
        """Admit the links the reports found, apply their outcomes, write their output, commit:
        one transaction for the reports of requests that ended together, in the order they
        ended (each line, state and count as if each had its own transaction; one state
        write and one flush of each output file instead of one per report)."""
        ch = Changes(self.store)
        applied: list[tuple[Report, list[UrlStatus], list[OriginState], Applied]] = []
        for report in reports:
            applied.append(self._apply_one(ch, report))
        self._commit(ch, [(report, statuses) for report, statuses, _, _ in applied])
        for report, _, touched, outcome in applied:
            for state in touched:
                if state.origin != report.outcome.origin:
                    self.scheduler.track(load_origin(self.store, state.origin))
            self.scheduler.done(report.outcome.origin, report.outcome.seq, outcome.state)

    def _apply_one(
        self, ch: Changes, report: Report
    ) -> tuple[Report, list[UrlStatus], list[OriginState], Applied]:
        """Settle one report in ``ch`` (``agents.frontier.settle``): the statuses it ends, the
        origins whose queues it added to, what the frontier did with the outcome."""
        # The stages canonicalized every URL with these rules and keyed each batch by its
        # origin: nothing to canonicalize again; this store holds every origin.
        effects = settle(
            self.frontier,
            ch,
            self.rules,
            report.outcome,
            report.batches,
            budget=lambda _crawl_id: self._budget(ch),
            canonical=True,
        )
        applied = effects.applied
        assert applied is not None
        statuses = list(effects.refused)
        self.summary.duplicates += effects.duplicates
        self.summary.queued += effects.admitted
        if not applied.replayed:  # committed with the state: a repeat would be a second line
            statuses.extend(applied.statuses)
            if not applied.revisit:
                self.summary.queued -= len(applied.statuses)
        if applied.retried:
            self.summary.retries += 1
        if applied.revisit and not applied.retried:
            self.summary.revisits += 1
        return report, statuses, effects.touched, applied

    async def run(self, progress: ProgressHook | None = None) -> Summary:
        """Crawl until every queued URL has a terminal state, or until ``stop()``."""
        try:
            await self.start(progress)
            while await self.step() is not None:
                pass
        finally:
            await self.close()
        return self.summary

    async def start(self, progress: ProgressHook | None = None) -> None:
        """Recover the WARC directory, index the queued origins, admit the seeds; then
        ``step`` until it returns None, and ``close`` (also after an error or a cancel)."""
        self._progress = progress
        self._started = time.monotonic()
        if self.warc_dir is not None:
            # Imported only for a crawl that archives (the WARC writer's modules load isal
            # and warcio).
            from streamcrawl.agents.sinks.warc.files import WarcFiles, recover

            # A crash left an open file: close it at its last whole record. This run writes
            # new files (a new serial), never appends to an old one.
            for path in recover(self.warc_dir):
                log.warning("closed the WARC file a stopped crawl left open: %s", path)
            self.warc = WarcFiles(
                self.warc_dir,
                max_size=self.warc_max_size,
                info={"isPartOf": self.policy.crawl_id},
            )
        self._restore()
        seeds = await seed_addresses((*self.policy.seeds, *self.policy.sitemap_seeds))
        if seeds:
            log.info("SSRF guard allows the seeds' addresses %s", ", ".join(seeds))
        render = self.policy.render != "never"
        # The scheduler owns every origin here: it lends a render's subrequest to another
        # origin that origin's slot (docs/rendering.md, "The network path").
        self._stages = self.core.stages(
            self._seen, allow=seeds, render=render, owner=self.scheduler
        )

    async def step(self) -> list[Page] | None:
        """One turn of the loop: start what the scheduler lets start, sleep until a request
        ends (or ``stop()``, or the next ready time), commit the reports of those that ended.

        Returns the page records this turn committed, in commit order, each as written to
        pages.jsonl and with its state already written ([] if none); None once the crawl is
        complete (nothing queued, nothing in flight) or ``stop()`` was called.
        """
        assert self._stages is not None, "start() first"
        if self._stopping.is_set():
            return None
        room = self._dispatcher.room()
        for d in self.scheduler.take(time.time(), room) if room > 0 else []:
            self._dispatcher.start(d, self._stages.run(d))
        if not self._dispatcher and self.scheduler.next_ready_at() is None:
            self._complete = True  # nothing queued, nothing in flight
            return None
        await self._wait()
        self._report_progress()
        committed, self._committed = self._committed, []
        return committed

    async def close(self) -> Summary:
        """Stop dispatching; give the requests in flight ``STOP_GRACE`` seconds, commit what
        they fetched (their pages are in pages.jsonl, not returned by ``step``), close the
        stages, the WARC file, the output files and the store. The summary says
        ``interrupted`` unless ``step`` found the crawl complete. Safe to call again.

        Called while its task is being cancelled (``run`` or ``step`` interrupted), it still
        gives the grace: only a second cancel cuts it short. An abandoned request's URL is
        still at its queue head: fetched on resume.
        """
        if self._closed:
            return self.summary
        self._closed = True
        self.summary.interrupted = not self._complete  # stopped, or closed before its end
        self._stopping.set()
        try:
            if self._dispatcher:
                ended = await self._dispatcher.finish(self._dispatcher.in_flight(), STOP_GRACE)
                self._finish([e for e in ended if not e.abandoned])
        finally:
            if self._stages is not None:
                await self._stages.close()
                if self._stages.renderer is not None:
                    await self.core.close()  # the browser, started for this crawl
            self.summary.elapsed = time.monotonic() - self._started
            if self.warc is not None:
                self.warc.close()
            if self.copy is not None:
                self.copy.finish()
            self.sink.close()
            self.store.close()
        return self.summary

    async def _wait(self) -> None:
        """Sleep until a request ends, ``stop()`` or the next ready time; apply the reports of
        the requests that ended, in the order they ended."""
        ready_at = self.scheduler.next_ready_at()
        timeout = None if ready_at is None else max(0.0, ready_at - time.time())
        if self._dispatcher and self._dispatcher.room() <= 0:
            timeout = None  # the next dispatch waits for a request to end
        self._finish(await self._dispatcher.wait(timeout))

    def _finish(self, ended: Sequence[Ended[Report]]) -> None:
        # ``Stages.run`` never raises: a stage that failed is an ``internal`` retry outcome. A
        # task cancelled from outside (the event loop shutting down) reports nothing: its URL
        # is still at its queue head.
        reports = [e.task.result() for e in ended if not e.task.cancelled()]
        if reports:
            self._apply(reports)

    def _report_progress(self) -> None:
        if self._progress is not None:
            self._progress(self.summary, len(self._dispatcher), len(self.scheduler))


class ProgressHook(Protocol):
    """Told after each step: (summary, requests in flight, origins with work)."""

    def __call__(self, summary: Summary, in_flight: int, origins: int) -> None: ...


def install_signal_handlers(crawl: EmbeddedCrawl) -> None:
    """SIGINT/SIGTERM stop dispatching; a second SIGINT is not caught specially (asyncio)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, crawl.stop)
