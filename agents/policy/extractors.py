"""A crawl's extractors (``CrawlPolicy.extract``), checked and compiled once per crawl.

Pure: no I/O. ``parse_extractor`` reads the CLI's ``NAME=SELECTOR`` (``NAME=all:SELECTOR``:
every match); ``compile_extractors`` (part of ``CrawlRules``) checks a spec from any producer the
same way, ``ConfigError`` (one line, naming the extractor) for a bad name, a name given twice, a
selector lexbor cannot parse or a pseudo-element other than ``::text`` and ``::attr(NAME)``.
Reading pages with them is ``agents/content/extract.py``'s; docs/extraction.md is the user's side.

A compiled selector also knows its worst case (``Compiled.work``), because lexbor matches a
selector right to left and backtracks: each descendant combinator or ``:has()`` multiplies its
cost by up to the page's depth, each ``~`` combinator or ``:nth-*()`` by up to its width (the
most element siblings), so that a few descendant combinators over deeply nested markup (broken
markup nests deep) take minutes (docs/extraction.md, "What a selector may cost").
``:lexbor-contains()``, whose cost grows with the page's text, is refused.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import msgspec
from selectolax.lexbor import LexborHTMLParser, SelectolaxError

from streamcrawl.agents.errors import ConfigError
from streamcrawl.schemas.records import (
    DATA_TRUNCATED,
    MAX_SELECTOR_CHARS,
    ExtractName,
    Extractor,
)

_SUFFIX: Final = re.compile(r"::(?:(text)|attr\(\s*([^\s()]*)\s*\))\s*$", re.IGNORECASE)
_IDENT: Final = re.compile(r"[A-Za-z0-9_-]*$")


@dataclass(frozen=True, slots=True)
class Compiled:
    """One extractor, checked: its CSS, the attribute it reads (None: the text), and per
    selector of its list the factors of its worst case (``work``)."""

    name: str
    css: str
    attr: str | None
    all: bool
    # (descendant combinators and :has(), ~ combinators and :nth-*()) of each selector
    branches: tuple[tuple[int, int], ...]

    def work(self, elements: int, depth: int, width: int, cap: int) -> int:
        """The most steps lexbor may take on a page of ``elements``, at most ``depth`` deep
        and ``width`` siblings wide; more than ``cap`` once past it."""
        total = 0
        for deep, wide in self.branches:
            total += elements * _paths(depth, deep, cap) * _paths(width, wide, cap)
            if total > cap:
                return cap + 1
        return total

    @property
    def factors(self) -> tuple[bool, bool]:
        """Whether its cost grows with the page's depth, with its width."""
        return any(d for d, _w in self.branches), any(w for _d, w in self.branches)


def _paths(bound: int, k: int, cap: int) -> int:
    """The ways a match may backtrack over ``k`` combinators among ``bound`` elements: the
    sum of C(bound, j), j <= k (more than ``cap`` once past it)."""
    total = term = 1
    for j in range(1, min(k, bound) + 1):
        term = term * (bound - j + 1) // j
        total += term
        if total > cap:
            return cap + 1
    return total


def parse_extractor(text: str) -> Extractor:
    """``'NAME=SELECTOR'`` (``'NAME=all:SELECTOR'``: every match) -> a checked ``Extractor``;
    ``ConfigError`` (one line) if malformed or not CSS lexbor can read."""
    name, eq, selector = text.partition("=")
    if not eq:
        raise ConfigError(f"extractor {text[:80]!r} is not NAME=SELECTOR")
    name, selector = name.strip(), selector.strip()
    every = selector.startswith("all:")
    extractor = Extractor(
        name=name, selector=selector[4:].strip() if every else selector, all=every
    )
    compile_extractor(extractor)
    return extractor


