"""A rendered page's subrequests to other origins than its own, in their owner's slots.

A subrequest of a page on origin A to origin B is made as polite as a fetch of B by the crawl,
in a loan of B's slot from B's owner (a ``Lender``): in the embedded crawl its one scheduler,
which owns every origin's slot (``LocalLender``); in the Kafka wiring B's fetch worker, asked
over Kafka by the render worker (``agents.stream.slot_client.RemoteSlots``). Either way
(docs/rendering.md, "The network path"):

- B's robots.txt is obeyed: the copy the crawl holds for B if it is fresh, else one fetched
  once per crawl here (through the same session, SSRF guard and request options, in B's slot),
  and kept; a file B does not have allows everything (``agents/robots/rules.py``);
- the request waits for a loan of B's slot from its owner (``Lender.borrow``): no more than the
  crawl's per-origin concurrency, each start the crawl's delay (or B's Crawl-delay) after the
  previous request to B was on the wire, whether a dispatch of B or another loan; B's next
  dispatch waits that delay after the loan's request (``Lender.returned``);
- the request carries what a fetch of B carries (B's headers, stored cookies and credential,
  never A's; over Kafka no stored cookie: B's jar is in its owner's table); a redirect is
  followed within B only, as robots.txt allows;
- a slot that is not lent within ``wait_limit`` seconds (the render's settle timeout) is a
  refusal: ``slot_timeout``.

A wiring with no lender has no ``OtherOrigins``: there such a subrequest is refused
(``cross_origin``, ``agents/net/subrequests.py``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Final, Protocol

import aiohttp

from streamcrawl.agents.errors import ErrorClass, FetchError
from streamcrawl.agents.frontier.scheduler import Dispatch, Loan
from streamcrawl.agents.net.capture import Recorder
from streamcrawl.agents.net.fetch import SentAt, fetch
from streamcrawl.agents.net.network import Network
from streamcrawl.agents.net.request import RequestContext
from streamcrawl.agents.net.robots_fetch import fetch_robots
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.render.page import Served
from streamcrawl.agents.robots.rules import RobotsRules
from streamcrawl.schemas.records import Cookie, CrawlPolicy, OriginState

SLOT_TIMEOUT: Final = "slot_timeout"


class SlotOwner(Protocol):
    """The owner of every origin's politeness slot (``agents.frontier.scheduler.Scheduler``)."""

    def claim(self, origin: str) -> None: ...

    def unclaim(self, origin: str) -> None: ...

    def lend(
        self, origin: str, now: float, delay: float, limit: int, not_before: float = 0.0
    ) -> Loan | float: ...

    def fetched(self, origin: str, seq: int, started_at: float) -> None: ...

    def returned(self, loan: Loan, sent_at: float, delay: float) -> None: ...

    def origin_state(self, origin: str) -> OriginState: ...


class Lender(Protocol):
    """Who lends a subrequest an origin's slot: the owner itself in the embedded crawl
    (``LocalLender``), the owner's worker over Kafka for a render worker
    (``agents.stream.slot_client.RemoteSlots``). ``lends_own``: the page's own origin's slot
    too (the wiring owns it; a Kafka render runs inside its page's dispatch instead)."""

    lends_own: bool

    async def borrow(
        self, origin: str, rules: CrawlRules, delay: float, deadline: float
    ) -> Loan | None: ...

    def returned(self, loan: Loan, sent_at: float, delay: float) -> None: ...

    def fetched(self, origin: str, seq: int, started_at: float) -> None: ...

    def origin_state(self, origin: str) -> OriginState: ...


