"""The discovery flags of crawl and seed (sitemaps, feeds) reach the crawl spec."""

from __future__ import annotations

import pytest

from streamcrawl.agents.errors import ConfigError, InvalidURL
from streamcrawl.topology.cli.main import build_parser
from streamcrawl.topology.cli.options import policy_from_args

URL = "https://example.org/"


@pytest.mark.parametrize("command", ["crawl", "seed"])
def test_discovery_flags(command: str) -> None:
    args = build_parser().parse_args(
        [
            command,
            URL,
            "--sitemap",
            "HTTPS://Example.org/s.xml#x",
            "--no-feeds",
            "--follow-canonical",
        ]
    )
    policy = policy_from_args(args, args.urls, "c1")
    assert policy.sitemap_seeds == ("https://example.org/s.xml",)
    assert policy.sitemaps and not policy.feeds and policy.follow_canonical
    defaults = policy_from_args(build_parser().parse_args([command, URL]), [URL], "c1")
    assert defaults.sitemaps and defaults.feeds and not defaults.follow_canonical
    off = build_parser().parse_args([command, URL, "--no-sitemaps"])
    assert not policy_from_args(off, [URL], "c1").sitemaps


def test_a_sitemap_alone_is_enough_and_nothing_at_all_is_an_error() -> None:
    args = build_parser().parse_args(["crawl", "--sitemap", URL + "s.xml"])
    assert policy_from_args(args, args.urls, "c1").seeds == ()
    with pytest.raises(ConfigError, match=r"URL to crawl .* is required"):
        policy_from_args(build_parser().parse_args(["crawl"]), [], "c1")
    both = build_parser().parse_args(["crawl", "--sitemap", URL, "--no-sitemaps"])
    with pytest.raises(ConfigError, match="contradict"):
        policy_from_args(both, [], "c1")
    with pytest.raises(InvalidURL, match="sitemap"):
        policy_from_args(build_parser().parse_args(["crawl", "--sitemap", "ftp://x/"]), [], "c1")
