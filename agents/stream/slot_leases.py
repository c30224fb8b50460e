"""The owner's side of slot leases: loans of its origins' slots to render workers' subrequests.

A render worker of the Kafka wiring owns no origin. A subrequest of a page it renders to
another origin B asks B's owner (the worker whose partition holds B) for a loan of B's slot: a
``SlotMessage`` claim on ``outcomes`` keyed by B, read by that owner's frontier agent among
the outcomes (docs/rendering.md, "Other origins in the Kafka wiring").

``Leases`` is the owner's table of claims, by claim id, over its ``Scheduler``; no I/O, the
wiring publishes the grants it returns:

- a claim makes the scheduler hold the slot for it (``Scheduler.claim``); each turn of the
  dispatch loop, ``lend`` lends the slots it may (``Scheduler.lend``, as the embedded crawl's
  lender) and answers each with a ``SlotGrant``: send by ``send_by`` (``LEASE_WINDOW`` from
  the loan), B's delay and robots.txt as the owner holds it;
- a return gives the loan back as sent when its request was on the wire
  (``Scheduler.returned``); a return of a claim not granted withdraws it;
- a loan not returned by ``send_by`` plus the crawl's fetch timeout (its render worker died)
  is given back by ``lend`` as sent then; a claim not granted by its ``not_after`` is dropped;
- idempotent by claim id (handlers may run twice, messages may be replayed): a claim known
  and granted gets the same grant again, one pending is left as it is, and one that ended
  (returned, expired, dropped) is ignored for ``ENDED_KEEP``, as is a return of an unknown or
  ended claim.

A new owner does not know its predecessor's loans: the wiring treats every origin of a
partition it takes over as fetched ``LEASE_WINDOW`` after it took over (``Scheduler.track``'s
``assumed_start``), so that a loan granted just before the takeover and sent at its
``send_by`` is the delay behind B's next request.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from streamcrawl.agents.frontier.scheduler import Loan, Scheduler
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.schemas.records import SlotGrant, SlotMessage

log = logging.getLogger(__name__)

# Seconds a granted loan's request may take to be sent: the grant's trip through Kafka to its
# render worker. Also how much later than its takeover a new owner starts an origin.
LEASE_WINDOW: Final = 2.0
ENDED_KEEP: Final = 600.0  # seconds an ended claim id is remembered (replays are ignored)


@dataclass
class _Lease:
    """A claim, and its loan and grant once lent."""

    claim: SlotMessage
    rules: CrawlRules
    loan: Loan | None = None
    grant: SlotGrant | None = None
    lent_at: float = 0.0


class Leases:
    """The claims on this owner's slots, by claim id (see the module docstring)."""

    def __init__(self, scheduler: Scheduler, rules_for: Callable[[str], CrawlRules | None]) -> None:
        self.scheduler = scheduler
        self.rules_for = rules_for
        self._live: dict[str, _Lease] = {}
        self._ended: OrderedDict[str, float] = OrderedDict()  # claim id -> when it ended

    def waiting(self) -> bool:
        """Whether a claim waits for a loan (the dispatch loop looks again soon)."""
        return any(lease.loan is None for lease in self._live.values())

    def received(self, msg: SlotMessage, now: float) -> SlotGrant | None:
        """Take a claim or a return; a grant to send again (a replayed claim's), else None."""
        if msg.claim_id in self._ended:
            return None
        lease = self._live.get(msg.claim_id)
        if msg.kind == "return":
            if lease is not None:
                self._end(lease, msg.sent_at, now, msg.delay)
            else:  # its claim is yet to come (a replay from before it): ignore that too
                self._ended[msg.claim_id] = now
            return None
        if lease is not None:
            return lease.grant
        rules = self.rules_for(msg.crawl_id)
        if rules is None or msg.not_after < now:
            return None  # an unknown crawl, or its render worker has stopped waiting
        self._live[msg.claim_id] = _Lease(msg, rules)
        self.scheduler.claim(msg.origin)
        return None

    def lend(self, now: float, since: Callable[[str], float | None]) -> list[SlotGrant]:
        """Lend what may be lent now, give back what expired; the grants to send.
        ``since(origin)``: when this worker took the origin over (None: not dispatched here
        yet, nothing is lent for it)."""
        grants = []
        for lease in list(self._live.values()):
            if lease.loan is not None:
                self._expire(lease, now)
            elif lease.claim.not_after < now:
                self._end(lease, None, now)
            else:
                took_over = since(lease.claim.origin)
                if took_over is not None:
                    grant = self._lend(lease, now, took_over)
                    if grant is not None:
                        grants.append(grant)
        while self._ended and next(iter(self._ended.values())) < now - ENDED_KEEP:
            self._ended.popitem(last=False)
        return grants

    def forget(self, gone: Callable[[str], bool]) -> None:
        """Drop the claims of origins that ``gone`` says left this worker (a revoke): their
        next owner hears of them again (the claims are read again) or lets them expire."""
        for claim_id, lease in list(self._live.items()):
            if gone(lease.claim.origin):
                del self._live[claim_id]
                if lease.loan is None:
                    self.scheduler.unclaim(lease.claim.origin)

    def _lend(self, lease: _Lease, now: float, took_over: float) -> SlotGrant | None:
        claim, rules = lease.claim, lease.rules
        state = self.scheduler.origin_state(claim.origin)
        delay = rules.delay(state)
        # The first request after a takeover waits the delay after ``took_over`` (which the
        # wiring already moved ``LEASE_WINDOW`` on): a predecessor's loan may be in flight.
        not_before = max(state.next_fetch_at, state.backoff_until, took_over + delay)
        limit = rules.policy.per_origin_concurrency
        got = self.scheduler.lend(claim.origin, now, delay, limit, not_before)
        if not isinstance(got, Loan):
            return None
        self.scheduler.unclaim(claim.origin)
        fresh = not rules.robots_expired(state, now)
        lease.loan, lease.lent_at = got, now
        lease.grant = SlotGrant(
            claim_id=claim.claim_id,
            crawl_id=claim.crawl_id,
            origin=claim.origin,
            worker_id=claim.worker_id,
            send_by=now + LEASE_WINDOW,
            delay=delay,
            robots_status=state.robots_status if fresh else None,
            robots_body=state.robots_body if fresh else None,
            robots_expires=state.robots_expires if fresh else 0.0,
        )
        return lease.grant

    def _expire(self, lease: _Lease, now: float) -> None:
        """A loan whose request was not returned in time: given back as sent at its expiry."""
        assert lease.grant is not None
        expiry = lease.grant.send_by + lease.rules.policy.timeout
        if now >= expiry:
            log.warning(
                "loan of %s to %s not returned: given back as sent at its expiry",
                lease.claim.origin,
                lease.claim.worker_id,
                extra={"origin": lease.claim.origin},
            )
            self._end(lease, expiry, now)

    def _end(self, lease: _Lease, sent_at: float | None, now: float, delay: float = 0.0) -> None:
        """The claim is over: its loan given back (sent at ``sent_at``; None: never sent, as
        if at the loan; held ``delay`` or the grant's, the longer), or its claim withdrawn."""
        self._live.pop(lease.claim.claim_id, None)
        self._ended[lease.claim.claim_id] = now
        if lease.loan is None:
            self.scheduler.unclaim(lease.claim.origin)
            return
        assert lease.grant is not None
        sent = sent_at if sent_at is not None else lease.lent_at
        self.scheduler.returned(lease.loan, sent, max(delay, lease.grant.delay))
