"""One suite over every sink: MemorySink always, CassandraSink against a real node.

The contract (docs/architecture.md, invariant "Idempotent sink"): rows keep the version with the
newest record time; replaying any input leaves the same rows; counts per terminal state are exact.
"""

from __future__ import annotations

import functools
import itertools
import uuid
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from cassandra import OperationTimedOut
from cassandra.query import BatchStatement, BatchType

from streamcrawl.agents.errors import CrawlError, SinkBackpressure
from streamcrawl.agents.sinks.cassandra.config import CassandraConfig
from streamcrawl.agents.sinks.cassandra.driver import (
    batch_bounds,
    connect,
    create_schema,
    schema_statements,
)
from streamcrawl.agents.sinks.cassandra.pack import DEFAULT_BOUNDS, SETTINGS, Bounds, node_bounds
from streamcrawl.agents.sinks.cassandra.sink import CassandraSink
from streamcrawl.agents.sinks.contract import Sink, Version, url_hash, version_of
from streamcrawl.agents.sinks.memory import MemorySink
from streamcrawl.agents.stream.metrics import Metrics
from streamcrawl.agents.stream.sink_agent import write_batch
from streamcrawl.schemas.codec import encode
from streamcrawl.schemas.records import CrawlPolicy, Outlink, Page, TerminalState, UrlStatus
from streamcrawl.topology.settings import load_settings

T0 = 1_780_000_000.123456


def page(crawl_id: str, url: str, fetched_at: float = T0, **fields: object) -> Page:
    base = Page(
        crawl_id=crawl_id, url=url, final_url=url, origin="https://example.org", status=200,
        headers={"content-type": "text/html"}, content_type="text/html", charset="utf-8",
        title="first", depth=1, fetched_at=fetched_at, elapsed_ms=12.5, body_sha256="ab" * 32,
        body_bytes=1234, outlinks=3,
    )  # fmt: skip
    return msgspec.structs.replace(base, **fields)


def status(
    crawl_id: str, url: str, state: TerminalState, at: float = T0, **fields: object
) -> UrlStatus:
    base = UrlStatus(
        crawl_id=crawl_id, url=url, origin="https://example.org", state=state, depth=1,
        attempts=1, updated_at=at,
    )  # fmt: skip
    return msgspec.structs.replace(base, **fields)


@pytest.fixture(
    params=[
        "memory",
        pytest.param("cassandra", marks=[pytest.mark.cassandra, pytest.mark.integration]),
    ]
)
async def sink(request: pytest.FixtureRequest) -> AsyncIterator[Sink]:
    if request.param == "memory":
        backend: Sink = MemorySink()
    else:
        settings = load_settings(
            cassandra_hosts=request.getfixturevalue("cassandra_hosts"),
            cassandra_keyspace=request.getfixturevalue("cassandra_keyspace"),
            sink_concurrency=8,
        )
        create_schema(settings.cassandra_config())
        backend = CassandraSink(settings.cassandra_config())
    await backend.start()
    yield backend
    await backend.stop()


@pytest.fixture
def crawl_id() -> str:
    return "c-" + uuid.uuid4().hex[:10]


LINKS = (
    Outlink("https://example.org/b", 'Bée, "quoted" \\ back', ("nofollow", "ugc")),
    Outlink("https://x.example/", tag="iframe", in_scope=False, scope_rule="host"),
)


async def test_round_trip(sink: Sink, crawl_id: str) -> None:
    p = page(
        crawl_id, "https://example.org/a", redirects=("https://example.org/r",), body="<p>",
        links=LINKS, links_total=3, links_truncated=True,
    )  # fmt: skip
    # no links and links_total None, as a v1/v2 record decodes
    bare = page(crawl_id, "https://example.org/b", headers={}, title=None, content_type=None)
    s = status(crawl_id, p.url, TerminalState.FETCHED, status=200, final_url=p.url)
    failed = status(crawl_id, bare.url, TerminalState.FAILED, attempts=3, last_error="timeout")
    await sink.write([p, bare], [s, failed])
    assert await sink.get_page(crawl_id, p.url) == p
    assert await sink.get_page(crawl_id, bare.url) == bare
    assert await sink.get_status(crawl_id, s.origin, s.url) == s
    assert await sink.get_status(crawl_id, failed.origin, failed.url) == failed
    assert await sink.get_page(crawl_id, "https://example.org/never") is None
    assert await sink.get_status(crawl_id, s.origin, "https://example.org/never") is None


