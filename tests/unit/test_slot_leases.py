"""The owner's table of slot leases (``agents.stream.slot_leases.Leases``) over a real
``Scheduler``, on a simulated clock: claims lent as the embedded lender lends, idempotent by
claim id (every handler may run twice), loans of a dead render worker given back at expiry."""

from __future__ import annotations

from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.stream.slot_leases import ENDED_KEEP, LEASE_WINDOW, Leases
from streamcrawl.schemas.records import SlotGrant, SlotMessage
from tests.unit.test_scheduler import B, finish, setup


def claim(claim_id: str, not_after: float = 100.0) -> SlotMessage:
    return SlotMessage(
        kind="claim", claim_id=claim_id, crawl_id="c", origin=B, worker_id="r1", not_after=not_after
    )


def give_back(claim_id: str, sent_at: float | None, delay: float = 0.0) -> SlotMessage:
    return SlotMessage(
        kind="return", claim_id=claim_id, crawl_id="c", origin=B, worker_id="r1",
        sent_at=sent_at, delay=delay,
    )  # fmt: skip


def owned(_origin: str) -> float:
    return -100.0  # taken over long ago


def leases(n: int = 2) -> tuple[Leases, object]:
    sched, store, r, f = setup(n=n, delay=1.0)

    def rules_for(crawl_id: str) -> CrawlRules | None:
        return r if crawl_id == "c" else None

    return Leases(sched, rules_for), (sched, store, r, f)


def b_starts(table: Leases, world: object, t: float) -> list[int]:
    """B's dispatches that may start at ``t`` (each finished at once)."""
    sched, store, r, f = world  # type: ignore[misc]
    out = []
    for d in sched.take(t, 100):
        finish(sched, store, r, f, d, t)
        if d.origin == B:
            out.append(d.seq)
    return out


def test_a_claim_is_granted_once_and_its_replays_get_the_same_grant() -> None:
    table, world = leases()
    assert table.received(claim("x"), 0.0) is None
    assert table.waiting()
    (grant,) = table.lend(0.0, owned)  # a waiting claim goes before B's own dispatch
    assert isinstance(grant, SlotGrant) and grant.claim_id == "x" and grant.worker_id == "r1"
    assert grant.send_by == LEASE_WINDOW and grant.delay == 1.0
    assert not table.waiting() and table.lend(0.1, owned) == []  # granted once
    assert table.received(claim("x"), 0.2) == grant  # a replayed claim: the same grant
    assert b_starts(table, world, 0.5) == []  # lent: B's slot is in flight
    table.received(give_back("x", sent_at=0.5, delay=2.0), 0.6)
    # Held the borrower's longer delay after its request was on the wire.
    assert b_starts(table, world, 2.49) == []
    assert b_starts(table, world, 2.5) != []
    # Once returned, a replayed claim and a replayed return change nothing.
    assert table.received(claim("x"), 2.6) is None and not table.waiting()
    table.received(give_back("x", sent_at=9.0), 2.7)
    assert table.lend(2.8, owned) == []


def test_a_loan_never_returned_is_given_back_as_sent_at_its_expiry() -> None:
    table, world = leases()
    table.received(claim("x"), 0.0)
    (grant,) = table.lend(0.0, owned)
    timeout = 30.0  # the crawl's fetch timeout (CrawlPolicy.timeout)
    expiry = grant.send_by + timeout
    table.lend(expiry - 0.01, owned)
    assert b_starts(table, world, expiry - 0.01) == []  # still lent
    table.lend(expiry, owned)  # the render worker died: given back now
    assert b_starts(table, world, expiry + 0.99) == []
    assert b_starts(table, world, expiry + 1.0) != []
    # Its late return is ignored: it does not hold B again.
    table.received(give_back("x", sent_at=expiry + 5.0), expiry + 1.1)
    assert b_starts(table, world, expiry + 2.1) != []


def test_a_claim_withdrawn_or_past_its_wait_is_dropped_and_never_granted() -> None:
    table, world = leases(n=1)
    sched = world[0]  # type: ignore[index]
    table.received(claim("late", not_after=0.5), 0.0)
    table.received(claim("gone"), 0.0)
    assert sched.slots[B].claims == 2
    table.received(give_back("gone", sent_at=None), 0.1)  # withdrawn before its grant
    assert table.lend(0.6, lambda _o: None) == []  # not dispatched here yet: nothing lent
    assert sched.slots[B].claims == 0 and not table.waiting()
    assert table.received(claim("gone"), 0.7) is None and not table.waiting()  # a replay
    # A claim of a crawl the owner does not know, or past its wait: ignored.
    assert table.received(claim("other", not_after=0.5), 0.7) is None
    assert not table.waiting()


def test_after_a_takeover_the_first_loan_waits_the_delay_after_it() -> None:
    table, _world = leases()
    took_over = 10.0 + LEASE_WINDOW  # what the wiring's ``since_of`` says
    table.received(claim("x"), 10.0)
    assert table.lend(10.5, lambda _o: took_over) == []
    assert table.lend(took_over + 0.99, lambda _o: took_over) == []
    (grant,) = table.lend(took_over + 1.0, lambda _o: took_over)
    assert grant.claim_id == "x"


def test_a_revoked_origins_claims_are_forgotten_and_ended_ids_in_time() -> None:
    table, world = leases()
    sched = world[0]  # type: ignore[index]
    table.received(claim("x"), 0.0)
    table.forget(lambda origin: origin == B)
    assert sched.slots[B].claims == 0 and not table.waiting()
    table.received(claim("y"), 0.0)
    table.lend(0.0, owned)
    table.received(give_back("y", sent_at=0.1), 0.2)
    assert table.received(claim("y"), 0.3) is None and not table.waiting()
    table.lend(ENDED_KEEP + 1.0, owned)  # long after: the id is no longer remembered
    table.received(claim("y", not_after=ENDED_KEEP + 10.0), ENDED_KEEP + 1.0)
    assert table.waiting()
