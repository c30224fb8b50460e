"""The pure parts of ``admin reshard``: where an entry goes at a new partition count, the
counts merged so every sum holds, the manifest's checksums."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from streamcrawl.agents.frontier.frontier import Frontier
from streamcrawl.agents.frontier.queue import segment_key
from streamcrawl.agents.frontier.records import origin_key, seen_key
from streamcrawl.agents.frontier.store import Changes
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.agents.stream.counts import (
    MAX_CRAWL_ERRORS,
    CrawlCounts,
    PartitionCounts,
    SlowOrigin,
)
from streamcrawl.agents.stream.tables import TableStore, partition_for
from streamcrawl.schemas.records import CrawlPolicy, FrontierBatch, Outcome, UrlRef
from streamcrawl.topology.admin.reshard import layout, manifest, tally

ORIGINS = [f"http://o{i}.test" for i in range(12)]
# Per origin: 140 admitted, the first 70 fetched: segment 0 (seqs 0-63) is gone, so those URLs'
# marks have no entry left (they go to every candidate partition); segment 1 is sealed.
QUEUED, FETCHED = 140, 70


def rules() -> CrawlRules:
    return CrawlRules.from_policy(
        CrawlPolicy(crawl_id="c", seeds=tuple(o + "/" for o in ORIGINS), delay=1.0)
    )


def url(origin: str, i: int) -> str:
    return f"{origin}/p{i}"


def old_tables(count: int) -> dict[int, layout.Tables]:
    """Old partition -> its tables after each origin admitted QUEUED URLs (marks naming their
    event) and fetched the first FETCHED of them."""
    found: dict[int, layout.Tables] = {}
    frontier, crawl = Frontier(clock=lambda: 50.0, jitter=lambda: 0.5), rules()
    for origin in ORIGINS:
        p = partition_for(origin, count)
        tables = found.setdefault(p, {t: {} for t in layout.TABLES})
        store = TableStore(tables["seen"], tables["pending"], tables["origins"])
        ch = Changes(store)
        refs = tuple(UrlRef(url(origin, i), 1) for i in range(QUEUED))
        source = f"t.frontier/{p}@7".encode()
        frontier.admit(ch, FrontierBatch(crawl_id="c", origin=origin, urls=refs), crawl,
                       budget=None, source=source)  # fmt: skip
        ch.commit()
        for seq in range(FETCHED):
            ch = Changes(store)
            done = Outcome(crawl_id="c", origin=origin, kind="page", seq=seq,
                           url=url(origin, seq), state="fetched", started_at=1.0,
                           finished_at=1.1, status=200)  # fmt: skip
            frontier.apply(ch, done, crawl)
            ch.commit()
    return found


@pytest.mark.parametrize(("old", "new"), [(3, 6), (6, 3), (3, 4), (4, 4 * 5), (5, 1)])
def test_candidates_are_exactly_the_partitions_an_origin_can_move_to(old: int, new: int) -> None:
    rng = random.Random(old * 100 + new)
    reached: dict[int, set[int]] = {p: set() for p in range(old)}
    for h in (rng.randrange(1 << 31) for _ in range(20_000)):
        assert h % new in layout.candidates(h % old, old, new)
        reached[h % old].add(h % new)
    assert all(reached[p] == set(layout.candidates(p, old, new)) for p in range(old))


@pytest.mark.parametrize(("old", "new"), [(3, 6), (6, 3), (3, 4)])
def test_every_entry_lands_where_its_origin_now_hashes(old: int, new: int) -> None:
    placed: dict[int, dict[str, dict[bytes, bytes]]] = {}
    for p, tables in old_tables(old).items():
        for e in layout.place(tables, p, old, new):
            placed.setdefault(e.partition, {t: {} for t in layout.TABLES})[e.table][e.key] = e.value
    for origin in ORIGINS:
        home = placed[partition_for(origin, new)]
        assert origin_key(origin) in home["origins"]
        assert segment_key(origin, 1) in home["pending"]  # the sealed segment of 64
        for i in range(QUEUED):  # fetched or queued: the owner knows it was seen
            assert seen_key("c", url(origin, i)) in home["seen"]
        elsewhere = [q for q in placed if q != partition_for(origin, new)]
        for q in elsewhere:  # a queued URL's mark follows its origin, and only it
            assert origin_key(origin) not in placed[q]["origins"]
            assert seen_key("c", url(origin, QUEUED - 1)) not in placed[q]["seen"]


def test_a_mark_naming_a_copied_event_is_renamed() -> None:
    events = {b"t.frontier/1@7": b"t.g2.frontier/4@0"}
    queued = b"\x00".join((b"?", b"t.frontier/1@7", b"3", b"1"))
    assert layout.renamed(queued, events) == b"?\x00t.g2.frontier/4@0\x003\x001"
    assert layout.renamed(b"1", events) == b"1"  # a plain depth
    assert layout.renamed(b"R\x000\x005", events) == b"R\x000\x005"  # a lane pointer
    ended = b"\x00".join((b"!", b"t.frontier/2@7", b"out_of_scope", b"host", b"1"))
    assert layout.renamed(ended, events) == ended  # not a copied event


def test_queued_counts_the_urls_not_ended_per_new_partition() -> None:
    total: Counter[str] = Counter()
    for tables in old_tables(3).values():
        for by_crawl in layout.queued(tables, 6).values():
            total.update(by_crawl)
    assert total == {"c": len(ORIGINS) * (QUEUED - FETCHED)}


def counts(p: int, fetched: int, admitted: int, refused: int = 0) -> PartitionCounts:
    crawl = CrawlCounts(states={"fetched": fetched, "out_of_scope": refused}, admitted=admitted,
                        refused=refused, first_fetched_at=float(p), last_fetched_at=10.0 + p,
                        due={"5": p}, slowest=[SlowOrigin(f"http://s{p}", 1.0 + p)])  # fmt: skip
    return PartitionCounts(partition=p, offsets={"frontier": 9}, crawls={"c": crawl})


@pytest.mark.parametrize(("old", "new"), [(3, 6), (6, 3), (3, 4)])
def test_merged_counts_keep_every_sum_and_each_partition_reads_its_queue(
    old: int, new: int
) -> None:
    before = {p: counts(p, fetched=10 * p, admitted=10 * p + 5, refused=p) for p in range(old)}
    queued: dict[int, Counter[str]] = {q: Counter({"c": 1 + q % 2}) for q in range(new)}
    # each old queue held admitted - (ended - refused) = 5 URLs; the new ones hold them all
    queued[0]["c"] += 5 * old - sum(c["c"] for c in queued.values())
    after = tally.merge(before, new, queued, {2: {"outcomes": 4}})
    crawls = [r.crawls["c"] for r in after.values()]
    assert sum(c.states.get("fetched", 0) for c in crawls) == sum(10 * p for p in range(old))
    assert sum(c.admitted or 0 for c in crawls) == sum(10 * p + 5 for p in range(old))
    assert sum(c.refused for c in crawls) == sum(range(old))
    assert sum(sum(c.due.values()) for c in crawls) == sum(range(old))
    for q, record in after.items():
        c = record.crawls["c"]
        assert c.admitted - (sum(c.states.values()) - c.refused) == queued[q]["c"]
        assert record.partition == q
        assert record.offsets == ({"outcomes": 4} if q == 2 else {})  # new topics: from 0


def test_merged_counts_keep_a_crawls_own_errors_within_the_bound() -> None:
    many = {f"missing_plugin: p{i}": 1 for i in range(MAX_CRAWL_ERRORS)}
    one = CrawlCounts(errors={"missing_plugin: p0": 2})
    merged = tally.add(tally.add(None, one), CrawlCounts(errors=many))
    assert len(merged.errors) == MAX_CRAWL_ERRORS and merged.errors["missing_plugin: p0"] == 3
    more = tally.add(merged, CrawlCounts(errors={"missing_plugin: late": 1}))
    assert "missing_plugin: late" not in more.errors


def test_the_manifest_checksum_ignores_order_and_catches_any_change() -> None:
    tables = old_tables(1)[0]
    expected = manifest.of_tables(2, 0, tables)
    shuffled = {t: dict(reversed(list(rows.items()))) for t, rows in tables.items()}
    assert manifest.differences(expected, manifest.of_tables(2, 0, shuffled)) == []
    assert expected.groups[ORIGINS[0]].entries > QUEUED - FETCHED  # marks, segment, origin
    assert expected.groups[manifest.UNKNOWN].entries == len(ORIGINS) * 64  # segment 0's URLs
    lost = {t: dict(rows) for t, rows in tables.items()}
    lost["pending"].pop(segment_key(ORIGINS[3], 1))
    lines = manifest.differences(expected, manifest.of_tables(2, 0, lost))
    assert lines[0] == "table pending: 11 entries, expected 12"
    assert any(line.startswith(f"{ORIGINS[3]}: ") for line in lines)  # its segment, its marks
    altered = {t: dict(rows) for t, rows in tables.items()}
    altered["seen"][seen_key("c", url(ORIGINS[5], QUEUED - 1))] = b"2"
    assert manifest.differences(expected, manifest.of_tables(2, 0, altered))
    again = manifest.decode(manifest.encode(expected))
    assert again == expected


def test_a_mark_naming_an_event_copied_in_pieces_is_renamed_to_the_piece_where_it_lands() -> None:
    events = {b"t.frontier/1@7#4": b"t.g2.frontier/4@0", b"t.frontier/1@7#5": b"t.g2.frontier/5@3"}
    queued = b"\x00".join((b"?", b"t.frontier/1@7", b"3", b"1"))
    assert layout.renamed(queued, events, 5) == b"?\x00t.g2.frontier/5@3\x003\x001"
    assert layout.renamed(queued, events, 4) == b"?\x00t.g2.frontier/4@0\x003\x001"
    assert layout.renamed(queued, events, 0) == queued  # no piece there: a plain duplicate