DATA = {"price": "9,99 €", "tags": ["/t/a", 'b "q" \\'], "sku": None, "_truncated": True}


async def test_a_pages_data_is_stored_and_read_back(sink: Sink, crawl_id: str) -> None:
    """What the crawl's extractors read (``Page.data``), and null for a crawl without them."""
    extracted = page(crawl_id, "https://example.org/d", data=DATA)
    plain = page(crawl_id, "https://example.org/n")
    await sink.write([extracted, plain], [])
    assert await sink.get_page(crawl_id, extracted.url) == extracted
    stored = await sink.get_page(crawl_id, plain.url)
    assert stored == plain and stored.data is None


PLUGIN_ERRORS = ("price: ValueError: no price", "slow: ran past its time budget of 1 s")


async def test_a_pages_plugin_errors_are_stored_and_read_back(sink: Sink, crawl_id: str) -> None:
    """What plugins that failed left in the record (``Page.plugin_errors``), and none."""
    failed = page(crawl_id, "https://example.org/e", plugin_errors=PLUGIN_ERRORS)
    plain = page(crawl_id, "https://example.org/n")
    await sink.write([failed, plain], [])
    assert await sink.get_page(crawl_id, failed.url) == failed
    assert await sink.get_page(crawl_id, plain.url) == plain


async def test_replay_leaves_rows_unchanged(sink: Sink, crawl_id: str) -> None:
    pages = [page(crawl_id, f"https://example.org/{i}") for i in range(20)]
    statuses = [status(crawl_id, p.url, TerminalState.FETCHED) for p in pages]
    await sink.write(pages, statuses)
    before = await sink.counts(crawl_id)
    for _ in range(2):
        await sink.write(pages, statuses)
        await sink.write(pages[5:], statuses[:5])
    assert await sink.counts(crawl_id) == before
    for p, s in zip(pages, statuses, strict=True):
        assert await sink.get_page(crawl_id, p.url) == p
        assert await sink.get_status(crawl_id, s.origin, s.url) == s


async def test_newer_fetch_wins(sink: Sink, crawl_id: str) -> None:
    url = "https://example.org/page"
    old = page(crawl_id, url, body="old body")
    new = page(crawl_id, url, fetched_at=T0 + 60, title="second", status=404, body=None)
    await sink.write([old], [status(crawl_id, url, TerminalState.FAILED, last_error="503")])
    await sink.write([new], [status(crawl_id, url, TerminalState.FETCHED, at=T0 + 60)])
    assert await sink.get_page(crawl_id, url) == new  # the old body and title are gone
    got = await sink.get_status(crawl_id, "https://example.org", url)
    assert got is not None and got.state == TerminalState.FETCHED and got.last_error is None
    assert (await sink.counts(crawl_id))[crawl_id]["fetched"] == 1
    assert (await sink.counts(crawl_id))[crawl_id]["failed"] == 0


async def test_a_revisit_keeps_the_stored_copy_and_records_its_check(
    sink: Sink, crawl_id: str
) -> None:
    """Continuous crawling: an ``unchanged`` record (no body, no title) must not overwrite the
    stored copy, a ``changed`` one replaces it, a ``gone`` one marks it; replays change nothing."""
    url = "https://example.org/live"
    first = page(crawl_id, url, body="v1", change="new")
    same = page(
        crawl_id, url, fetched_at=T0 + 60, body=None, title=None, status=304, change="unchanged"
    )
    await sink.write([first], [])
    for _ in range(2):  # the second time: a replay
        await sink.write([same], [])
        assert await sink.get_page(crawl_id, url) == msgspec.structs.replace(
            first, change="unchanged"
        )
    changed = page(crawl_id, url, fetched_at=T0 + 120, body="v2", change="changed")
    await sink.write([changed], [])
    assert await sink.get_page(crawl_id, url) == changed
    gone = page(crawl_id, url, fetched_at=T0 + 180, body=None, status=410, change="gone")
    await sink.write([gone, same], [])  # an older check arriving late changes nothing
    assert await sink.get_page(crawl_id, url) == msgspec.structs.replace(
        changed, change="gone", status=410
    )


