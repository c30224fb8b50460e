"""agents.content.sitemap, .feeds and .listings: parsing, limits, nesting, hostile XML."""

from __future__ import annotations

import gzip

from streamcrawl.agents.content import sitemap as sm
from streamcrawl.agents.content.feeds import parse_feed
from streamcrawl.agents.content.listings import listed, robots_sitemaps
from streamcrawl.agents.content.sitemap import Listed, gunzip_capped, parse_sitemap
from streamcrawl.agents.policy.rules import CrawlRules
from streamcrawl.schemas.records import CrawlPolicy, QueueEntry

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
RULES = CrawlRules.from_policy(CrawlPolicy(crawl_id="c", seeds=("http://e.com/",)))


def urlset(n: int) -> bytes:
    rows = "".join(f"<url><loc>http://e.com/{i}</loc></url>" for i in range(n))
    return f"<urlset {NS}>{rows}</urlset>".encode()


def test_urlset_and_index_gzipped_or_not() -> None:
    doc = (
        f"<urlset {NS}><url><loc> http://e.com/a </loc><lastmod>2024-01-02</lastmod></url>"
        "<url><loc></loc></url><url><lastmod>x</lastmod></url></urlset>"
    ).encode()
    expected = [Listed("http://e.com/a", "2024-01-02")]
    assert parse_sitemap(doc).urls == expected
    assert parse_sitemap(gzip.compress(doc)).urls == expected
    index = f"<sitemapindex {NS}><sitemap><loc>http://e.com/s.xml</loc></sitemap></sitemapindex>"
    assert parse_sitemap(index.encode()).sitemaps == [Listed("http://e.com/s.xml", None)]


def test_at_most_50000_urls_per_file() -> None:
    assert sm.MAX_URLS == 50_000
    urls = parse_sitemap(gzip.compress(urlset(50_001))).urls
    assert len(urls) == 50_000 and urls[-1].loc == "http://e.com/49999"


def test_uncompressed_size_is_capped() -> None:
    assert sm.MAX_BYTES == 50 * 1024 * 1024
    bomb = gzip.compress(b"\0" * (8 * 1024 * 1024))  # 8 MiB from 8 KiB
    assert len(gunzip_capped(bomb, cap=1024 * 1024)) == 1024 * 1024
    assert len(gunzip_capped(b"x" * 100, cap=10)) == 10
    truncated = gzip.compress(urlset(100))[:-200]
    assert 0 < len(parse_sitemap(truncated).urls) < 100  # what decompressed before the cut


def test_billion_laughs_and_external_entities_are_refused() -> None:
    laughs = (
        '<?xml version="1.0"?><!DOCTYPE u [<!ENTITY a "aaaaaaaaaa">'
        '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;">]>'
        f"<urlset {NS}><url><loc>http://e.com/&c;</loc></url></urlset>"
    )
    xxe = (
        '<?xml version="1.0"?><!DOCTYPE u [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        f"<urlset {NS}><url><loc>http://e.com/&x;</loc></url></urlset>"
    )
    param = (
        '<?xml version="1.0"?><!DOCTYPE u [<!ENTITY % p SYSTEM "http://127.0.0.1:1/d.dtd">%p;]>'
        f"<urlset {NS}><url><loc>http://e.com/a</loc></url></urlset>"
    )
    for doc in (laughs, xxe, param):
        assert parse_sitemap(doc.encode()) == sm.Sitemap([], [])
        assert parse_feed(doc.encode()) == []


def test_broken_xml_yields_what_came_before() -> None:
    assert [
        u.loc for u in parse_sitemap(b"<urlset><url><loc>http://e.com/a</loc></url><url>").urls
    ] == ["http://e.com/a"]
    assert parse_sitemap(b"\xff\xfe garbage") == sm.Sitemap([], [])


def test_index_nesting_is_bounded() -> None:
    index = f"<sitemapindex {NS}><sitemap><loc>http://e.com/s.xml</loc></sitemap></sitemapindex>"
    for depth, children in ((0, 1), (sm.MAX_NESTING - 1, 1), (sm.MAX_NESTING, 0)):
        entry = QueueEntry(crawl_id="c", url="http://e.com/i.xml", depth=depth, kind="sitemap")
        batches = listed(RULES, entry, index.encode(), entry.url)
        assert sum(len(b.urls) for b in batches) == children


def test_listed_urls_carry_kind_depth_lastmod_and_stay_within_max_depth() -> None:
    doc = f"<urlset {NS}><url><loc>/rel</loc><lastmod>2020</lastmod></url></urlset>".encode()
    entry = QueueEntry(crawl_id="c", url="http://e.com/s.xml", depth=0, kind="sitemap")
    (batch,) = listed(RULES, entry, doc, entry.url)
    (ref,) = batch.urls
    assert (ref.url, ref.kind, ref.depth, ref.lastmod) == ("http://e.com/rel", "page", 1, "2020")
    shallow = CrawlRules.from_policy(CrawlPolicy(crawl_id="c", max_depth=0))
    assert listed(shallow, entry, doc, entry.url) == []


def test_robots_sitemaps_unless_off() -> None:
    body = "User-agent: *\nSitemap: http://e.com/a.xml\nSitemap: /rel.xml\nSitemap: ftp://x/\n"
    (batch,) = robots_sitemaps(RULES, "c", "http://e.com", 200, body)
    assert [(r.url, r.kind, r.depth) for r in batch.urls] == [
        ("http://e.com/a.xml", "sitemap", 0),
        ("http://e.com/rel.xml", "sitemap", 0),
    ]
    off = CrawlRules.from_policy(CrawlPolicy(crawl_id="c", sitemaps=False))
    assert robots_sitemaps(off, "c", "http://e.com", 200, body) == []
    assert robots_sitemaps(RULES, "c", "http://e.com", 404, None) == []


def test_rss_and_atom_entry_links() -> None:
    rss = (
        "<rss version='2.0'><channel><link>http://e.com/</link>"
        "<item><link>http://e.com/1</link></item>"
        "<item><guid>http://e.com/2</guid></item>"
        "<item><guid isPermaLink='false'>tag:x</guid></item></channel></rss>"
    )
    atom = (
        "<feed xmlns='http://www.w3.org/2005/Atom'><link href='/self'/>"
        "<entry><link rel='edit' href='/e'/><link href='/3'/></entry>"
        "<entry><link rel='alternate' href='http://e.com/4'/></entry></feed>"
    )
    assert parse_feed(rss.encode()) == ["http://e.com/1", "http://e.com/2"]
    assert parse_feed(atom.encode()) == ["/3", "http://e.com/4"]
