"""Extraction without code: a crawl's named CSS selectors fill its page records' ``data``.

Pure: no I/O. ``parse_extractor`` reads the CLI's ``NAME=SELECTOR``; ``Extraction.compile``
checks a crawl's extractors (``CrawlPolicy.extract``) once per crawl, ``ConfigError`` (one line)
for a selector lexbor cannot read; ``Extraction.apply`` reads one page's tree, the one its links
were read from (``parse_tree``): a page is parsed once. docs/extraction.md is the user's side.

A selector is CSS, optionally ending in ``::text`` (the element's text, whitespace collapsed:
the default) or ``::attr(NAME)`` (the value of its attribute NAME, surrounding whitespace
stripped; an element without it does not count as a match). ``all``: a list of the values of
every match (at most ``MAX_EXTRACT_VALUES``), else the value of the first match, or null.

Bounds (``schemas/records.py``): each string at most ``MAX_EXTRACT_CHARS`` characters, each list
at most ``MAX_EXTRACT_VALUES`` strings, the whole ``data`` at most ``MAX_DATA_BYTES`` of JSON: the
values are kept in the crawl's order, the first that does not fit is shortened (a string cut, a
list left with its first strings) and later ones get the room left. Whatever is cut or left out
sets ``data["_truncated"]`` to true.

The work is bounded too, because lexbor matches a selector right to left with backtracking: each
descendant combinator or ``:has()`` multiplies a selector's cost by up to the page's depth, each
``~`` or ``:nth-*()`` by up to its width, so that ``a div div div`` over a few hundred nested
``<div>`` (broken markup does that) takes minutes. ``Compiled.work`` is a selector's worst case
in steps on a page of so many elements and such a depth, and a page affords ``WORK`` steps: an
extractor that does not fit in what is left is not run (null, or an empty list, and
``_truncated``). A page's depth is probed only when a selector needs it, with child combinators
(linear: ``DEPTH_PROBES``). The text read from a page is bounded by ``READ_CHARS``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import msgspec
from selectolax.lexbor import LexborHTMLParser, LexborNode, SelectolaxError

from streamcrawl.agents.content.parse import HtmlTree
from streamcrawl.agents.errors import ConfigError
from streamcrawl.schemas.records import (
    DATA_TRUNCATED,
    MAX_DATA_BYTES,
    MAX_EXTRACT_CHARS,
    MAX_EXTRACT_VALUES,
    MAX_SELECTOR_CHARS,
    ExtractName,
    Extractor,
)

log = logging.getLogger(__name__)

Value = str | list[str] | None
Data = dict[str, str | list[str] | bool | None]

# A page's work, in lexbor steps (a few ns each): what ``Compiled.work`` estimates.
WORK: Final = 3 * 10**8
# Characters read from one page's tree (texts and attribute values) by all its extractors, and
# from one element's text before its whitespace is collapsed.
READ_CHARS: Final = 16 * MAX_DATA_BYTES
TEXT_READ_CHARS: Final = 16 * MAX_EXTRACT_CHARS
# The depths and widths (element siblings) a page is probed at, smallest first, when a selector
# needs them: most pages are under 32 deep. A probe of child (next-sibling) combinators matches
# an element with more ancestors (preceding siblings) than its size, in linear time.
DEPTH_PROBES: Final = (32, 64, 128, 256)
WIDTH_PROBES: Final = (64, 256, 1024)
_DEPTH_PROBES: Final = tuple((n, "* > " * n + "*") for n in DEPTH_PROBES)
_WIDTH_PROBES: Final = tuple((n, "* + " * n + "*") for n in WIDTH_PROBES)
_IMPLIED: Final = 8  # elements a parser adds without a "<" (html, head, body, tbody...)
_SUFFIX: Final = re.compile(r"::(?:(text)|attr\(\s*([^\s()]*)\s*\))\s*$", re.IGNORECASE)
_IDENT: Final = re.compile(r"[A-Za-z0-9_-]*$")
_MISSING: Final = object()
_MARK: Final = b',"' + DATA_TRUNCATED.encode() + b'":true'
_encode = msgspec.json.encode


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


class Extraction:
    """A crawl's compiled extractors (``CrawlRules.extraction``)."""

    def __init__(self, extractors: tuple[Compiled, ...]) -> None:
        self.extractors = extractors

    @classmethod
    def compile(cls, extractors: Sequence[Extractor]) -> Extraction | None:
        """The crawl's extraction; None when it has no extractor. ``ConfigError`` (one line)
        for a name given twice or an extractor ``compile_extractor`` refuses."""
        if not extractors:
            return None
        compiled: dict[str, Compiled] = {}
        for extractor in extractors:
            if extractor.name in compiled:
                raise ConfigError(f"extractor name {extractor.name} is given twice")
            compiled[extractor.name] = compile_extractor(extractor)
        return cls(tuple(compiled.values()))

    def apply(self, parsed: HtmlTree, url: str = "") -> Data:
        """Every extractor's value on the page ``parsed`` (fetched from ``url``, for the log),
        by name in the crawl's order, within the bounds of the module docstring; never raises."""
        page = _Page(parsed, url)
        data = {e.name: page.value(e) for e in self.extractors}
        fitted, cut = _fit(data)
        out: Data = dict(fitted)
        if cut or page.truncated:
            out[DATA_TRUNCATED] = True
        return out

    def empty(self) -> Data:
        """The data of a page with no text to read (a content type the crawl takes that is not
        text): null, or an empty list, for every extractor."""
        return {e.name: [] if e.all else None for e in self.extractors}


