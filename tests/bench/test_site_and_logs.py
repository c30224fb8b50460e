"""Fast checks of the benchmark's tools (bench/README.md): site generator, access-log analysis,
profile summary and nginx config.  No nginx, no network, stdlib only."""

from __future__ import annotations

import hashlib
import re
import sys
from collections import deque
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # `bench` is a top-level folder of the repo, not an installed package
    sys.path.insert(0, str(REPO))

from bench.logs import Hit, analyze, parse_line  # noqa: E402
from bench.profile import summarize  # noqa: E402
from bench.server import render_config  # noqa: E402
from bench.site import (  # noqa: E402
    ROBOTS_TXT,
    SiteSpec,
    expected_urls,
    file_path,
    generate,
    page_path,
    read_expected,
    relative_href,
)

HREF = re.compile(r'<a href="([^"]*)"')


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> SiteSpec:
    return generate(tmp_path_factory.mktemp("site"), origins=3, pages=40, base_port=21000, seed=6)


def _page_file(spec: SiteSpec, url: str) -> Path:
    parts = urlsplit(url)
    path = parts.path
    rel = "index.html" if path == "/" else path.lstrip("/")
    return Path(spec.root) / str(parts.port) / rel


def _hrefs(spec: SiteSpec, url: str) -> list[str]:
    return HREF.findall(_page_file(spec, url).read_text())


def test_expected_set_is_every_page_of_every_origin(site: SiteSpec) -> None:
    expected = read_expected(site.root)
    assert len(expected) == site.expected_pages == 3 * 40
    assert expected == set(expected_urls(3, 40, 21000))
    assert (
        "http://127.0.0.1:21000/" in expected and "http://127.0.0.1:21002/s7/p39.html" in expected
    )
    assert Path(site.root, "seeds.txt").read_text().split() == [
        f"http://127.0.0.1:{p}/" for p in (21000, 21001, 21002)
    ]
    assert SiteSpec.load(site.root) == site


def test_pages_are_about_24kb_with_about_30_links(site: SiteSpec) -> None:
    for url in read_expected(site.root):
        f = _page_file(site, url)
        assert 22_000 <= f.stat().st_size <= 27_000, url
        assert 24 <= len(_hrefs(site, url)) <= 34, url
    assert 26 <= site.links_per_page <= 32


def test_every_kind_of_link_appears(site: SiteSpec) -> None:
    hrefs = [h for url in read_expected(site.root) for h in _hrefs(site, url)]
    assert any("#" in h for h in hrefs)
    assert any("utm_source=" in h for h in hrefs) and any("gclid=" in h for h in hrefs)
    assert any(h.startswith("../") for h in hrefs) and any(
        re.fullmatch(r"p\d+\.html", h) for h in hrefs
    )
    assert any(h.startswith("/s") for h in hrefs) and any(
        h.startswith("http://127.0.0.1:21001/") for h in hrefs
    )
    assert any("/private/" in h and not h.startswith("http") for h in hrefs)
    assert any(h.startswith("http://127.0.0.1:21000/private/") for h in hrefs)
    assert all(
        urlsplit(urljoin("http://127.0.0.1:21000/s1/p1.html", h)).hostname == "127.0.0.1"
        for h in hrefs
    )


def test_robots_disallows_private_on_every_origin(site: SiteSpec) -> None:
    for port in site.ports:
        assert Path(site.root, str(port), "robots.txt").read_text() == ROBOTS_TXT
        assert Path(site.root, str(port), "private", "x0.html").exists()


def test_a_canonicalizing_robots_respecting_crawl_from_one_root_finds_exactly_the_expected_set(
    site: SiteSpec,
) -> None:
    seen = {"http://127.0.0.1:21000/"}
    queue = deque(seen)
    while queue:
        url = queue.popleft()
        for href in _hrefs(site, url):
            parts = urlsplit(urljoin(url, href))
            if parts.path.startswith("/private/"):
                continue
            canonical = f"{parts.scheme}://{parts.netloc}{parts.path}"
            if canonical not in seen:
                seen.add(canonical)
                queue.append(canonical)
    assert seen == read_expected(site.root)


def test_generation_is_deterministic(tmp_path: Path) -> None:
    def digest(root: Path) -> str:
        h = hashlib.sha256()
        for f in sorted(p for p in root.rglob("*") if p.is_file() and p.name != "site.json"):
            h.update(str(f.relative_to(root)).encode() + f.read_bytes())
        return h.hexdigest()

    generate(tmp_path / "a", origins=2, pages=15, seed=3)
    generate(tmp_path / "b", origins=2, pages=15, seed=3)
    generate(tmp_path / "c", origins=2, pages=15, seed=4)
    assert digest(tmp_path / "a") == digest(tmp_path / "b") != digest(tmp_path / "c")


@pytest.mark.parametrize(
    ("src", "dst", "href"),
    [
        ("/", "/s3/p3.html", "s3/p3.html"),
        ("/s3/p3.html", "/s3/p11.html", "p11.html"),
        ("/s3/p3.html", "/s5/p5.html", "../s5/p5.html"),
        ("/s3/p3.html", "/", "../"),
        ("/s3/p3.html", "/private/x1.html", "../private/x1.html"),
    ],
)
def test_relative_href(src: str, dst: str, href: str) -> None:
    assert relative_href(src, dst) == href
    assert urlsplit(urljoin("http://127.0.0.1:1" + src, href)).path == dst


def test_page_paths() -> None:
    assert (page_path(0), file_path(0)) == ("/", "index.html")
    assert (page_path(9), file_path(9)) == ("/s1/p9.html", "s1/p9.html")