class LocalLender:
    """The ``Lender`` of a wiring that owns every slot: its scheduler, asked until it lends."""

    lends_own = True

    def __init__(self, owner: SlotOwner) -> None:
        self.owner = owner

    async def borrow(
        self, origin: str, rules: CrawlRules, delay: float, deadline: float
    ) -> Loan | None:
        """A loan of ``origin``'s slot, waited for until ``deadline`` (None: not lent)."""
        limit = rules.policy.per_origin_concurrency
        self.owner.claim(origin)
        try:
            while True:
                now = time.time()
                state = self.owner.origin_state(origin)
                not_before = max(state.next_fetch_at, state.backoff_until)
                got = self.owner.lend(origin, now, delay, limit, not_before)
                if isinstance(got, Loan):
                    return got
                if got > deadline:
                    return None
                await asyncio.sleep(max(0.0, got - now))
        finally:
            self.owner.unclaim(origin)

    def returned(self, loan: Loan, sent_at: float, delay: float) -> None:
        self.owner.returned(loan, sent_at, delay)

    def fetched(self, origin: str, seq: int, started_at: float) -> None:
        self.owner.fetched(origin, seq, started_at)

    def origin_state(self, origin: str) -> OriginState:
        return self.owner.origin_state(origin)


class OtherOrigins:
    """Fetches rendered pages' subrequests to other origins, in their owner's slots; one per
    crawl process (its robots.txt copies are kept for the life of the process's stages)."""

    def __init__(
        self,
        owner: Lender,
        session: aiohttp.ClientSession,
        network: Network,
        wait_limit: float,
    ) -> None:
        self.owner = owner
        self.session = session
        self.network = network
        self.wait_limit = wait_limit
        self._robots: dict[tuple[str, str], RobotsRules] = {}  # (crawl, origin) -> rules
        self._fetching: dict[tuple[str, str], asyncio.Lock] = {}

    async def fetch(
        self,
        url: str,
        origin: str,
        rules: CrawlRules,
        policy: CrawlPolicy,
        recorder: Recorder | None,
    ) -> Served | str:
        """``url`` (of ``origin``) fetched under ``policy`` (the subrequests' policy of the
        crawl of ``rules``), or why not: ``robots``, ``slot_timeout``, ``missing_credential``
        or the fetch's error class."""
        deadline = time.time() + self.wait_limit
        found = await self.robots(origin, rules, deadline)
        if found is None:
            return SLOT_TIMEOUT
        robots, spare = found
        if not robots.allowed(url, policy.user_agent):
            return self._unused(spare, rules, robots, "robots")
        request = self.request(origin, rules)
        if isinstance(request, str):
            return self._unused(spare, rules, robots, str(ErrorClass.MISSING_CREDENTIAL))
        if recorder is not None and recorder.redact:  # B's credential is a secret too
            recorder.redact = recorder.redact | request.secret_headers()
        answer, _sent = await self.send(
            url, origin, rules, policy, recorder, request, robots, deadline, spare
        )
        return answer

    async def send(
        self,
        url: str,
        origin: str,
        rules: CrawlRules,
        policy: CrawlPolicy,
        recorder: Recorder | None,
        request: RequestContext,
        robots: RobotsRules,
        deadline: float | None = None,
        loan: Loan | None = None,
    ) -> tuple[Served | str, float | None]:
        """``url`` fetched with ``request`` in a loan of ``origin``'s slot (``loan``, else one
        borrowed now), its redirects within ``origin`` as ``robots`` allows; and when it was
        on the wire (None: it was not sent). No loan by ``deadline`` (default: ``wait_limit``
        from now), no request: ``slot_timeout``. The page's own origin's subrequests are sent
        here too: the owner lends its slot to them as to any other (``Scheduler.fetched``
        freed it when the page's fetch ended)."""
        delay = rules.delay_for(robots)
        if deadline is None:
            deadline = time.time() + self.wait_limit
        if loan is None:
            loan = await self._borrow(origin, rules, delay, deadline)
        if loan is None:
            return SLOT_TIMEOUT, None
        sent: float | None = None
        try:
            result = await fetch(
                self.session,
                url,
                policy,
                hop_check=lambda target: _within(rules, origin, robots, policy, target),
                hop_delay=delay,
                recorder=recorder,
                request=request,
            )
            sent = result.sent_at
        except FetchError as exc:
            sent = time.time()
            return str(exc.error_class), sent
        finally:  # a request cut short may have been sent: counted as sent when it ended
            self.owner.returned(loan, sent if sent is not None else time.time(), delay)
        if result.stopped is not None:
            return result.stopped, sent
        return Served(result.status, result.headers, result.body), sent

    def _unused(self, loan: Loan | None, rules: CrawlRules, robots: RobotsRules, why: str) -> str:
        """Give back ``loan`` (if any) unused, as sent now (its owner held the slot for it)."""
        if loan is not None:
            self.owner.returned(loan, time.time(), rules.delay_for(robots))
        return why

    def request(self, origin: str, rules: CrawlRules) -> RequestContext | str:
        """What a request to ``origin`` carries in the crawl of ``rules``: its headers, its
        stored cookies, its credential (a string: the credential this process lacks)."""
        return self.network.request(self._dispatch(origin, rules))

    def _dispatch(self, origin: str, rules: CrawlRules) -> Dispatch:
        jar: tuple[Cookie, ...] = ()
        if rules.requests.cookies:
            jar = self.owner.origin_state(origin).jars.get(rules.policy.crawl_id, ())
        return Dispatch("page", origin, 0, None, rules, cookies=jar)

    async def robots(
        self, origin: str, rules: CrawlRules, deadline: float
    ) -> tuple[RobotsRules, Loan | None] | None:
        """``origin``'s robots.txt rules for the crawl of ``rules``: the crawl's fresh copy,
        or the one kept here, or fetched now in the origin's slot (None: no slot before
        ``deadline``); and a loan of the slot borrowed for it but not used, its owner's copy
        having come with it (a Kafka grant carries it), for the caller to use or return."""
        if not rules.policy.obey_robots:
            return RobotsRules.allow_everything(), None
        key = (rules.policy.crawl_id, origin)
        lock = self._fetching.setdefault(key, asyncio.Lock())
        async with lock:  # one fetch of a file at a time; the others read what it got
            known = self._known(origin, rules, key)
            if known is not None:
                return known, None
            state = self.owner.origin_state(origin)
            loan = await self._borrow(origin, rules, rules.delay(state), deadline)
            if loan is None:
                return None
            known = self._known(origin, rules, key)  # the crawl may have fetched it meanwhile
            if known is not None:
                return known, loan
            found = await self._fetch_robots(origin, rules, loan, rules.delay(state))
            self._robots[key] = found
            return found, None

    def _known(self, origin: str, rules: CrawlRules, key: tuple[str, str]) -> RobotsRules | None:
        state = self.owner.origin_state(origin)
        if not rules.robots_expired(state, time.time()):
            return rules.robots(state)
        return self._robots.get(key)

    async def _fetch_robots(
        self, origin: str, rules: CrawlRules, loan: Loan, delay: float
    ) -> RobotsRules:
        """``origin``'s robots.txt, fetched as the crawl's robots dispatch fetches it (with
        the origin's credential if this process has it), in ``loan``."""
        request = self.request(origin, rules)
        if isinstance(request, str):
            request = self.network.request(self._dispatch(origin, rules), credential=False)
            assert not isinstance(request, str)
        sent = SentAt()
        try:
            status, body = await fetch_robots(
                self.session, origin, rules.policy, sent, request=request
            )
        finally:
            self.owner.returned(loan, sent.at or time.time(), delay)
        return RobotsRules.from_response(status, body)

    async def _borrow(
        self, origin: str, rules: CrawlRules, delay: float, deadline: float
    ) -> Loan | None:
        """A loan of ``origin``'s slot, waited for until ``deadline`` (None: not lent)."""
        return await self.owner.borrow(origin, rules, delay, deadline)


def _within(
    rules: CrawlRules, origin: str, robots: RobotsRules, policy: CrawlPolicy, target: str
) -> str | None:
    """A redirect of a subrequest to ``origin`` is followed within it, as robots.txt allows."""
    canon = rules.canonicalizer.try_canonicalize(target)
    if canon is None:
        return "bad_url"
    if canon.origin != origin:
        return "cross_origin"
    if not robots.allowed(canon.url, policy.user_agent):
        return "robots"
    return None
