"""Links to other origins, of many reports, go to ``frontier`` as one batch per partition: on the
bench's site a page's links to ~3 other origins were 3.2 messages per page, each a produce and
a Faust event for the frontier agent. A page's links must still be in Kafka before ``send``
returns (its outcome is published only then), and a failed send must fail every report in it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Sequence

import pytest

from streamcrawl.agents.content.listings import merge
from streamcrawl.agents.stream.links import ACK_ROOM, LinkBatches, by_partition
from streamcrawl.agents.stream.messages import MESSAGE_BYTES
from streamcrawl.schemas.codec import decode
from streamcrawl.schemas.records import FrontierBatch, UrlRef

A, B = "http://a.test", "http://b.test"


def batch(origin: str, *paths: str, crawl: str = "c") -> FrontierBatch:
    refs = tuple(UrlRef(f"{origin}{p}", 1, "http://p.test/") for p in paths)
    return FrontierBatch(crawl_id=crawl, origin=origin, urls=refs)


class Recorder:
    """A publisher that records what it was sent (after ``delay``) or raises ``fail``."""

    def __init__(self, delay: float = 0.0, fail: Exception | None = None) -> None:
        self.sent: list[tuple[str, list[tuple[bytes, bytes]]]] = []
        self.delay = delay
        self.fail = fail

    async def __call__(
        self, short: str, items: Sequence[tuple[bytes, bytes]], *, on_commit: bool = False
    ) -> None:
        await asyncio.sleep(self.delay)
        if self.fail is not None:
            raise self.fail
        self.sent.append((short, list(items)))

    def batches(self) -> list[FrontierBatch]:
        return [decode("frontier", v) for short, items in self.sent for _, v in items]


async def seconds(aw: Awaitable[object]) -> float:
    """How long awaiting ``aw`` took (the event loop's clock)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    await aw
    return loop.time() - start


def test_merge_keeps_every_url_in_order_one_batch_per_crawl_and_origin() -> None:
    merged = merge(
        [batch(A, "/1", "/2"), batch(B, "/x"), batch(A, "/2", "/3"), batch(A, "/9", crawl="d")]
    )
    assert [(m.crawl_id, m.origin) for m in merged] == [("c", A), ("c", B), ("d", A)]
    assert [u.url for u in merged[0].urls] == [A + "/1", A + "/2", A + "/2", A + "/3"]
    assert [u.url for u in merged[2].urls] == [A + "/9"]


def test_reports_within_the_window_share_one_message_per_origin() -> None:
    async def main() -> Recorder:
        rec = Recorder()
        links = LinkBatches(rec, window=0.05)
        await asyncio.gather(
            links.send([batch(A, "/1"), batch(B, "/1")]),
            links.send([batch(A, "/2")]),
            links.send([batch(B, "/2"), batch(A, "/3")]),
        )
        return rec

    rec = asyncio.run(main())
    assert len(rec.sent) == 1 and rec.sent[0][0] == "frontier"
    keys = [k for k, _ in rec.sent[0][1]]
    assert keys == [A.encode(), B.encode()]  # keyed by the origin whose URLs it carries
    got = {b.origin: [u.url for u in b.urls] for b in rec.batches()}
    assert got == {A: [A + "/1", A + "/2", A + "/3"], B: [B + "/1", B + "/2"]}


def test_reports_of_two_crawls_within_the_window_keep_their_crawls_apart() -> None:
    async def main() -> Recorder:
        rec = Recorder()
        links = LinkBatches(rec, window=0.05)
        await asyncio.gather(
            links.send([batch(A, "/1")]),
            links.send([batch(A, "/1", crawl="d")]),
            links.send([batch(A, "/2")]),
        )
        return rec

    rec = asyncio.run(main())
    got = [(b.crawl_id, [u.url for u in b.urls]) for b in rec.batches()]
    assert got == [("c", [A + "/1", A + "/2"]), ("d", [A + "/1"])]


def test_send_returns_only_once_the_batch_is_acked() -> None:
    async def main() -> None:
        rec = Recorder(delay=0.05)
        links = LinkBatches(rec, window=0.01)
        task = asyncio.ensure_future(links.send([batch(A, "/1")]))
        await asyncio.sleep(0.03)  # the window is over, the publish not acked yet
        assert not task.done() and not rec.sent
        await task
        assert len(rec.sent) == 1

    asyncio.run(main())


def test_batches_after_a_flush_started_go_in_the_next_one() -> None:
    async def main() -> Recorder:
        rec = Recorder(delay=0.05)
        links = LinkBatches(rec, window=0.01)
        first = asyncio.ensure_future(links.send([batch(A, "/1")]))
        await asyncio.sleep(0.02)  # the first flush is publishing
        await links.send([batch(A, "/2")])
        await first
        return rec

    rec = asyncio.run(main())
    assert [[u.url for u in b.urls] for b in rec.batches()] == [[A + "/1"], [A + "/2"]]


def test_a_full_window_is_sent_before_its_time() -> None:
    async def main() -> float:
        links = LinkBatches(Recorder(), window=30.0, max_urls=3)
        return await seconds(
            asyncio.gather(links.send([batch(A, "/1", "/2")]), links.send([batch(B, "/1")]))
        )

    assert asyncio.run(main()) < 5.0


def test_a_failed_send_fails_every_report_of_it() -> None:
    async def main() -> list[BaseException | None]:
        links = LinkBatches(Recorder(fail=RuntimeError("broker away")), window=0.01)
        results = await asyncio.gather(
            links.send([batch(A, "/1")]), links.send([batch(B, "/1")]), return_exceptions=True
        )
        return list(results)

    results = asyncio.run(main())
    assert all(isinstance(r, RuntimeError) for r in results)


def test_a_cancelled_report_does_not_stop_the_others() -> None:
    async def main() -> Recorder:
        rec = Recorder()
        links = LinkBatches(rec, window=0.05)
        gone = asyncio.ensure_future(links.send([batch(A, "/1")]))
        kept = asyncio.ensure_future(links.send([batch(B, "/1")]))
        await asyncio.sleep(0.01)
        gone.cancel()
        await kept
        with pytest.raises(asyncio.CancelledError):
            await gone
        await links.close()
        return rec

    rec = asyncio.run(main())
    # the cancelled report's links are sent too: harmless (deduplicated), its URL refetched
    assert sorted(b.origin for b in rec.batches()) == [A, B]


def test_a_merged_batch_over_the_message_size_is_split_and_none_is_lost() -> None:
    async def main() -> Recorder:
        rec = Recorder()
        links = LinkBatches(rec, window=0.01, message_bytes=MESSAGE_BYTES)
        paths = [f"/page/{i:06d}" for i in range(30_000)]
        await asyncio.gather(
            links.send([batch(A, *paths[:15_000])]), links.send([batch(A, *paths[15_000:])])
        )
        return rec

    rec = asyncio.run(main())
    values = [v for _, items in rec.sent for _, v in items]
    assert len(values) > 1 and all(len(v) <= MESSAGE_BYTES for v in values)
    urls = [u.url for b in rec.batches() for u in b.urls]
    assert urls == [f"{A}/page/{i:06d}" for i in range(30_000)]


def test_nothing_to_send_returns_at_once() -> None:
    async def main() -> Recorder:
        rec = Recorder()
        await LinkBatches(rec, window=30.0).send([])
        return rec

    assert asyncio.run(main()).sent == []


def test_a_polite_origins_links_go_before_its_next_request_may_start() -> None:
    """Waiting must not hold a polite request back: the flush goes ACK_ROOM before the
    earliest waiting report's origin may start its next request."""

    async def main() -> float:
        links = LinkBatches(Recorder(), window=30.0)
        return await seconds(links.send([batch(A, "/1")], due=time.time() + ACK_ROOM + 0.05))

    took = asyncio.run(main())
    assert 0.03 <= took < 1.0


def test_a_report_without_delay_waits_the_window_for_others() -> None:
    async def main() -> Recorder:
        rec = Recorder()
        links = LinkBatches(rec, window=0.05)
        first = asyncio.ensure_future(links.send([batch(A, "/1")]))
        await asyncio.sleep(0.02)
        assert not first.done()
        await asyncio.gather(first, links.send([batch(A, "/2")]))
        return rec

    assert [[u.url for u in b.urls] for b in asyncio.run(main()).batches()] == [
        [A + "/1", A + "/2"]
    ]


def test_a_report_without_delay_goes_at_once_when_nothing_is_being_fetched() -> None:
    """Nothing more can come: waiting would only hold its origin's next request back."""

    async def main() -> float:
        links = LinkBatches(Recorder(), window=30.0, idle=lambda: True)
        return await seconds(links.send([batch(A, "/1")]))

    assert asyncio.run(main()) < 1.0


def test_a_waiting_flush_goes_when_the_last_request_being_fetched_ends() -> None:
    """While another request is fetched the report waits for it (its links may join); once
    that request's report is out of the fetch (``poke``), the flush goes, before the window."""
    fetching = [1]

    async def main() -> tuple[float, Recorder]:
        rec = Recorder()
        links = LinkBatches(rec, window=30.0, idle=lambda: fetching[0] == 0)
        loop = asyncio.get_running_loop()
        start = loop.time()
        first = asyncio.ensure_future(links.send([batch(A, "/1")]))
        await asyncio.sleep(0.05)
        assert not first.done()  # the other request may still bring links
        fetching[0] = 0
        links.poke()
        await first
        return loop.time() - start, rec

    took, rec = asyncio.run(main())
    assert 0.05 <= took < 1.0
    assert [[u.url for u in b.urls] for b in rec.batches()] == [[A + "/1"]]


def test_a_polite_report_keeps_its_hold_when_nothing_is_being_fetched() -> None:
    """A report with a delay gives no origin a reason to hurry: its next request waits for
    the delay, and other origins' reports due meanwhile may still join."""

    async def main() -> float:
        links = LinkBatches(Recorder(), window=0.01, hold=0.1, idle=lambda: True)
        return await seconds(links.send([batch(A, "/1")], due=time.time() + 30.0, queued=True))

    assert 0.09 <= asyncio.run(main()) < 1.0


def test_a_polite_origin_with_more_queued_waits_until_just_before_its_due() -> None:
    """Its next request waits for the delay anyway: the report waits past the window for
    other reports' links, until ACK_ROOM before its due, and takes those that came."""

    async def main() -> tuple[float, Recorder]:
        rec = Recorder()
        links = LinkBatches(rec, window=0.02, hold=5.0)
        loop = asyncio.get_running_loop()
        start = loop.time()
        first = asyncio.ensure_future(
            links.send([batch(A, "/1")], due=time.time() + ACK_ROOM + 0.15, queued=True)
        )
        await asyncio.sleep(0.06)  # past the window
        assert not first.done()
        await links.send([batch(A, "/2")], due=time.time() + 10.0, queued=True)
        await first
        return loop.time() - start, rec

    took, rec = asyncio.run(main())
    assert 0.14 <= took < 1.0
    assert [[u.url for u in b.urls] for b in rec.batches()] == [[A + "/1", A + "/2"]]


def test_the_hold_bounds_a_queued_reports_wait() -> None:
    async def main() -> float:
        links = LinkBatches(Recorder(), window=0.01, hold=0.1)
        return await seconds(links.send([batch(A, "/1")], due=time.time() + 30.0, queued=True))

    assert 0.09 <= asyncio.run(main()) < 1.0


def test_an_origin_with_nothing_else_queued_waits_only_the_window() -> None:
    """Its outcome may carry the origin's next URL (a chain of pages): it is not held until
    the delay ends, and it takes a queued report's flush forward with it."""

    async def main() -> tuple[float, Recorder]:
        rec = Recorder()
        links = LinkBatches(rec, window=0.05, hold=30.0)
        loop = asyncio.get_running_loop()
        start = loop.time()
        held = asyncio.ensure_future(
            links.send([batch(A, "/1")], due=time.time() + 30.0, queued=True)
        )
        await asyncio.sleep(0.01)
        await links.send([batch(B, "/1")], due=time.time() + 30.0, queued=False)
        await held
        return loop.time() - start, rec

    took, rec = asyncio.run(main())
    assert 0.05 <= took < 1.0
    assert {b.origin for b in rec.batches()} == {A, B} and len(rec.sent) == 1


C = "http://c.test"
PARTITION = {A: 0, B: 1, C: 0}.__getitem__  # A and C share partition 0


def test_origins_of_one_partition_share_one_message_keyed_by_the_first() -> None:
    """2,000 origins of 5 pages: a page links ~4 origins that rarely meet in one flush, so one
    batch per origin was ~4 ``frontier`` messages (and frontier-agent events) a page."""

    async def main() -> Recorder:
        rec = Recorder()
        links = LinkBatches(rec, window=0.05, partition=PARTITION)
        await asyncio.gather(
            links.send([batch(A, "/1"), batch(B, "/1")]),
            links.send([batch(C, "/1"), batch(A, "/2")]),
            links.send([batch(C, "/2", crawl="d")]),
        )
        return rec

    rec = asyncio.run(main())
    assert len(rec.sent) == 1
    keys = [k for k, _ in rec.sent[0][1]]
    assert keys == [A.encode(), B.encode(), C.encode()]  # each lands on its URLs' partition
    got = [(b.crawl_id, b.origin, [u.url for u in b.urls]) for b in rec.batches()]
    assert got == [
        ("c", A, [A + "/1", A + "/2", C + "/1"]),  # every origin's URLs in order
        ("c", B, [B + "/1"]),
        ("d", C, [C + "/2"]),  # crawls stay apart
    ]


def test_by_partition_keeps_a_lone_origins_batch_as_it_is() -> None:
    one = batch(B, "/1", "/2")
    assert by_partition([batch(A, "/1"), one, batch(C, "/3")], PARTITION)[1] is one
    assert by_partition([], PARTITION) == []
