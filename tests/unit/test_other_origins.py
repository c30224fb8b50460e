"""``OtherOrigins`` over a lender that, as a Kafka grant does, hands over its owner's copy of
the origin's robots.txt with the loan (agents/net/other_origins.py): the subrequest goes in
that loan, not in a second one a whole delay later (with a Crawl-delay past the render's settle
timeout, a second loan could never come in time)."""

from __future__ import annotations

import time

from streamcrawl.agents.frontier.scheduler import Loan
from streamcrawl.agents.net.fetch import make_session
from streamcrawl.agents.net.network import Network
from streamcrawl.agents.net.other_origins import OtherOrigins
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.schemas.records import CrawlPolicy, OriginState
from tests.httpserver import LOOPBACK_GUARD, RecordingServer, html

ROBOTS = "User-agent: *\nCrawl-delay: 30\nDisallow: /private\n"


class GrantingLender:
    """Lends at once; knows the origin's robots.txt only once it has lent (the grant's)."""

    lends_own = False

    def __init__(self) -> None:
        self.loans = 0
        self.returns: list[tuple[int, float, float]] = []  # token, sent_at, delay

    async def borrow(
        self, origin: str, rules: CrawlRules, delay: float, deadline: float
    ) -> Loan | None:
        self.loans += 1
        return Loan(origin, self.loans)

    def returned(self, loan: Loan, sent_at: float, delay: float) -> None:
        self.returns.append((loan.token, sent_at, delay))

    def fetched(self, origin: str, seq: int, started_at: float) -> None:
        raise AssertionError("not a lender of the page's own origin")

    def origin_state(self, origin: str) -> OriginState:
        if not self.loans:
            return OriginState(origin=origin)
        expires = time.time() + 3600
        return OriginState(
            origin=origin, robots_status=200, robots_body=ROBOTS, robots_expires=expires
        )


async def fetch(lender: GrantingLender, url: str, origin: str) -> object:
    policy = CrawlPolicy(crawl_id="c", seeds=("http://a.example/",))
    rules = CrawlRules.from_policy(policy)
    session = make_session(guard=LOOPBACK_GUARD)
    try:
        others = OtherOrigins(lender, session, Network(guard=LOOPBACK_GUARD), 5.0)
        return await others.fetch(url, origin, rules, policy, None)
    finally:
        await session.close()


async def test_the_loan_that_brought_robots_txt_carries_the_subrequest() -> None:
    async with RecordingServer({"/data": html("<p>data</p>")}) as b:
        lender = GrantingLender()
        answer = await fetch(lender, b.url("/data"), b.origin)
    assert getattr(answer, "status", None) == 200
    assert b.paths() == ["/data"]  # the grant's robots.txt: none fetched
    assert lender.loans == 1
    ((token, sent_at, delay),) = lender.returns
    assert token == 1 and delay == 30.0 and abs(sent_at - b.log[0].t) < 1.0


async def test_a_loan_not_used_is_given_back() -> None:
    async with RecordingServer({"/private/x": html("<p>no</p>")}) as b:
        lender = GrantingLender()
        answer = await fetch(lender, b.url("/private/x"), b.origin)
    assert answer == "robots" and b.paths() == []
    assert lender.loans == 1 and [r[0] for r in lender.returns] == [1]
