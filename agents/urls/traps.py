"""Crawl-trap shapes: session ids in queries and paths, and calendars. Pure, no state.

A trap is a server that makes up new URLs without end. Through the Kafka wiring a calendar and
a session-id trap each ran to 367 pages, and in the embedded crawl only the page budget stopped
them; these rules stop them whatever the budget:

- **session ids in a query or path parameter** (``?sid=<token>``, ``;jsessionid=<token>``) are
  REMOVED by the canonicalizer, as Heritrix's ``StripSessionIDs`` does: the same page under a
  new session id is then the same URL, and the dedupe ends the trap. Only a known session name
  with a token of at least ``SESSION_TOKEN`` characters counts, so ``?sid=3`` stays.
- **a session id in a path segment** (``/s/<token>/page``, ASP.NET's ``/(S(<token>))/page``)
  cannot be removed (the path is the resource): such URLs are out of scope, ``trap:session_id``.
- **a calendar page** (a path that ENDS in a date, ``/cal/2031/05``, ``/events/2031-05-01``, or a
  query value that is one, ``?month=2031-05``) for a year more than ``CALENDAR_PAST_YEARS``
  before or ``CALENDAR_FUTURE_YEARS`` after the current one is ``trap:calendar``. A dated
  article (``/2009/05/some-title``) is not a calendar page: its path goes on after the date.
"""

from __future__ import annotations

import re
from typing import Final

SESSION_TOKEN: Final = 16
CALENDAR_PAST_YEARS: Final = 5
CALENDAR_FUTURE_YEARS: Final = 1

_NAMES = r"jsessionid|phpsessid|aspsessionid[a-z]{0,8}|sid|sessid|sessionid|session_id|session"
_TOKEN = rf"[A-Za-z0-9_\-]{{{SESSION_TOKEN},}}"
_SESSION_PARAM = re.compile(rf"(?:{_NAMES})={_TOKEN}", re.IGNORECASE)
_PATH_PARAM = re.compile(rf";(?:{_NAMES})={_TOKEN}", re.IGNORECASE)
_TOKEN_SEGMENT = re.compile(_TOKEN)
_SESSION_SEGMENT = re.compile(rf"\([A-Z]\({_TOKEN}\)\)|(?:{_NAMES})[=_\-]?{_TOKEN}", re.IGNORECASE)
_SESSION_DIR = frozenset({"s", "sid", "sess", "session", "sessions", "sessionid"})
# A date at the very end of a path: /2031/05, /2031/05/01, /2031-05, /20310501 (+ "/").
_PATH_DATE = re.compile(
    r"/((?:19|20|21)\d\d)(?:[-_/.]?(?:0[1-9]|1[0-2]))(?:[-_/.]?(?:0[1-9]|[12]\d|3[01]))?/?\Z"
)
# A query value that is a month or a day (month=2031-05), or a year named as one (year=2031).
_QUERY_DATE = re.compile(
    r"(?:\A|&)(?:(?:year|yr|y)=((?:19|20|21)\d\d)"
    r"|[^=&]*=((?:19|20|21)\d\d)[-_/.]?(?:0[1-9]|1[0-2])(?:[-_/.]?(?:0[1-9]|[12]\d|3[01]))?)"
    r"(?=&|\Z)",
    re.IGNORECASE,
)


def is_session_param(pair: str) -> bool:
    """``name=value`` (one query pair) carries a session id."""
    return _SESSION_PARAM.fullmatch(pair) is not None


def strip_path_sessions(path: str) -> str:
    """``path`` without ``;jsessionid=<token>``-style path parameters."""
    return _PATH_PARAM.sub("", path) if ";" in path else path


def session_in_path(path: str) -> bool:
    """A path segment other than the last one is a session id."""
    segments = [s for s in path.split("/") if s][:-1]
    for i, segment in enumerate(segments):
        if len(segment) < SESSION_TOKEN:
            continue
        if _SESSION_SEGMENT.fullmatch(segment):
            return True
        after_name = i > 0 and segments[i - 1].lower() in _SESSION_DIR
        if after_name and _TOKEN_SEGMENT.fullmatch(segment) and any(c.isdigit() for c in segment):
            return True
    return False


def calendar_out_of_range(path: str, query: str, year: int) -> bool:
    """The URL is a calendar page for a year outside the window around ``year``."""
    years = [m.group(1) or m.group(2) for m in _QUERY_DATE.finditer(query)] if query else []
    # _PATH_DATE ends in a digit, then at most one "/": most paths fail this without a search.
    if path[-2:].rstrip("/")[-1:].isdigit():
        match = _PATH_DATE.search(path)
        if match is not None:
            years.append(match.group(1))
    low, high = year - CALENDAR_PAST_YEARS, year + CALENDAR_FUTURE_YEARS
    return any(not low <= int(y) <= high for y in years)