def _line(t: float, port: int, uri: str, status: int = 200, rt: float = 0.001) -> str:
    return f"{t:.3f}\t{port}\tGET\t{uri}\t{status}\t24000\t{rt:.3f}\tbench-ua"


def test_parse_line() -> None:
    h = parse_line(_line(100.5, 20001, "/s1/p1.html?utm_source=x", rt=0.5) + "\n")
    assert h == Hit(100.0, 100.5, 20001, "GET", "/s1/p1.html?utm_source=x", 200, 24000, "bench-ua")
    assert h.canonical == "http://127.0.0.1:20001/s1/p1.html"
    assert parse_line("") is None and parse_line("garbage\tline") is None
    assert parse_line("x\t1\tGET\t/\t200\t0\t0\tua") is None


def test_analyze_counts_duplicates_misses_private_and_gaps() -> None:
    expected = {
        "http://127.0.0.1:1/",
        "http://127.0.0.1:1/a.html",
        "http://127.0.0.1:1/b.html",
        "http://127.0.0.1:2/",
    }
    lines = [
        _line(10.0, 1, "/robots.txt"),
        _line(10.1, 1, "/"),
        _line(10.7, 1, "/a.html"),
        _line(10.9, 1, "/a.html?utm_source=x"),  # duplicate via a tracking parameter, 0.2 s gap
        _line(11.5, 1, "/private/x1.html"),
        _line(12.0, 1, "/robots.txt"),  # robots.txt twice
        _line(11.0, 2, "/robots.txt"),
        _line(11.6, 2, "/"),
        _line(12.2, 2, "/nope.html", status=404),
        "not a log line",
    ]
    r = analyze(filter(None, map(parse_line, lines)), expected)
    assert r.requests == 9
    assert (
        r.pages_fetched == 3
        and r.pages_missed == 1
        and r.missed_sample == ["http://127.0.0.1:1/b.html"]
    )
    assert (r.duplicates, r.duplicate_urls) == (1, 1)
    assert (r.robots_requests, r.robots_duplicates) == (3, 1)
    assert r.private_fetched == 1 and r.unexpected == 1
    assert r.statuses == {200: 8, 404: 1}
    assert r.gaps_by_origin[1] == pytest.approx(0.2) and r.gaps_by_origin[2] == pytest.approx(0.6)
    assert r.min_gap == pytest.approx(0.2)
    assert r.origins_under(0.5) == [1] and r.origins_under(0.2) == []
    assert r.span == pytest.approx(12.2 - 9.999)


def test_analyze_empty_log_misses_everything() -> None:
    r = analyze([], {"http://127.0.0.1:1/"})
    assert r.pages_missed == 1 and r.requests == 0 and r.min_gap is None


def test_profile_summary(tmp_path: Path) -> None:
    raw = tmp_path / "p.txt"
    raw.write_text(
        'process 1:"python x";main (x.py:1);parse (lxml/html/__init__.py:10) 30\n'
        'process 1:"python x";main (x.py:1);urlsplit (urllib/parse.py:5) 10\n'
        "main (x.py:2);get_data (<frozen importlib._bootstrap_external>:3) 5\n"
    )
    s = summarize(raw)
    assert s.samples == 45
    assert s.by_package[0] == ("lxml", 30) and ("urllib", 10) in s.by_package
    assert ("import machinery", 5) in s.by_package
    assert s.self_top[0] == ("parse (__init__.py)", 30)
    assert s.inclusive_top[0] == ("main (x.py)", 45)


def test_nginx_config_has_one_server_per_origin_and_the_log_fields(
    site: SiteSpec, tmp_path: Path
) -> None:
    conf = render_config(site, tmp_path)
    for port in site.ports:
        assert f"listen 127.0.0.1:{port};" in conf
    for field in (
        "$msec",
        "$server_port",
        "$request_uri",
        "$status",
        "$http_user_agent",
        "$request_time",
    ):
        assert field in conf
    assert "daemon off;" in conf and f"pid {tmp_path}/nginx.pid;" in conf


def test_report_shows_not_run_rather_than_zeros() -> None:
    from bench.report import main_section

    run = {
        "pages": 100,
        "wall_s": 2.0,
        "span_s": 1.8,
        "cpu_s": 1.0,
        "ms_cpu_per_page": 10.0,
        "peak_rss_mb": 50.0,
        "requests": 101,
        "missed": 0,
        "duplicates": 1,
        "robots_duplicates": 0,
        "private_fetched": 0,
        "unexpected": 0,
    }
    median = {
        **run,
        "pages_per_s": 50.0,
        "pages_per_cpu_s": 100.0,
        "nginx_cpu_s": 0.1,
        "kafka_cpu_s": None,
        "cassandra_cpu_s": None,
        "other_cpu_s": 0.0,
        "private_fetched_max": 0,
    }
    main = {
        "_site": {"origins": 1, "pages": 100, "expected": 100, "links_per_page": 30},
        "scrapy": {"label": "Scrapy", "status": "ok", "runs": [run], "median": median},
        "embedded": {
            "label": "embedded",
            "status": "not run",
            "reason": "streamcrawl not installed",
            "runs": [],
        },
        "kafka-1": {
            "label": "kafka",
            "status": "not run",
            "reason": "NotImplementedError",
            "runs": [],
        },
    }
    text = "\n".join(main_section(main))
    assert "| embedded | **not run**: streamcrawl not installed |" in text
    assert "| kafka | >= 4.8x Scrapy's pages per CPU-second | - | not measured |" in text
    assert "| Scrapy | 1 | 100 / 100 | 2.0 | 50.0 | 1.0 | 10.00 | 100.0 | 1.00 |" in text
