"""Scope patterns run on RE2: catastrophic-backtracking patterns cannot hang a worker, and the
patterns RE2 cannot take are refused with a clear error (CLI, control topic, Scope)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from streamcrawl.agents.errors import ConfigError
from streamcrawl.agents.stream.control import SharedView
from streamcrawl.agents.stream.metrics import Metrics
from streamcrawl.agents.urls.patterns import compile_pattern
from streamcrawl.agents.urls.scope import Scope
from streamcrawl.schemas.records import CrawlPolicy
from streamcrawl.topology.worker.internals import refresh_metadata

STREAMCRAWL = str(Path(sys.executable).parent / "streamcrawl")
SEED = "https://example.org/"

# Each takes exponential time in a backtracking engine (Python's re) on the URL below: the
# first alone, at 2,000 characters, would not finish in the age of the universe.
BOMBS = [r"(a+)+$", r"(a|aa)+$", r"(a|a?)+b", r"^(([a-z])+.)+[A-Z]([a-z])+$", r"(.*a){12}$"]
HOSTILE_URL = "https://example.org/" + "a" * 2000 + "!"


# Not a speed measurement (those live in bench/): a hang guard. With a backtracking engine this
# test never ends and the timeout fails it.
@pytest.mark.timeout(30)
@pytest.mark.parametrize("bomb", BOMBS)
def test_catastrophic_backtracking_patterns_finish_at_once(bomb: str) -> None:
    scope = Scope.from_policy(CrawlPolicy(crawl_id="c", seeds=(SEED,), exclude=(bomb,)))
    for _ in range(100):  # every URL of a crawl is checked: not one slow match, many
        assert scope.check(HOSTILE_URL, 1) is None  # no match: not excluded
    include = Scope.from_policy(CrawlPolicy(crawl_id="c", seeds=(SEED,), include=(bomb,)))
    assert include.check(HOSTILE_URL, 1) == "include"


def test_everyday_python_syntax_keeps_working() -> None:
    url = "https://example.org/Blog/2024/post.html?page=2"
    for pattern in (
        r"(?i)/blog/",
        r"/(?P<year>\d{4})/",
        r"\.html(\?|$)",
        r"^https://",
        r"[?&]page=",
    ):
        assert compile_pattern(pattern).search(url) is not None, pattern
    assert compile_pattern(r"\.pdf$").search(url) is None


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        (r"/(a)\1/", "is not supported: patterns run on RE2"),
        (r"/(?=x)", "is not supported: patterns run on RE2"),
        (r"(?<!a)b", "is not supported: patterns run on RE2"),
        ("(", "is not a valid regex: missing \\)"),
    ],
)
def test_patterns_re2_cannot_take_are_refused(pattern: str, why: str) -> None:
    with pytest.raises(ConfigError, match=f"^include pattern .* {why}"):
        Scope.from_policy(CrawlPolicy(crawl_id="c", seeds=(SEED,), include=(pattern,)))


def test_cli_refuses_an_unsupported_pattern_in_one_line_with_exit_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        [STREAMCRAWL, "crawl", SEED, "--exclude", r"(x)\1", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "streamcrawl: error: argument --exclude: pattern '(x)\\\\1' is not supported: patterns "
        "run on RE2, in linear time, which has no backreferences or look-around "
        "(invalid escape sequence: \\1)"
    ]  # RE2's own log line is silenced: one line
    assert not (tmp_path / "urls.jsonl").exists()


def test_the_worker_refuses_a_spec_with_an_unsupported_pattern(
    caplog: pytest.LogCaptureFixture,
) -> None:
    view = SharedView(None, "p.control", "p.budget", Metrics(), refresh_metadata=refresh_metadata)
    caplog.set_level(logging.WARNING, "streamcrawl.agents.stream.control")
    spec = {"v": 2, "crawl_id": "c1", "seeds": [SEED], "include": [r"(?=/blog/)"]}
    assert not view._apply("p.control", 0, 0, b"c1", json.dumps(spec).encode())
    assert "c1" not in view.policies
    (refused,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "'c1'" in refused.getMessage() and "is not supported" in refused.getMessage()


def test_a_pattern_set_matches_when_any_pattern_does() -> None:
    from streamcrawl.agents.urls.patterns import PatternSet, compile_patterns

    either = PatternSet((r"/blog/", r"(?i)\.PDF$"))
    assert either.search("https://example.org/blog/x")
    assert either.search("https://example.org/a.pdf")
    assert not either.search("https://example.org/shop/")
    assert compile_patterns(()) == ()
    with pytest.raises(ConfigError, match=r"^exclude pattern '\(\?!x\)' is not supported"):
        compile_patterns(("/ok/", "(?!x)"), "exclude pattern")
