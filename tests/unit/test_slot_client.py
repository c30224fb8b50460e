"""The render worker's side of slot leases (``agents.stream.slot_client.RemoteSlots``), its
Kafka consumer left out: a fake ``publish`` plays the owner, answering a claim by handing its
grant to the client as the grants consumer would (``RemoteSlots._take``)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence

import msgspec

from streamcrawl.agents.frontier.scheduler import Loan
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.stream.slot_client import RemoteSlots
from streamcrawl.schemas.codec import decode, encode
from streamcrawl.schemas.records import CrawlPolicy, SlotGrant, SlotMessage

B = "http://b.example"
RULES = CrawlRules.from_policy(CrawlPolicy(crawl_id="c", seeds=("http://a.example/",)))
ROBOTS = "User-agent: *\nCrawl-delay: 2\n"


def owner(answer: Callable[[SlotMessage], SlotGrant | None]) -> tuple[RemoteSlots, list[str]]:
    """A client whose claims ``answer`` grants (None: no grant); the records it sent, as
    published (JSON)."""
    sent: list[str] = []

    async def publish(
        short: str, items: Sequence[tuple[bytes, bytes]], *, on_commit: bool = False
    ) -> None:
        assert short == "outcomes"  # a claim travels with its origin's outcomes
        for key, value in items:
            sent.append(value.decode())
            message = decode("outcomes", value)
            assert isinstance(message, SlotMessage) and key == message.origin.encode()
            grant = answer(message) if message.kind == "claim" else None
            if grant is not None:
                asyncio.get_running_loop().call_soon(slots._take, encode(grant))

    async def partitions_for(_topic: str) -> set[int]:
        return {0, 1, 2}

    slots = RemoteSlots(publish, {}, "grants", partitions_for, worker_id="r1")  # type: ignore[arg-type]
    return slots, sent


def grant_for(claim: SlotMessage, send_by: float, robots: str | None = ROBOTS) -> SlotGrant:
    return SlotGrant(
        claim_id=claim.claim_id,
        crawl_id=claim.crawl_id,
        origin=claim.origin,
        worker_id=claim.worker_id,
        send_by=send_by,
        delay=2.0,
        robots_status=200 if robots else None,
        robots_body=robots,
        robots_expires=time.time() + 3600 if robots else 0.0,
    )


def messages(sent: list[str]) -> list[SlotMessage]:
    out = [decode("outcomes", s) for s in sent]
    assert all(isinstance(m, SlotMessage) for m in out)
    return out  # type: ignore[return-value]


async def test_a_granted_loan_is_returned_with_when_its_request_was_on_the_wire() -> None:
    slots, sent = owner(lambda claim: grant_for(claim, time.time() + 2.0))
    loan = await slots.borrow(B, RULES, 1.0, time.time() + 5.0)
    assert isinstance(loan, Loan) and loan.origin == B
    # The owner's robots.txt of B came with the grant: the subrequest need not fetch it.
    state = slots.origin_state(B)
    assert state.robots_body == ROBOTS and state.robots_status == 200
    slots.returned(loan, sent_at=123.5, delay=2.0)
    slots.returned(loan, sent_at=999.0, delay=2.0)  # a second return of one loan: not sent
    await slots.stop()
    claim, back = messages(sent)
    assert claim.kind == "claim" and claim.worker_id == "r1" and claim.crawl_id == "c"
    assert back.kind == "return" and back.claim_id == claim.claim_id
    assert back.sent_at == 123.5 and back.delay == 2.0
    # The records carry ids, times, the origin and the delay: no header, cookie or credential.
    for text in sent:
        assert set(json.loads(text)) <= set(SlotMessage.__struct_fields__)


async def test_no_grant_by_the_deadline_withdraws_the_claim() -> None:
    slots, sent = owner(lambda _claim: None)
    started = time.monotonic()
    assert await slots.borrow(B, RULES, 1.0, time.time() + 0.3) is None
    assert time.monotonic() - started < 1.0
    await slots.stop()
    claim, back = messages(sent)
    assert back.kind == "return" and back.claim_id == claim.claim_id and back.sent_at is None


async def test_a_grant_past_its_send_by_is_given_back_unused() -> None:
    slots, sent = owner(lambda claim: grant_for(claim, time.time() - 0.1, robots=None))
    assert await slots.borrow(B, RULES, 1.0, time.time() + 5.0) is None
    await slots.stop()
    _claim, back = messages(sent)
    assert back.kind == "return" and back.sent_at is None
    assert slots.origin_state(B).robots_body is None  # nothing kept from it


async def test_a_grant_for_another_claim_or_worker_is_ignored() -> None:
    def elsewhere(claim: SlotMessage) -> SlotGrant:
        return msgspec.structs.replace(grant_for(claim, time.time() + 2.0), worker_id="r2")

    slots, _sent = owner(elsewhere)
    assert await slots.borrow(B, RULES, 1.0, time.time() + 0.3) is None
    await slots.stop()