class _Bound:
    """What a page is known of one measure (depth, or width: the most element siblings): at
    most ``high``, more than ``low``; probed with ``probes``, (size, selector) smallest first,
    each selector matching an element past its size."""

    def __init__(self, high: int, probes: tuple[tuple[int, str], ...]) -> None:
        self.high = high
        self.low = 0
        self.probes = probes

    def narrow(self, page: _Page) -> bool:
        """Lower ``high`` by the next probe the page's work affords; False if none is left."""
        assert page.tree is not None
        for size, probe in self.probes:
            if size <= self.low:
                continue
            if size >= self.high or page.elements * size > page.work:
                return False
            page.work -= page.elements * size  # child or next-sibling combinators: linear
            if page.tree.css_first(probe) is None:
                self.high = size
            else:
                self.low = size
            return True
        return False


class _Page:
    """One page's extraction: its tree, its work and read budgets, its depth and width."""

    def __init__(self, parsed: HtmlTree, url: str) -> None:
        self.tree = parsed.tree
        self.url = url
        self.elements = parsed.tags + _IMPLIED
        self.work = WORK
        self.read = READ_CHARS
        self.depth = _Bound(self.elements, _DEPTH_PROBES)
        self.width = _Bound(self.elements, _WIDTH_PROBES)
        self.truncated = False

    def value(self, e: Compiled) -> Value:
        empty: Value = [] if e.all else None
        if self.tree is None or not self._afford(e):
            self.truncated = True
            return empty
        try:
            return self._values(self.tree, e) if e.all else self._first(self.tree, e)
        except Exception:  # lexbor on hostile input: this value is lost, not the page
            log.warning("extractor %s failed on %s", e.name, self.url, exc_info=True)
            self.truncated = True
            return empty

    def _afford(self, e: Compiled) -> bool:
        """Whether the page's work budget affords ``e`` (probing its depth or width if that
        helps), and if so charge it."""
        while (cost := self._cost(e)) > self.work:
            deep, wide = e.factors
            if not ((deep and self.depth.narrow(self)) or (wide and self.width.narrow(self))):
                log.info(
                    "extractor %s not run on %s: the page is too large, deep or wide for its "
                    "selector (docs/extraction.md)",
                    e.name,
                    self.url,
                )
                return False
        self.work -= cost
        return True

    def _cost(self, e: Compiled) -> int:
        return e.work(self.elements, self.depth.high, self.width.high, self.work)

    def _first(self, tree: LexborHTMLParser, e: Compiled) -> str | None:
        node = tree.css_first(e.css)
        if node is None:
            return None
        value = self._read(node, e.attr)
        if value is not None or e.attr is None:
            return value
        for node in tree.css(e.css):  # the first match lacks the attribute: the first with it
            value = self._read(node, e.attr)
            if value is not None or self.read <= 0:
                return value
        return None

    def _values(self, tree: LexborHTMLParser, e: Compiled) -> list[str]:
        values: list[str] = []
        for node in tree.css(e.css):
            if self.read <= 0:
                self.truncated = True
                break
            value = self._read(node, e.attr)
            if value is None:
                continue
            if len(values) == MAX_EXTRACT_VALUES:
                self.truncated = True
                break
            values.append(value)
        return values

    def _read(self, node: LexborNode, attr: str | None) -> str | None:
        """The text of ``node``, or the value of its ``attr`` (None: it has none), bounded;
        None once the page's read budget is spent."""
        if self.read <= 0:
            self.truncated = True
            return None
        if attr is None:
            raw = node.text(deep=True)
            self.read -= len(raw)
            value = " ".join(raw[:TEXT_READ_CHARS].split())
            cut = len(raw) > TEXT_READ_CHARS or len(value) > MAX_EXTRACT_CHARS
        else:
            found = node.attrs.get(attr, _MISSING)
            if found is _MISSING:
                return None
            value = found.strip() if isinstance(found, str) else ""  # None: no value given
            self.read -= len(value)
            cut = len(value) > MAX_EXTRACT_CHARS
        if cut:
            self.truncated = True
            value = value[:MAX_EXTRACT_CHARS].rstrip()
        return value


def _fit(data: dict[str, Value]) -> tuple[dict[str, Value], bool]:
    """``data`` within ``MAX_DATA_BYTES`` of JSON with the ``_truncated`` mark, and whether a
    value was shortened: in order, each value gets the room the earlier ones left."""
    if len(_encode(data)) + len(_MARK) <= MAX_DATA_BYTES:
        return data, False
    skeleton = dict.fromkeys(data, None) | {DATA_TRUNCATED: True}
    room = MAX_DATA_BYTES - len(_encode(skeleton))
    sizes = {name: len(_encode(value)) - 4 for name, value in data.items()}  # over "null"
    out: dict[str, Value] = {}
    cut = False
    for name, value in data.items():
        if sizes[name] <= room:
            out[name] = value
        else:
            out[name] = _shrink(value, room + 4)
            cut = True
        room -= len(_encode(out[name])) - 4
    return out, cut


def _shrink(value: Value, nbytes: int) -> Value:
    """``value`` cut to at most ``nbytes`` (at least 4) of JSON: a string's longest prefix, a
    list's first strings that fit whole."""
    if isinstance(value, list):
        kept: list[str] = []
        size = 2  # []
        for item in value:
            size += len(_encode(item)) + (1 if kept else 0)
            if size > nbytes:
                break
            kept.append(item)
        return kept
    if value is None:
        return None
    low, high = 0, len(value)  # the longest prefix that fits: binary search
    while low < high:
        middle = (low + high + 1) // 2
        if len(_encode(value[:middle])) <= nbytes:
            low = middle
        else:
            high = middle - 1
    return value[:low]