async def test_a_revisits_checks_and_copies_give_one_page_in_any_order(
    sink: Sink, crawl_id: str
) -> None:
    """The newest copy, with the newest check's ``change`` and the newest gone check's
    ``status``, whatever the order (a replay, partitions read at different speeds); a check
    whose copy never came shows no page."""
    first = page(crawl_id, "", body="v1", change="new")
    same = page(crawl_id, "", fetched_at=T0 + 60, body=None, title=None, status=304,
                change="unchanged")  # fmt: skip
    changed = page(crawl_id, "", fetched_at=T0 + 120, body="v2", change="changed")
    late = msgspec.structs.replace(same, fetched_at=T0 + 150)
    gone = page(crawl_id, "", fetched_at=T0 + 180, body=None, status=410, change="gone")
    cases = [
        ([first, same, changed], changed),  # the check is older than the copy
        ([first, changed, late, gone], msgspec.structs.replace(changed, change="gone", status=410)),
    ]
    for n, (records, expected) in enumerate(cases):
        for i, order in enumerate(itertools.permutations(records)):
            url = f"https://example.org/order/{n}/{i}"
            for record in order:
                await sink.write([msgspec.structs.replace(record, url=url, final_url=url)], [])
            got = await sink.get_page(crawl_id, url)
            assert got == msgspec.structs.replace(expected, url=url, final_url=url), order
    check_only = msgspec.structs.replace(late, url="https://example.org/lost")
    await sink.write([check_only], [])
    assert await sink.get_page(crawl_id, check_only.url) is None


def version(crawl_id: str, url: str, i: int, **fields: object) -> Page:
    """The i-th version of ``url``: fetched i minutes after T0, new at first, then changed."""
    change = "new" if i == 0 else "changed"
    return page(crawl_id, url, fetched_at=T0 + 60 * i, body_sha256=f"{i:064x}", change=change,
                **fields)  # fmt: skip


def newest(crawl_id: str, url: str, *indexes: int) -> list[Version]:
    return [version_of(version(crawl_id, url, i)) for i in indexes]


async def test_the_newest_n_versions_are_kept_in_any_order_and_replay(
    sink: Sink, crawl_id: str
) -> None:
    """N = 2 and four versions, written in every order (one per write, and all in one write),
    then replayed in part and whole: the two newest remain, the latest copy is the newest."""
    keep = {crawl_id: 2}
    orders = [*itertools.permutations(range(4)), (0, 1, 2, 3)]
    for n, order in enumerate(orders):
        url = f"https://example.org/v/{n}"
        records = [version(crawl_id, url, i) for i in order]
        if n < len(orders) - 1:
            for record in records:
                await sink.write([record], [], keep)
        else:
            await sink.write(records, [], keep)  # one write, one URL's four versions
        assert await sink.versions(crawl_id, url) == newest(crawl_id, url, 3, 2), order
        for replay in (records[::-1], records[:2], records[1:3], records):
            await sink.write(replay, [], keep)
            assert await sink.versions(crawl_id, url) == newest(crawl_id, url, 3, 2), replay
        assert await sink.get_page(crawl_id, url) == version(crawl_id, url, 3)


