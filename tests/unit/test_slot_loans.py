"""An origin's slot lent to a request the scheduler did not dispatch (a rendered page's
subrequest to another origin, ``Scheduler.lend``), on a simulated clock: loans and dispatches
of the origin keep its delay between them, whichever came first (docs/rendering.md)."""

from __future__ import annotations

import itertools

from streamcrawl.agents.frontier.records import load_origin
from streamcrawl.agents.frontier.scheduler import Loan
from streamcrawl.agents.frontier.store import Changes
from streamcrawl.schemas.records import FrontierBatch, UrlRef
from tests.unit.test_scheduler import B, finish, setup


def test_loans_and_dispatches_of_an_origin_keep_the_delay_between_them() -> None:
    sched, store, r, f = setup(n=4, delay=1.0)
    starts: list[tuple[float, str]] = []
    sched.claim(B)  # a subrequest waits for B from the start
    t = 0.0
    while t < 8.0:
        # The wiring's loop first: a claimant that asks after it still goes first.
        for d in sched.take(t, 100):
            if d.origin == B:
                starts.append((t, d.kind))
            finish(sched, store, r, f, d, t)
        got = sched.lend(B, t, 1.0, 1) if sched.slots[B].claims else None
        if isinstance(got, Loan):
            starts.append((t, "loan"))
            sched.unclaim(B)
            sched.returned(got, t + 0.2, 1.0)  # on the wire a little after the loan
            starts.append((t + 0.2, "loan sent"))
        if t == 2.5:
            sched.claim(B)  # a second subrequest, while B's queue is still busy
        t = round(t + 0.01, 6)
    loans = [x for x in starts if x[1] == "loan"]
    assert len(loans) == 2 and len([x for x in starts if x[1] == "page"]) == 4
    # A waiting claim goes first: the first loan at 0, before B's first page.
    assert starts[0] == (0.0, "loan")
    # The second, claimed at 2.5 (B's page of 2.2 just sent), goes at B's next ready time.
    assert loans[1][0] == 3.2 and (3.2, "page") not in starts
    # Every request to B, loan or dispatch, starts at least the delay after the previous was
    # on the wire (a loan's send time counts, not only its start).
    on_wire = sorted(t for t, kind in starts if kind != "loan")
    assert all(b - a >= 1.0 - 1e-9 for a, b in itertools.pairwise(on_wire))


def test_the_next_dispatch_waits_the_borrowers_longer_delay() -> None:
    # The borrower read B's Crawl-delay (3 s) from a robots.txt the scheduler does not hold.
    sched, store, r, f = setup(n=2, delay=1.0)
    for d in sched.take(0.0, 100):
        finish(sched, store, r, f, d, 0.0)
    assert sched.lend(B, 1.0, 3.0, 1) == 3.0  # its own delay counts from B's page at 0
    loan = sched.lend(B, 3.0, 3.0, 1)
    assert isinstance(loan, Loan) and loan.token < 0  # never a queue seq
    assert [d.origin for d in sched.take(3.5, 100) if d.origin == B] == []  # in flight
    sched.returned(loan, 3.5, 3.0)
    assert [d for d in sched.take(6.49, 100) if d.origin == B] == []
    assert [d.origin for d in sched.take(6.5, 100) if d.origin == B] == [B]


def test_a_loan_waits_for_the_origins_request_in_flight_and_its_delay() -> None:
    sched, store, r, f = setup(n=2, delay=1.0)
    b = next(d for d in sched.take(0.0, 100) if d.origin == B)
    assert sched.lend(B, 0.5, 1.0, 1) == 0.5 + 0.05  # in flight: ask again soon
    finish(sched, store, r, f, b, 0.5)  # on the wire at 0.5: B's next fetch at 1.5
    not_before = load_origin(store, B).next_fetch_at
    assert sched.lend(B, 0.6, 1.0, 1, not_before) == 1.5
    assert isinstance(sched.lend(B, 1.5, 1.0, 1, not_before), Loan)
    assert sched.lend(B, 1.6, 1.0, 5, not_before) == 2.5  # concurrency is no shortcut


def test_a_loan_is_remembered_after_its_origin_ran_out_of_work() -> None:
    sched, store, r, f = setup(n=1, delay=1.0)
    for d in sched.take(0.0, 100):
        finish(sched, store, r, f, d, 0.0)
    assert B not in sched  # B has nothing queued: out of memory
    loan = sched.lend(B, 5.0, 1.0, 1, load_origin(store, B).next_fetch_at)
    assert isinstance(loan, Loan)
    sched.returned(loan, 5.0, 1.0)
    sched.track(load_origin(store, B))  # an outcome of B with nothing queued
    assert sched.lend(B, 5.5, 1.0, 1) == 6.0  # the loan's hold is still known
    # A link to B queued later: its dispatch waits for the loan's delay too.
    ch = Changes(store)
    batch = FrontierBatch(crawl_id="c", origin=B, urls=(UrlRef(B + "/late", 1),))
    f.admit(ch, batch, r, budget=None)
    ch.commit()
    sched.track(load_origin(store, B))
    assert [d for d in sched.take(5.9, 100) if d.origin == B] == []
    assert [d.entry.url for d in sched.take(6.0, 100) if d.entry is not None] == [B + "/late"]