def compile_extractor(extractor: Extractor) -> Compiled:
    """Check one extractor (``ConfigError``, one line, naming it) and compile it."""
    name = extractor.name
    try:
        msgspec.convert(name, ExtractName)
    except msgspec.ValidationError:
        raise ConfigError(
            f"extractor name {name[:80]!r} must be 1-64 letters, digits, '_', '.' or '-', "
            "starting with a letter or '_'"
        ) from None
    if name == DATA_TRUNCATED:
        raise ConfigError(f"extractor name {DATA_TRUNCATED} is taken: it marks data that was cut")
    selector = extractor.selector
    if len(selector) > MAX_SELECTOR_CHARS:
        raise ConfigError(f"extractor {name}: its selector is over {MAX_SELECTOR_CHARS} characters")
    css, attr = _split(selector)
    what = f"extractor {name}: selector {selector[:200]!r}"
    if not selector.strip():
        raise ConfigError(f"extractor {name} has no selector")
    if not css:
        raise ConfigError(f"{what} names no element before its ::text or ::attr()")
    if attr == "":
        raise ConfigError(f"{what} names no attribute in ::attr()")
    try:
        branches = _branches(css)
        LexborHTMLParser("").css(css)
    except ValueError as exc:
        raise ConfigError(f"{what} {exc}") from None
    except SelectolaxError:
        why = (
            "may end only in ::text or ::attr(NAME)" if "::" in css else "is not CSS lexbor parses"
        )
        raise ConfigError(f"{what} {why}") from None
    return Compiled(name, css, attr, extractor.all, branches)


def _split(selector: str) -> tuple[str, str | None]:
    """(the CSS, the attribute read: None for the text) of a selector."""
    match = _SUFFIX.search(selector)
    if match is None:
        return selector.strip(), None
    css = selector[: match.start()].strip()
    return css, None if match.group(1) else match.group(2).lower()


def _branches(css: str) -> tuple[tuple[int, int], ...]:
    """Per selector of the list ``css``: (descendant combinators and ``:has()``, ``~``
    combinators and ``:nth-*()``), counted outside strings and attribute brackets. Whitespace
    inside an ``:nth-*()`` is not a combinator. ``ValueError`` for ``:lexbor-contains()``."""
    out: list[tuple[int, int]] = []
    deep = wide = 0
    nth: list[bool] = []  # per open parenthesis: whether it is an :nth-*()'s
    prev, space, i = "", False, 0
    while i < len(css):
        c = css[i]
        if c.isspace():
            space, i = True, i + 1
            continue
        if space and prev not in ("", ">", "+", "~", ",", "(") and c not in ">+~,)":
            deep += not (nth and nth[-1])
        space = False
        if c == "\\":
            i += 1  # the escaped character is part of a name
        elif c in "\"'":
            i = _after_string(css, i)
            prev = c
            continue
        elif c == "[":
            i = _after_bracket(css, i)
            prev = "]"
            continue
        elif c == "(":
            function = _IDENT.search(css, 0, i)
            ident = function.group().lower() if function else ""
            if ident == "lexbor-contains":
                raise ValueError("uses :lexbor-contains(), whose cost grows with the page's text")
            deep += ident == "has"
            wide += ident.startswith("nth-")
            nth.append(ident.startswith("nth-"))
        elif c == ")" and nth:
            nth.pop()
        elif c == "~":
            wide += 1
        elif c == "," and not nth:
            out.append((deep, wide))
            deep = wide = 0
        prev = c
        i += 1
    out.append((deep, wide))
    return tuple(out)


def _after_string(css: str, i: int) -> int:
    """The index after the string that starts at ``css[i]`` (its end, if unterminated)."""
    quote, i = css[i], i + 1
    while i < len(css) and css[i] != quote:
        i += 2 if css[i] == "\\" else 1
    return i + 1


def _after_bracket(css: str, i: int) -> int:
    """The index after the attribute selector ``[...]`` that starts at ``css[i]``."""
    i += 1
    while i < len(css) and css[i] != "]":
        i = _after_string(css, i) if css[i] in "\"'" else i + (2 if css[i] == "\\" else 1)
    return i + 1


def compile_extractors(extractors: Sequence[Extractor]) -> tuple[Compiled, ...]:
    """A crawl's extractors, compiled, in its order; ``ConfigError`` (one line) for a name
    given twice or an extractor ``compile_extractor`` refuses."""
    compiled: dict[str, Compiled] = {}
    for extractor in extractors:
        if extractor.name in compiled:
            raise ConfigError(f"extractor name {extractor.name} is given twice")
        compiled[extractor.name] = compile_extractor(extractor)
    return tuple(compiled.values())
