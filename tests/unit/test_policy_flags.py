"""The crawl policy flags of crawl and seed: their defaults are the record's, and every flag
reaches the field it names (topology/cli/options.py builds them from tables)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from streamcrawl.schemas.records import (
    CookiePreset,
    CrawlPolicy,
    Extractor,
    OriginAuth,
    RequestHeader,
)
from streamcrawl.topology.cli.main import build_parser
from streamcrawl.topology.cli.options import policy_from_args

URL = "https://example.org/"
STREAMCRAWL = str(Path(sys.executable).parent / "streamcrawl")


@pytest.mark.parametrize("command", ["crawl", "seed"])
def test_no_flags_give_the_records_defaults(command: str) -> None:
    policy = policy_from_args(build_parser().parse_args([command, URL]), [URL], "c1")
    assert policy == CrawlPolicy(crawl_id="c1", seeds=(URL,))


# Each flag, its value and the field it must change (to something other than the default).
FLAGS = [
    (["--max-pages", "7"], "max_pages", 7),
    (["--max-depth", "3"], "max_depth", 3),
    (["--delay", "0.25"], "delay", 0.25),
    (["--per-origin-concurrency", "4"], "per_origin_concurrency", 4),
    (["--max-crawl-delay", "5"], "max_crawl_delay", 5.0),
    (["--max-body", "1000"], "max_body", 1000),
    (["--timeout", "4"], "timeout", 4.0),
    (["--retries", "0"], "retries", 0),
    (["--max-page-links", "10"], "max_page_links", 10),
    (["--allow-host", "Other.example"], "allow_hosts", ("other.example",)),
    (["--allow-domain", "Example.net"], "allow_domains", ("example.net",)),
    (["--include", "/docs/"], "include", ("/docs/",)),
    (["--exclude", "/tmp/"], "exclude", ("/tmp/",)),
    (["--user-agent", "bot/2"], "user_agent", "bot/2"),
    (["--ignore-robots"], "obey_robots", False),
    (["--ignore-nofollow"], "honor_nofollow", False),
    (["--keep-query-order"], "sort_query", False),
    (["--fold-trailing-slash"], "fold_trailing_slash", True),
    (["--store-bodies"], "store_bodies", True),
    (["--no-bodies"], "stream_bodies", False),
    (["--follow-canonical"], "follow_canonical", True),
    (["--no-sitemaps"], "sitemaps", False),
    (["--no-feeds"], "feeds", False),
    (["--text"], "main_text", True),
    (["--assets", "all"], "assets", ("css", "js", "images", "fonts", "media")),
    (["--assets", "fonts,css"], "assets", ("css", "fonts")),
    (["--max-assets", "5"], "max_assets", 5),
    (
        ["--asset-hosts", "cdn.example.net,img.example.net"],
        "asset_hosts",
        ("cdn.example.net", "img.example.net"),
    ),
    (["--asset-hosts", "same"], "asset_hosts", ()),
    (["--sitemap", "https://example.org/s.xml"], "sitemap_seeds", ("https://example.org/s.xml",)),
    (["--recrawl-after", "1d"], "recrawl_after", 86400.0),
    (["--recrawl-after", "1d", "--recrawl-min", "1h"], "recrawl_min", 3600.0),
    (["--recrawl-after", "1d", "--recrawl-max", "30d"], "recrawl_max", 30 * 86400.0),
    (["--recrawl-after", "1d", "--recrawl-feed-min", "10m"], "recrawl_feed_min", 600.0),
    (["--recrawl-after", "1d", "--recrawl-mode", "fixed"], "recrawl_mode", "fixed"),
    (["--recrawl-jitter", "0.3"], "recrawl_jitter", 0.3),
    (["--max-fetches-per-hour", "100"], "max_fetches_per_hour", 100),
    (["--header", "X-A: 1"], "headers", (RequestHeader(name="X-A", value="1"),)),
    (["--cookies"], "cookies", True),
    (
        ["--auth-for", "https://example.org", "SITE"],
        "auth",
        (OriginAuth(origin="https://example.org", credential="SITE"),),
    ),
    (["--warc-credentials", "keep"], "warc_credentials", "keep"),
    (["--render", "auto"], "render", "auto"),
    (["--render-include", "/app/"], "render_include", ("/app/",)),
    (
        ["--extract", "price=.price::text"],
        "extract",
        (Extractor(name="price", selector=".price::text"),),
    ),
]


@pytest.mark.parametrize(("flag", "field", "value"), FLAGS, ids=[f[0][0] for f in FLAGS])
def test_each_flag_reaches_its_field(flag: list[str], field: str, value: object) -> None:
    policy = policy_from_args(build_parser().parse_args(["crawl", URL, *flag]), [URL], "c1")
    default = CrawlPolicy(crawl_id="c1", seeds=(URL,))
    assert getattr(policy, field) == value != getattr(default, field)
    changed = {
        f for f in msgspec.structs.asdict(policy) if getattr(policy, f) != getattr(default, f)
    }
    # --timeout also lowers connect_timeout (never above the total); the recrawl bounds and
    # mode come with --recrawl-after.
    assert changed - {"connect_timeout"} - ({"recrawl_after"} - {field}) == {field}


def test_a_cookie_preset_turns_the_jar_on() -> None:
    args = ["crawl", URL, "--cookie-for", "https://example.org", "sid=a1"]
    policy = policy_from_args(build_parser().parse_args(args), [URL], "c1")
    assert policy.cookies is True
    assert policy.cookie_presets == (CookiePreset(origin="https://example.org", cookie="sid=a1"),)


# Fields no flag sets: the record's identity, derived values (connect_timeout) and tuning
# left at the record's defaults. A new field needs a flag tested above, or a place here.
NO_FLAG = {
    "v", "crawl_id", "seeds", "connect_timeout", "max_url_length", "max_path_depth",
    "max_segment_repeats", "strip_params", "max_backoff", "robots_ttl", "robots_error_ttl",
    "honor_noindex", "honor_x_robots_tag", "max_redirects", "content_types", "state",
    "recrawl_at",  # set by `streamcrawl recrawl`, not by a flag of crawl or seed
    "keep_versions",  # seed's own --keep-versions (tests/unit/test_cli_flags.py)
    "warc",  # seed's --warc, crawl's --warc DIR: own flags (tests/unit/test_cli_flags.py)
    "cookie_presets",  # --cookie-for: test_a_cookie_preset_turns_the_jar_on
    "plugins",  # --plugin needs a plugin to name: tests/unit/test_plugins.py
}  # fmt: skip


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--recrawl-min", "1h"], "need --recrawl-after"),
        (["--recrawl-after", "1h", "--recrawl-min", "2h"], "recrawl bounds do not hold"),
        (["--recrawl-after", "1d", "--recrawl-max", "1h"], "recrawl bounds do not hold"),
    ],
)
def test_recrawl_bounds_that_do_not_hold_are_one_clear_error(
    flags: list[str], message: str
) -> None:
    from streamcrawl.agents.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        policy_from_args(build_parser().parse_args(["crawl", URL, *flags]), [URL], "c1")


def test_a_duration_flag_names_its_units() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["crawl", URL, "--recrawl-after", "soon"])


def test_every_flag_is_tested_here() -> None:
    fields = {f.name for f in msgspec.structs.fields(CrawlPolicy)}
    assert fields - NO_FLAG == {field for _, field, _ in FLAGS}


def test_extract_flags_keep_their_order_and_all() -> None:
    flags = ["--extract", "t=title", "--extract", "tags=all:a.tag::attr(href)"]
    policy = policy_from_args(build_parser().parse_args(["seed", URL, *flags]), [URL], "c1")
    assert policy.extract == (
        Extractor(name="t", selector="title"),
        Extractor(name="tags", selector="a.tag::attr(href)", all=True),
    )


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--extract", "t=a", "--extract", "t=b"], "extractor name t is given twice"),
        ([f"--extract=x{i}=p" for i in range(33)], "field extract"),
    ],
)
def test_extract_flags_a_crawl_may_not_have_are_one_clear_error(
    flags: list[str], message: str
) -> None:
    from streamcrawl.agents.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        policy_from_args(build_parser().parse_args(["crawl", URL, *flags]), [URL], "c1")


@pytest.mark.parametrize("command", ["crawl", "seed"])
def test_a_selector_lexbor_cannot_parse_is_one_line_and_exit_2(
    command: str, tmp_path: Path
) -> None:
    """Refused by the argument's type: before anything is crawled or published (``seed``
    is pointed at a port where no broker listens, and never gets to try it)."""
    where = ["--out", str(tmp_path)] if command == "crawl" else ["--kafka-bootstrap", "127.0.0.1:9"]
    proc = subprocess.run(
        [STREAMCRAWL, command, URL, "--extract", "price=.price,,b::text", *where],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "streamcrawl: error: argument --extract: extractor price: selector '.price,,b::text' "
        "is not CSS lexbor parses"
    ]
    assert list(tmp_path.iterdir()) == []
