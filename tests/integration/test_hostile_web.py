"""The hostile web, in both wirings: 0 crashes, bounded memory and nesting, traps bounded by
rules (not by a page budget), and URL states that say what happened (``hostile.py``)."""

from __future__ import annotations

import collections
import datetime
import re
from pathlib import Path

import pytest

from streamcrawl.agents.urls.traps import CALENDAR_FUTURE_YEARS, CALENDAR_PAST_YEARS
from streamcrawl.schemas.records import CrawlPolicy
from tests.httpserver import RecordingServer
from tests.integration import hostile
from tests.wirings import WIRINGS, State, crawl

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RSS_GROWTH_MB = 300  # 4 bombs of 200 MiB and 8 MiB pages: bounded by max_body, not the bombs


def _reset_peak_rss() -> None:
    with open("/proc/self/clear_refs", "w") as fh:  # "5": reset the peak RSS (VmHWM)
        fh.write("5")


def _rss_kb(field: str) -> int:
    status = Path("/proc/self/status").read_text()
    match = re.search(rf"^{field}:\s+(\d+) kB", status, re.MULTILINE)
    assert match is not None
    return int(match.group(1))


def _paths(states: dict[str, State], srv: RecordingServer) -> dict[str, State]:
    return {u[len(srv.origin) :]: s for u, s in states.items() if u.startswith(srv.origin + "/")}


@pytest.mark.parametrize("wiring", WIRINGS)
async def test_the_hostile_web(wiring: str, tmp_path: Path) -> None:
    today = datetime.date.today()
    async with (
        RecordingServer(hostile.main_routes(today)) as main,
        RecordingServer(hostile.big_robots_routes()) as big,
        RecordingServer(hostile.loop_robots_routes()) as loop,
    ):
        policy = CrawlPolicy(
            crawl_id="hostile",
            seeds=(main.url("/"), big.url("/"), loop.url("/")),
            delay=0.0,
            retries=1,
            timeout=hostile.TIMEOUT,
            max_body=hostile.MAX_BODY,
        )
        before = _rss_kb("VmRSS")
        _reset_peak_rss()
        states = await crawl(wiring, policy, tmp_path, timeout=240)
        grew_mb = (_rss_kb("VmHWM") - before) / 1024
    print(f"{wiring}: peak RSS growth {grew_mb:.0f} MB")  # the figure, with -s
    assert grew_mb < RSS_GROWTH_MB, grew_mb
    m = _paths(states, main)

    def state(path: str) -> tuple[str, str | None]:
        s = m[path]
        return s.state, (s.last_error or "").partition(":")[0] or None

    assert state("/") == ("fetched", None)
    # Traps, bounded by rules: calendars by a window of years, session ids (query: removed,
    # so one URL; path: refused), repeated segments.
    calendar = {p: s for p, s in m.items() if p.startswith("/cal/")}
    fetched = [p for p, s in calendar.items() if s.state == "fetched"]
    assert len(fetched) <= (CALENDAR_PAST_YEARS + CALENDAR_FUTURE_YEARS + 1) * 12
    assert {s.last_error for p, s in calendar.items() if s.state != "fetched"} == {"trap:calendar"}
    assert len(calendar) - len(fetched) == 2  # one step past each end of the window
    assert state("/sess") == state("/sess/b") == ("fetched", None)
    assert len([p for p in main.paths() if p.startswith("/sess")]) == 2
    sessions = [s for p, s in m.items() if p.startswith("/s/")]
    assert [s.last_error for s in sessions] == ["trap:session_id"]
    assert not [p for p in main.paths() if p.startswith("/s/")]
    assert state("/rep/a/a/") == ("fetched", None)
    assert m["/rep/a/a/a/"].last_error == "trap:repeated_segment"
    # Decode bombs, the drip, malformed responses, redirects to other schemes.
    for bomb in ("gzip", "deflate", "br", "nested"):
        assert state(f"/bomb/{bomb}") == ("too_large", None), bomb
    assert state("/drip") == ("failed", "timeout") and m["/drip"].attempts == 2
    assert state("/header-line") == ("failed", "bad_response")
    assert state("/headers") == ("fetched", None)  # 64 headers of 1 KiB each
    for target in ("ftp", "javascript", "file"):
        assert state(f"/to-{target}") == ("failed", "bad_redirect"), target
    # Deep nesting is cut (the link after it is never seen), NULs and bad UTF-8 parse.
    assert state("/deep") == ("fetched", None) and "/after-deep" not in m
    assert state("/nul") == state("/after-nul") == ("fetched", None)
    # 100,000 links: every one of them gets its state (out of scope: another host).
    assert state("/links") == ("fetched", None)
    elsewhere = [s for u, s in states.items() if u.startswith(hostile.ELSEWHERE)]
    assert len(elsewhere) == hostile.LINKS
    assert {(s.state, s.last_error) for s in elsewhere} == {("out_of_scope", "host")}
    # robots.txt of 600 KiB: the rule in its first 500 KiB holds, the one after is ignored;
    # robots.txt redirects in a loop: unavailable, everything allowed.
    b = _paths(states, big)
    assert (b["/private"].state, b["/late"].state) == ("robots_denied", "fetched")
    assert _paths(states, loop)["/page"].state == "fetched"
    # Nothing looped: no URL was requested more often than its attempts.
    requests = collections.Counter(main.paths())
    for path, s in m.items():
        if not path.startswith("/sess"):
            assert requests[path] <= max(1, s.attempts), path
