"""The seed defaults: ``STREAMCRAWL_SEED_*`` (the chart's ``seedDefaults``) give the crawls
``streamcrawl seed`` starts the revisit policy their command line leaves unset; a flag wins, and
a bad value or combination is one clear error. What the chart renders is tests/helm.
"""

from __future__ import annotations

from typing import Any

import pytest

from streamcrawl.agents.errors import ConfigError
from streamcrawl.schemas.records import CrawlPolicy
from streamcrawl.topology.admin import topics as admin
from streamcrawl.topology.cli import kafka_commands
from streamcrawl.topology.cli.main import build_parser
from streamcrawl.topology.settings import Settings, load_settings

URL = "http://127.0.0.1:9/"
DAY = 86_400.0


class Handed(Exception):
    """Raised where seed publishes its spec: the test has the policy."""


def published(
    monkeypatch: pytest.MonkeyPatch, *flags: str, settings: Settings | None = None
) -> CrawlPolicy:
    """The policy ``streamcrawl seed URL *flags`` publishes, with ``settings`` (default: from
    the environment)."""
    seen: list[CrawlPolicy] = []

    def publish_control(settings: Any, policy: CrawlPolicy) -> None:
        seen.append(policy)
        raise Handed

    monkeypatch.setattr(admin, "publish_control", publish_control)
    if settings is not None:
        monkeypatch.setattr(kafka_commands, "load_settings", lambda **flags: settings)
    with pytest.raises(Handed):
        kafka_commands.cmd_seed(build_parser().parse_args(["seed", URL, *flags]))
    return seen[0]


def seed_env(monkeypatch: pytest.MonkeyPatch, **values: str) -> None:
    for name, value in values.items():
        monkeypatch.setenv(f"STREAMCRAWL_SEED_{name.upper()}", value)


# --- the settings ------------------------------------------------------------------------------


def test_the_settings_read_durations_as_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    seed_env(monkeypatch, recrawl_after="1d", recrawl_min="2h", recrawl_max="4w")
    seed_env(monkeypatch, recrawl_mode="fixed", keep_versions="3", warc="true")
    assert load_settings().seed_policy() == {
        "recrawl_after": DAY,
        "recrawl_min": 7200.0,
        "recrawl_max": 28 * DAY,
        "recrawl_mode": "fixed",
        "keep_versions": 3,
        "warc": True,
    }


def test_unset_or_empty_settings_set_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().seed_policy() == {}
    seed_env(monkeypatch, recrawl_after="", recrawl_min=" ", recrawl_mode="", keep_versions="0")
    seed_env(monkeypatch, warc="false")
    assert load_settings().seed_policy() == {}


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"recrawl_after": "soon"}, "SEED_RECRAWL_AFTER: Value error, 'soon' is not a duration"),
        ({"recrawl_min": "10x"}, "SEED_RECRAWL_MIN: Value error, '10x' is not a duration"),
        ({"recrawl_after": "500ms"}, "SEED_RECRAWL_AFTER: .*'500ms' is out of bounds"),
        ({"recrawl_max": "400d"}, "SEED_RECRAWL_MAX: .*'400d' is out of bounds"),
        ({"recrawl_mode": "sometimes"}, "SEED_RECRAWL_MODE: Input should be 'adaptive'"),
        ({"keep_versions": "101"}, "SEED_KEEP_VERSIONS: Input should be less than"),
        ({"keep_versions": "-1"}, "SEED_KEEP_VERSIONS: Input should be greater than"),
        ({"warc": "sometimes"}, "SEED_WARC: Input should be a valid boolean"),
        (
            {"recrawl_after": "1h", "recrawl_min": "2h"},
            r"seed revisit bounds do not hold: need STREAMCRAWL_SEED_RECRAWL_MIN \(7200 s\) <= "
            r"STREAMCRAWL_SEED_RECRAWL_AFTER \(3600 s\)$",
        ),
        ({"recrawl_min": "1d", "recrawl_max": "1h"}, "seed revisit bounds do not hold"),
    ],
)
def test_a_bad_value_is_refused_at_load_in_one_line(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], message: str
) -> None:
    seed_env(monkeypatch, **env)
    with pytest.raises(ConfigError, match=message) as caught:
        load_settings()
    assert "\n" not in str(caught.value)