async def test_only_new_and_changed_pages_of_crawls_that_keep_versions_add_one(
    sink: Sink, crawl_id: str
) -> None:
    url, other = "https://example.org/kept", "https://example.org/none"
    first = version(crawl_id, url, 0)
    same = page(crawl_id, url, fetched_at=T0 + 60, body=None, status=304, change="unchanged")
    gone = page(crawl_id, url, fetched_at=T0 + 120, status=410, change="gone")
    await sink.write([first, same, gone], [], {crawl_id: 3})
    assert await sink.versions(crawl_id, url) == [version_of(first)]
    await sink.write([version(crawl_id, other, 0)], [], {crawl_id: 0})
    await sink.write([version(crawl_id, other, 1)], [])
    assert await sink.versions(crawl_id, other) == []
    assert await sink.get_page(crawl_id, other) == version(crawl_id, other, 1)
    v1 = page(crawl_id, "https://example.org/v1", change=None)  # a record before continuous crawls
    await sink.write([v1], [], {crawl_id: 3})
    assert await sink.versions(crawl_id, v1.url) == []


async def test_the_sink_agent_names_the_crawls_that_keep_versions(crawl_id: str) -> None:
    """``write_batch`` hands the sink each crawl's ``keep_versions``, as the spec says."""
    keeps, plain = crawl_id, crawl_id + "-plain"
    events = [
        ("p.pages", 0, i, encode(version(cid, f"https://example.org/{cid}", i)))
        for i, cid in enumerate([keeps, keeps, plain])
    ]
    sink = MemorySink()
    await write_batch(sink, events, Metrics(), keep_versions=lambda cid: 1 if cid == keeps else 0)
    assert await sink.versions(keeps, f"https://example.org/{keeps}") == newest(
        keeps, f"https://example.org/{keeps}", 1
    )
    assert await sink.versions(plain, f"https://example.org/{plain}") == []


async def test_older_replay_does_not_overwrite(sink: Sink, crawl_id: str) -> None:
    url = "https://example.org/page"
    old = page(crawl_id, url)
    new = page(crawl_id, url, fetched_at=T0 + 1e-6, title="second")  # 1 microsecond later
    newer_state = status(crawl_id, url, TerminalState.FETCHED, at=T0 + 1)
    await sink.write([new], [newer_state])
    await sink.write([old], [status(crawl_id, url, TerminalState.FAILED, last_error="x")])
    assert await sink.get_page(crawl_id, url) == new
    assert await sink.get_status(crawl_id, "https://example.org", url) == newer_state


async def test_counts_per_state(sink: Sink, crawl_id: str) -> None:
    other = crawl_id + "-other"
    plan = {TerminalState.FETCHED: 7, TerminalState.ROBOTS_DENIED: 2, TerminalState.FAILED: 1}
    statuses = [
        status(crawl_id, f"https://example.org/{state}/{i}", state, at=T0 + i)
        for state, n in plan.items()
        for i in range(n)
    ]
    await sink.write(
        [], [*statuses, status(other, "https://example.org/", TerminalState.CANCELLED)]
    )
    counts = await sink.counts(crawl_id)
    expected = {state.value: plan.get(state, 0) for state in TerminalState}
    assert counts == {crawl_id: expected}
    everything = await sink.counts(None)
    assert everything[crawl_id] == expected
    assert everything[other]["cancelled"] == 1
    assert await sink.counts("no-such-crawl") == {
        "no-such-crawl": {state.value: 0 for state in TerminalState}
    }
    stats = (await sink.stats(crawl_id))[crawl_id]
    assert stats.first_fetched_at == T0 and stats.last_fetched_at == T0 + 6
    assert stats.pages_per_s() == pytest.approx(7 / 6, abs=1e-3)


async def test_spec_latest_wins_and_created_at_is_first(sink: Sink, crawl_id: str) -> None:
    running = CrawlPolicy(crawl_id=crawl_id, seeds=("https://example.org/",))
    paused = msgspec.structs.replace(running, state="paused")
    await sink.write_spec(running, at=T0)
    await sink.write_spec(paused, at=T0 + 10)
    await sink.write_spec(running, at=T0)  # replay of the older message
    assert await sink.get_spec(crawl_id) == (paused, T0)
    assert await sink.get_spec("no-such-crawl") is None


