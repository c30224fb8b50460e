"""Outcomes the tests feed the frontier: a fetched page of a dispatch, a robots.txt fetched or
unreachable."""

from __future__ import annotations

from typing import Any

from streamcrawl.agents.frontier.scheduler import ROBOTS_SEQ, Dispatch
from streamcrawl.schemas.records import Outcome


def page_fetched(d: Dispatch, started: float = 0.0, finished: float | None = None) -> Outcome:
    """The ``fetched`` outcome of page dispatch ``d`` (crawl ``c``); ``finished`` defaults to
    ``started``."""
    assert d.entry is not None
    return Outcome(
        crawl_id="c",
        origin=d.origin,
        kind="page",
        seq=d.seq,
        url=d.entry.url,
        state="fetched",
        started_at=started,
        finished_at=started if finished is None else finished,
    )


def robots_unreachable(origin: str, finished: float) -> Outcome:
    """A robots.txt of crawl ``c`` that could not be fetched (a retry, no status)."""
    return _robots(origin, "retry", finished - 0.1, finished)


def robots_fetched(origin: str, body: str, started: float, finished: float) -> Outcome:
    """A robots.txt of crawl ``c`` answered 200 with ``body``."""
    return _robots(origin, "fetched", started, finished, robots_status=200, robots_body=body)


def _robots(origin: str, state: str, started: float, finished: float, **fields: Any) -> Outcome:
    return Outcome(
        crawl_id="c",
        origin=origin,
        kind="robots",
        seq=ROBOTS_SEQ,
        url=origin + "/robots.txt",
        state=state,
        started_at=started,
        finished_at=finished,
        **fields,
    )