# --- seed --------------------------------------------------------------------------------------


def test_seed_without_flags_crawls_once_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    policy = published(monkeypatch)
    assert (policy.recrawl_after, policy.recrawl_mode, policy.keep_versions) == (
        None,
        "adaptive",
        0,
    )
    assert not policy.warc  # no captures: the crawl pays no raw payloads on the broker


def test_seed_warc_asks_the_workers_for_captures(monkeypatch: pytest.MonkeyPatch) -> None:
    assert published(monkeypatch, "--warc").warc
    seed_env(monkeypatch, warc="true")  # the chart's seedDefaults.warc
    assert published(monkeypatch).warc


def test_seed_without_flags_gets_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    seed_env(monkeypatch, recrawl_after="1d", recrawl_min="1h", recrawl_max="30d")
    seed_env(monkeypatch, recrawl_mode="fixed", keep_versions="4")
    policy = published(monkeypatch)
    assert (policy.recrawl_after, policy.recrawl_min, policy.recrawl_max) == (
        DAY,
        3600.0,
        30 * DAY,
    )
    assert (policy.recrawl_mode, policy.keep_versions) == ("fixed", 4)


def test_a_flag_wins_over_its_default(monkeypatch: pytest.MonkeyPatch) -> None:
    seed_env(monkeypatch, recrawl_after="1d", recrawl_min="1h", recrawl_max="30d")
    seed_env(monkeypatch, recrawl_mode="fixed", keep_versions="4")
    policy = published(
        monkeypatch, "--recrawl-after", "2d", "--recrawl-max", "60d", "--keep-versions", "7"
    )
    assert (policy.recrawl_after, policy.recrawl_max, policy.keep_versions) == (
        2 * DAY,
        60 * DAY,
        7,
    )
    assert (policy.recrawl_min, policy.recrawl_mode) == (3600.0, "fixed")  # not given: defaults


def test_flags_make_a_crawl_revisit_within_the_default_bounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bounds and mode without a default recrawl-after serve the crawls seeded with one."""
    seed_env(monkeypatch, recrawl_min="1h", recrawl_mode="fixed")
    policy = published(monkeypatch, "--recrawl-after", "6h")
    assert (policy.recrawl_after, policy.recrawl_min, policy.recrawl_mode) == (
        6 * 3600.0,
        3600.0,
        "fixed",
    )


def test_a_crawl_fetched_once_takes_no_revisit_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    seed_env(monkeypatch, recrawl_min="1h", recrawl_max="30d", recrawl_mode="fixed")
    seed_env(monkeypatch, keep_versions="2")
    policy = published(monkeypatch)
    assert (policy.recrawl_after, policy.recrawl_min, policy.recrawl_max) == (None, None, None)
    assert (policy.recrawl_mode, policy.keep_versions) == ("adaptive", 2)


def test_a_flag_a_default_does_not_fit_is_one_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--recrawl-after 1h`` under a default minimum of 6 h: the bounds do not hold, and the
    error names the defaults that took part."""
    seed_env(monkeypatch, recrawl_after="1d", recrawl_min="6h")
    with pytest.raises(ConfigError) as caught:
        published(monkeypatch, "--recrawl-after", "1h")
    message = str(caught.value)
    assert message.startswith("recrawl bounds do not hold: need recrawl-feed-min")
    assert message.endswith(
        "(seed defaults applied: STREAMCRAWL_SEED_RECRAWL_MIN; a flag overrides each)"
    )
    assert "\n" not in message
    # ... and the flag that does fit is published
    policy = published(monkeypatch, "--recrawl-after", "1h", "--recrawl-min", "10m")
    assert (policy.recrawl_after, policy.recrawl_min) == (3600.0, 600.0)