async def test_many_rows_with_bounded_concurrency(sink: Sink, crawl_id: str) -> None:
    pages = [page(crawl_id, f"https://example.org/n/{i}", fetched_at=T0 + i) for i in range(300)]
    await sink.write(pages, [status(crawl_id, p.url, TerminalState.FETCHED) for p in pages])
    assert (await sink.counts(crawl_id))[crawl_id]["fetched"] == 300


# --- CassandraSink only ---------------------------------------------------------------------


async def test_retries_then_backpressure_never_drops(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load_settings(cassandra_hosts="127.0.0.1:1")
    sink = CassandraSink(settings.cassandra_config(), retries=2, backoff=0.01)
    sink._prepared = {"status": _Prepared(), "origin": _Prepared()}
    calls: list[int] = []

    async def failing(group: list[object]) -> list[tuple[bool, object]]:
        calls.append(len(group))
        return [(False, OperationTimedOut("slow")) for _ in group]

    # Each state too big to share a request (the sink's bounds before ``start``: the
    # defaults): two requests.
    error = "x" * DEFAULT_BOUNDS.nbytes
    states = [
        status("c", f"https://example.org/{i}", TerminalState.FAILED, last_error=error)
        for i in range(2)
    ]
    monkeypatch.setattr(sink, "_execute", failing)
    with pytest.raises(SinkBackpressure) as raised:
        await sink.write([], states[:1])
    assert raised.value.retry_after > 0
    assert calls == [2, 2, 2]  # the state and the crawl's origin, each tried 1 + 2 times

    answers = iter([[(False, OperationTimedOut("slow")), (True, None)], [(True, None)]])
    retried: list[int] = []

    async def flaky(group: list[object]) -> list[tuple[bool, object]]:
        retried.append(len(group))
        return next(answers)

    monkeypatch.setattr(sink, "_execute", flaky)
    sink._known_origins[("c", "https://example.org")] = None
    await sink.write([], states)
    assert retried == [2, 1]  # only the failed request is retried


@pytest.mark.cassandra
@pytest.mark.integration
async def test_few_requests_in_unlogged_batches_within_cassandras_warning_bounds(
    cassandra_hosts: str, cassandra_keyspace: str, crawl_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = load_settings(cassandra_hosts=cassandra_hosts, cassandra_keyspace=cassandra_keyspace)
    create_schema(settings.cassandra_config())
    cluster, session = connect(settings.cassandra_config())
    try:  # what the node says, read apart from the sink
        rows = session.execute(
            f"SELECT name, value FROM system_views.settings WHERE name IN {SETTINGS}"
        )
        told = node_bounds({row.name: row.value for row in rows})[0]
    finally:
        cluster.shutdown()
    sink = CassandraSink(settings.cassandra_config())
    await sink.start()
    assert sink.bounds == told  # the cluster's warnings, not the defaults
    groups: list[list[tuple[object, object]]] = []
    results: list[tuple[bool, Any]] = []
    execute = sink._execute

    async def counting(calls: list[tuple[object, object]]) -> list[tuple[bool, object]]:
        groups.append(calls)
        found = await execute(calls)
        results.extend(found)
        return found

    monkeypatch.setattr(sink, "_execute", counting)
    tables = {sink._prepared[name].query_id: name for name in ("page", "status", "origin")}
    links = tuple(Outlink(f"https://example.org/l/{i}", f"link {i}") for i in range(30))
    try:
        pages = [page(crawl_id, f"https://example.org/s/{i}", links=links) for i in range(300)]
        statuses = [status(crawl_id, p.url, TerminalState.FETCHED) for p in pages]
        out = [status(crawl_id, f"https://x{i}.example/{i}", TerminalState.OUT_OF_SCOPE,
                      origin=f"https://x{i}.example") for i in range(100)]  # fmt: skip
        await sink.write(pages, statuses + out)
        assert len(groups) == 1  # one group: one event-loop wake-up for the whole write
        requests = groups[0]
        # pages a batch holds (each its own partition)
        per_request = max(min(told.nbytes // sink._page_row(pages[0])[2], told.partitions), 1)
        assert len(requests) <= len(pages) // per_request + 12  # the states ride along
        rows, biggest = 0, 0
        for call, _paging in requests:
            if not isinstance(call, BatchStatement):
                rows += 1
                continue
            assert call.batch_type == BatchType.UNLOGGED
            entries = call._statements_and_parameters  # (prepared?, query id, values)
            rows += len(entries)
            # the partition key: (crawl_id, url_hash) in pages, (crawl_id) in crawl_origins,
            # (crawl_id, origin, bucket) in url_status: the first values of each row
            width = {"page": 2, "origin": 1, "status": 3}
            keys = {(tables[q], *v[: width[tables[q]]]) for _p, q, v in entries}
            assert len(keys) <= told.partitions, keys
            biggest = max(biggest, sum(1 for _p, q, _v in entries if tables[q] == "page"))
        assert biggest == per_request  # as many pages a request as the bound lets in
        assert rows == len(pages) + len(statuses) + len(out) + 101  # + the crawl's origins
        # No node warned of a batch (the driver hides server warnings from the log).
        assert [rs.response_future.warnings for ok, rs in results if ok] == [None] * len(results)
        assert (await sink.counts(crawl_id))[crawl_id]["fetched"] == 300
        assert (await sink.get_page(crawl_id, pages[7].url)) == pages[7]
        groups.clear()
        await sink.write([], out)  # origins already written: no crawl_origins statement
        # 100 partitions: as many a request as the bounds let in
        per_state = min(told.nbytes // max(r[2] for r in sink._status_rows(out)), told.partitions)
        assert -(-100 // told.partitions) <= len(groups[0]) <= -(-100 // per_state)
    finally:
        await sink.stop()


@pytest.mark.cassandra
@pytest.mark.integration
def test_batch_bounds_ask_every_node_up_and_fall_back_to_the_defaults(
    cassandra_hosts: str, cassandra_keyspace: str
) -> None:
    settings = load_settings(cassandra_hosts=cassandra_hosts, cassandra_keyspace=cassandra_keyspace)
    cluster, session = connect(settings.cassandra_config())
    try:
        bounds, said = batch_bounds(cluster, session)
        up = [h for h in cluster.metadata.all_hosts() if h.is_up]
        assert said.count("warns over") == len(up) >= 1, said

        class Refusing:  # a node that may not read system_views, or an older Cassandra
            def execute(self, *_args: object, **_kw: object) -> object:
                raise PermissionError("unauthorized")

        assert batch_bounds(cluster, Refusing()) == (
            DEFAULT_BOUNDS,
            "; ".join(f"{h.endpoint}: not read (PermissionError), the defaults" for h in up),
        )  # fmt: skip
    finally:
        cluster.shutdown()
    assert isinstance(bounds, Bounds) and bounds.partitions >= 1 and bounds.nbytes >= 1


class _Prepared:
    def bind(self, row: object) -> object:
        return row


@pytest.mark.cassandra
@pytest.mark.integration
async def test_missing_schema_says_what_to_run(cassandra_hosts: str) -> None:
    settings = load_settings(cassandra_hosts=cassandra_hosts, cassandra_keyspace="no_such_ks")
    with pytest.raises(CrawlError, match="streamcrawl admin create-schema"):
        await CassandraSink(settings.cassandra_config()).start()


async def test_unreachable_cassandra_is_one_clear_error() -> None:
    settings = load_settings(cassandra_hosts="127.0.0.1:1")
    with pytest.raises(CrawlError, match=r"cannot reach Cassandra at 127\.0\.0\.1:1.*HOSTS"):
        await CassandraSink(settings.cassandra_config()).start()


def run_cql(config: CassandraConfig, *statements: tuple[str, tuple[Any, ...]]) -> list[Any]:
    """Run the (CQL, parameters) statements in order; the rows of the last one."""
    cluster, session = connect(config)
    try:
        return [list(session.execute(cql, params)) for cql, params in statements][-1]
    finally:
        cluster.shutdown()


@pytest.fixture
def config(cassandra_hosts: str, cassandra_keyspace: str) -> CassandraConfig:
    return load_settings(
        cassandra_hosts=cassandra_hosts, cassandra_keyspace=cassandra_keyspace
    ).cassandra_config()


@pytest.mark.cassandra
@pytest.mark.integration
async def test_a_pages_links_are_one_cell_of_its_row(
    config: CassandraConfig, crawl_id: str
) -> None:
    """10,000 links: one row, one ``links`` cell (never a row per link), read back whole."""
    create_schema(config)
    links = tuple(Outlink(f"https://example.org/l/{i}", f"link {i}") for i in range(10_000))
    p = page(crawl_id, "https://example.org/big", links=links, links_total=10_000)
    sink = CassandraSink(config)
    await sink.start()
    try:
        await sink.write([p], [])
        assert await sink.get_page(crawl_id, p.url) == p
    finally:
        await sink.stop()
    rows = run_cql(config, (f"SELECT links, links_total FROM {config.keyspace}.pages", ()))
    assert len(rows) == 1 and rows[0].links_total == 10_000
    assert msgspec.json.decode(rows[0].links)[9_999] == {
        "url": "https://example.org/l/9999",
        "text": "link 9999",
    }


@pytest.mark.cassandra
@pytest.mark.integration
async def test_a_pages_data_is_one_json_cell_of_its_row(
    config: CassandraConfig, crawl_id: str
) -> None:
    create_schema(config)
    sink = CassandraSink(config)
    await sink.start()
    try:
        await sink.write([page(crawl_id, "https://example.org/d", data=DATA)], [])
        await sink.write([page(crawl_id, "https://example.org/n")], [])
    finally:
        await sink.stop()
    rows = run_cql(config, (f"SELECT url, data FROM {config.keyspace}.pages", ()))
    cells = {row.url: row.data for row in rows}
    assert msgspec.json.decode(cells["https://example.org/d"]) == DATA
    assert cells["https://example.org/n"] is None


@pytest.mark.cassandra
@pytest.mark.integration
async def test_a_keyspace_of_schema_4_is_refused_until_create_schema_adds_columns(
    config: CassandraConfig, crawl_id: str
) -> None:
    """The tables as schema version 4 made them, and a page row written then: the sink names
    the missing column; after ``admin create-schema`` (twice: idempotent) the old row reads
    with no data and a new one keeps its data."""
    version_5 = ("data text,", "main_text text,", "language text,")
    old_tables = [
        (functools.reduce(lambda s, column: s.replace(column, ""), version_5, s), ())
        for s in schema_statements(config)
        if "(data text, main_text text, language text)" not in s
    ]
    assert len(old_tables) == len(schema_statements(config)) - 1
    url = "https://example.org/old"
    run_cql(
        config,
        *old_tables,
        (
            f"INSERT INTO {config.keyspace}.pages (crawl_id, url_hash, url, final_url, origin, "
            "status, headers, depth, fetched_at, elapsed_ms, body_sha256, body_bytes, outlinks, "
            "noindex, redirects, links) VALUES (%s, %s, %s, %s, 'https://example.org', 200, {}, "
            "0, 1.0, 1.0, 'ab', 3, 2, false, [], '[]')",
            (crawl_id, url_hash(url), url, url),
        ),
    )
    missing = r"lacks tables pages\.data, pages\.main_text, pages\.language: run `streamcrawl admin"
    with pytest.raises(CrawlError, match=missing):
        await CassandraSink(config).start()
    create_schema(config)
    create_schema(config)
    sink = CassandraSink(config)
    await sink.start()
    try:
        old = await sink.get_page(crawl_id, url)
        assert old is not None and old.outlinks == 2 and old.data is None
        new = page(crawl_id, "https://example.org/new", data=DATA)
        await sink.write([new], [])
        assert await sink.get_page(crawl_id, new.url) == new
    finally:
        await sink.stop()


@pytest.mark.cassandra
@pytest.mark.integration
async def test_a_keyspace_of_schema_5_is_refused_until_create_schema_adds_columns_6(
    config: CassandraConfig, crawl_id: str
) -> None:
    """The tables as schema version 5 made them: the sink names the missing columns; after
    ``admin create-schema`` a page keeps its plugin errors and its assets."""
    version_6 = (
        "plugin_errors frozen<list<text>>,", "assets frozen<list<text>>,", "render text,",
        "render_ms double,", "render_error text,", "render_refused int,",
    )  # fmt: skip
    old_tables = [
        (functools.reduce(lambda s, column: s.replace(column, ""), version_6, s), ())
        for s in schema_statements(config)
        if "ADD IF NOT EXISTS (plugin_errors" not in s
    ]
    assert len(old_tables) == len(schema_statements(config)) - 1
    run_cql(config, *old_tables)
    missing = (
        r"lacks tables pages\.plugin_errors, pages\.assets, pages\.render, .*: run `streamcrawl"
    )
    with pytest.raises(CrawlError, match=missing):
        await CassandraSink(config).start()
    create_schema(config)
    sink = CassandraSink(config)
    await sink.start()
    try:
        assets = ("https://example.org/a.css", "https://cdn.example.net/b.png")
        new = page(
            crawl_id, "https://example.org/new", plugin_errors=PLUGIN_ERRORS, assets=assets,
            render="browser", render_ms=812.5, render_refused=3,
        )  # fmt: skip
        await sink.write([new], [])
        assert await sink.get_page(crawl_id, new.url) == new
    finally:
        await sink.stop()


@pytest.mark.cassandra
@pytest.mark.integration
async def test_a_keyspace_of_schema_2_is_refused_until_create_schema_adds_the_links(
    config: CassandraConfig, crawl_id: str
) -> None:
    # the tables as schema version 2 made them, and a page row written then
    old_tables = [
        (s.replace("links text,", "").replace("links_total int,", "").replace(
            "links_truncated boolean,", ""), ())
        for s in schema_statements(config)
        if not s.startswith("ALTER")
    ]  # fmt: skip
    url = "https://example.org/old"
    run_cql(
        config,
        *old_tables,
        (
            f"INSERT INTO {config.keyspace}.pages (crawl_id, url_hash, url, final_url, origin, "
            "status, headers, depth, fetched_at, elapsed_ms, body_sha256, body_bytes, outlinks, "
            "noindex, redirects) VALUES (%s, %s, %s, %s, 'https://example.org', 200, {}, 0, 1.0, "
            "1.0, 'ab', 3, 2, false, [])",
            (crawl_id, url_hash(url), url, url),
        ),
    )
    with pytest.raises(CrawlError, match=r"lacks tables pages\.links.*admin create-schema"):
        await CassandraSink(config).start()
    create_schema(config)
    create_schema(config)  # idempotent
    sink = CassandraSink(config)
    await sink.start()
    try:
        old = await sink.get_page(crawl_id, url)
        assert old is not None and old.outlinks == 2
        assert (old.links, old.links_total, old.links_truncated) == ((), None, False)
    finally:
        await sink.stop()


@pytest.mark.cassandra
@pytest.mark.integration
async def test_a_keyspace_without_page_versions_is_refused_until_create_schema(
    config: CassandraConfig, crawl_id: str
) -> None:
    """The tables of schema 4 before --keep-versions: the sink names the missing table; after
    ``admin create-schema`` a version row holds its digest, status, change and size."""
    run_cql(config, *((s, ()) for s in schema_statements(config) if "page_versions" not in s))
    with pytest.raises(CrawlError, match=r"lacks tables page_versions: .*admin create-schema"):
        await CassandraSink(config).start()
    create_schema(config)
    sink = CassandraSink(config)
    await sink.start()
    try:
        await sink.write([version(crawl_id, "https://example.org/", 0)], [], {crawl_id: 1})
    finally:
        await sink.stop()
    rows = run_cql(config, (f"SELECT * FROM {config.keyspace}.page_versions", ()))
    assert [(r.fetched_at, r.body_sha256, r.status, r.change, r.body_bytes) for r in rows] == [
        (T0, f"{0:064x}", 200, "new", 1234)
    ]
