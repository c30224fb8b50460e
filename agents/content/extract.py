"""Extraction without code: a crawl's compiled extractors read a page's tree into ``data``.

Pure: no I/O. ``extract`` reads the tree the page's links were read from (``parse_tree``): a
page is parsed once. The extractors come compiled from the crawl's rules
(``agents/policy/extractors.py``); docs/extraction.md is the user's side.

A selector ending in ``::text`` (the default) reads the element's text, whitespace collapsed;
one ending in ``::attr(NAME)`` the value of its attribute NAME, surrounding whitespace stripped
(an element without it does not count as a match). ``all``: a list of the values of every
match, else the value of the first match, or null.

Bounds (``schemas/records.py``): each string at most ``MAX_EXTRACT_CHARS`` characters, each list
at most ``MAX_EXTRACT_VALUES`` strings, the whole ``data`` at most ``MAX_DATA_BYTES`` of JSON: the
values are kept in the crawl's order, the first that does not fit is shortened (a string cut, a
list left with its first strings) and later ones get the room left. Whatever is cut or left out
sets ``data["_truncated"]`` to true.

The work is bounded too: a page affords ``WORK`` steps of lexbor, and an extractor whose worst
case (``Compiled.work``) does not fit in what is left is not run on it (null, or an empty list,
and ``_truncated``). A page's depth and width are probed, with child and next-sibling
combinators (linear: ``DEPTH_PROBES``, ``WIDTH_PROBES``), only when that lowers a selector's
charge by more than the probe costs. The text read from a page is bounded by ``READ_CHARS``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final

import msgspec
from selectolax.lexbor import LexborHTMLParser, LexborNode

from streamcrawl.agents.content.parse import HtmlTree
from streamcrawl.agents.policy.extractors import Compiled
from streamcrawl.schemas.records import (
    DATA_TRUNCATED,
    MAX_DATA_BYTES,
    MAX_EXTRACT_CHARS,
    MAX_EXTRACT_VALUES,
)

log = logging.getLogger(__name__)

Value = str | list[str] | None
Data = dict[str, str | list[str] | bool | None]

# A page's work, in the steps ``Compiled.work`` counts (what that is in CPU time:
# docs/extraction.md, "What a selector may cost").
WORK: Final = 10**9
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
_PROBE_ABOVE: Final = 10**6  # a worst case below this is charged as it is, without a probe
_IMPLIED: Final = 8  # elements a parser adds without a "<" (html, head, body, tbody...)
_MISSING: Final = object()
_MARK: Final = b',"' + DATA_TRUNCATED.encode() + b'":true'
_encode = msgspec.json.encode


def extract(extractors: Sequence[Compiled], parsed: HtmlTree, url: str = "") -> Data:
    """Every extractor's value on the page ``parsed`` (fetched from ``url``, for the log), by
    name in the crawl's order, within the bounds of the module docstring; never raises."""
    page = _Page(parsed, url)
    data = {e.name: page.value(e) for e in extractors}
    fitted, cut = _fit(data)
    out: Data = dict(fitted)
    if cut or page.truncated:
        out[DATA_TRUNCATED] = True
    return out


def nothing(extractors: Sequence[Compiled]) -> Data:
    """The data of a page with no text to read (a content type the crawl takes that is not
    text): null, or an empty list, for every extractor."""
    return {e.name: [] if e.all else None for e in extractors}


class _Bound:
    """What a page is known of one measure (depth, or width: the most element siblings): at
    most ``high``, more than ``low``; probed with ``probes``, (size, selector) smallest first,
    each selector matching an element past its size."""

    def __init__(self, high: int, probes: tuple[tuple[int, str], ...]) -> None:
        self.high = high
        self.low = 0
        self.probes = probes

    def next_size(self) -> int | None:
        """The size of the probe that would narrow ``high`` next; None: none would."""
        for size, _probe in self.probes:
            if size > self.low:
                return size if size < self.high else None
        return None

    def narrow(self, page: _Page) -> bool:
        """Run the next probe if the page's work affords it; False if it did not run."""
        assert page.tree is not None
        size = self.next_size()
        if size is None or page.elements * size > page.work:
            return False
        page.work -= page.elements * size  # child or next-sibling combinators: linear
        probe = dict(self.probes)[size]
        if page.tree.css_first(probe) is None:
            self.high = size
        else:
            self.low = size
        return True


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
        """Whether the page's work budget affords ``e``, and if so charge it. The page's depth
        or width is probed first when that may lower the charge by more than the probe costs."""
        while (bound := self._worth_probing(e)) is not None and bound.narrow(self):
            pass
        cost = self._cost(e)
        if cost > self.work:
            log.info(
                "extractor %s not run on %s: the page is too large, deep or wide for its "
                "selector (docs/extraction.md)",
                e.name,
                self.url,
            )
            return False
        self.work -= cost
        return True

    def _worth_probing(self, e: Compiled) -> _Bound | None:
        """The measure to probe for ``e``: its worst case grows with it, is not negligible
        (``_PROBE_ABOVE``) and is several times what the probe costs."""
        cost = self._cost(e)
        if cost <= _PROBE_ABOVE:
            return None
        deep, wide = e.factors
        for grows, bound in ((deep, self.depth), (wide, self.width)):
            size = bound.next_size() if grows else None
            if size is not None and 4 * self.elements * size < cost:
                return bound
        return None

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
