"""The URLs a stylesheet needs: its ``@import`` rules, ``url()`` and ``image()``/``image-set()``
strings, with their place in the text so that an offline copy can rewrite them.

Pure and total: ``css_refs`` never raises, whatever the text. A small tokenizer, not a CSS
parser: it skips comments and knows strings, ``url()`` (quoted or not), ``@import`` and
``@font-face`` blocks, which is all a fetch or a rewrite needs; every other byte is left alone,
so ``rewrite_css`` changes nothing but the URLs it is told to. (tinycss2 would parse more, but
gives token positions as line and column only, and a rewrite needs offsets.)

What each reference is:

- ``import``: the URL of an ``@import`` rule (``@import "a.css"`` or ``@import url(a.css)``): a
  stylesheet, fetched and read in turn (as deep as ``agents/content/assets.py`` allows);
- ``font``: a ``url()`` inside an ``@font-face`` block;
- ``image``: any other ``url()``, and the strings of ``image()``, ``image-set()`` and
  ``-webkit-image-set()``.

Bounded: at most ``MAX_CSS_REFS`` references per stylesheet, and only the first
``MAX_CSS_CHARS`` characters are read (a stylesheet's body is already capped by the fetch).
Empty URLs, fragments only (``#id``, an SVG filter of this document) and ``data:`` URLs are
not references: there is nothing to fetch.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final, Literal, NamedTuple

CssRefKind = Literal["import", "font", "image"]

MAX_CSS_REFS: Final = 2_000
MAX_CSS_CHARS: Final = 4 * 1024 * 1024
_HEX: Final = frozenset("0123456789abcdefABCDEF")
# What an unquoted url() cannot hold unescaped; what a quoted string cannot hold raw.
_NEEDS_QUOTES: Final = re.compile(r"[\s\"'()\\]|[\x00-\x1f\x7f]")
_NEWLINES: Final = re.compile(r"[\n\r\f]")

# One alternation, tried at each position: the first that matches wins, so a comment or a
# string hides what it contains. Unterminated comments and strings run to the end (of the text,
# of the line), as CSS Syntax reads them.
_TOKEN: Final = re.compile(
    r"""
    (?P<comment>/\*.*?(?:\*/|\Z))
  | (?P<url>url\(\s*(?:
        (?P<uq>["'])(?P<qurl>(?:\\.|(?!(?P=uq))[^\\\n])*)(?P=uq)
      | (?P<rawurl>[^\s"'()\\]*)
    )\s*\))
  | (?P<string>(?P<sq>["'])(?P<text>(?:\\.|(?!(?P=sq))[^\\\n])*)(?:(?P=sq)|$))
  | (?P<at>@(?:import|font-face)\b)
  | (?P<imagefn>(?:-webkit-)?image(?:-set)?\()
  | (?P<open>[{(])
  | (?P<close>[})])
  | (?P<semi>;)
    """,
    re.IGNORECASE | re.DOTALL | re.VERBOSE | re.MULTILINE,
)


class CssRef(NamedTuple):
    """One URL of a stylesheet: as written (unescaped), its kind, and ``[start, end)``, the
    span of the URL's characters in the text (inside the quotes or the parentheses)."""

    url: str
    kind: CssRefKind
    start: int
    end: int


def _unescape(text: str) -> str:
    """CSS escapes of a URL: ``\\"`` is ``"``; a hex escape is its code point."""
    if "\\" not in text:
        return text
    return re.sub(r"\\([0-9a-fA-F]{1,6}\s?|.)", _escaped, text, flags=re.DOTALL)


def _escaped(match: re.Match[str]) -> str:
    body = match.group(1)
    if body[0] not in _HEX:
        return "" if body == "\n" else body  # an escaped newline is a line continuation
    code = int(body.strip(), 16)
    return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else "\ufffd"


def _fetchable(url: str) -> bool:
    url = url.strip()
    return bool(url) and not url.startswith("#") and url[:5].lower() != "data:"


class _Reader:
    """The state of one pass over a stylesheet: where an @import or an @font-face is open."""

    def __init__(self) -> None:
        self.refs: list[CssRef] = []
        self.importing = False  # after "@import", until its URL or ";"
        self.font_face_pending = False  # after "@font-face", until its "{"
        self.font_face_depth: int | None = None  # the brace depth inside the @font-face block
        self.image_depth: int | None = None  # the paren depth inside image()/image-set()
        self.braces = 0
        self.parens = 0

    def add(self, url: str, kind: CssRefKind, start: int, end: int) -> None:
        url = _unescape(url).strip()
        if _fetchable(url):
            self.refs.append(CssRef(url, kind, start, end))

    def url_kind(self) -> CssRefKind:
        if self.importing:
            return "import"
        return "font" if self.font_face_depth is not None else "image"

    def token(self, m: re.Match[str]) -> None:
        group = m.lastgroup
        if group == "url":
            name = "qurl" if m.group("uq") else "rawurl"
            self.add(m.group(name), self.url_kind(), m.start(name), m.end(name))
            self.importing = False
        elif group == "string":
            if self.importing or self.image_depth is not None:
                kind: CssRefKind = "import" if self.importing else "image"
                self.add(m.group("text"), kind, m.start("text"), m.end("text"))
            self.importing = False
        elif group == "at":
            at = m.group("at").lower()
            self.importing = at == "@import"
            self.font_face_pending = at == "@font-face"
        elif group == "imagefn":
            self.parens += 1
            if self.image_depth is None:
                self.image_depth = self.parens
        else:
            self._punctuation(group)

    def _punctuation(self, group: str | None) -> None:
        if group == "semi":
            self.importing = False
        elif group == "open":
            self.importing = False
            self._open()
        elif group == "close":
            self._close()

    def _open(self) -> None:
        # "(" and "{" are told apart by the token's text; the regex groups both as "open".
        self.braces += 1
        if self.font_face_pending:
            self.font_face_pending = False
            self.font_face_depth = self.braces

    def _close(self) -> None:
        if self.font_face_depth is not None and self.braces == self.font_face_depth:
            self.font_face_depth = None
        self.braces = max(0, self.braces - 1)


def css_refs(text: str, limit: int = MAX_CSS_REFS) -> list[CssRef]:
    """The URLs ``text`` (a stylesheet, or a ``style`` attribute's value) refers to, in order
    (see the module docstring); at most ``limit``."""
    reader = _Reader()
    for m in _TOKEN.finditer(text[:MAX_CSS_CHARS]):
        if m.lastgroup in ("open", "close"):
            _paren(reader, m)
        else:
            reader.token(m)
        if len(reader.refs) >= limit:
            break
    return reader.refs[:limit]


def _paren(reader: _Reader, m: re.Match[str]) -> None:
    """A bracket: parentheses track image()/image-set(), braces the @font-face block."""
    char = m.group(0)
    if char == "(":
        reader.parens += 1
    elif char == ")":
        if reader.image_depth is not None and reader.parens == reader.image_depth:
            reader.image_depth = None
        reader.parens = max(0, reader.parens - 1)
    else:
        reader.token(m)


def rewrite_css(text: str, new_url: Callable[[CssRef], str | None]) -> str:
    """``text`` with each reference ``new_url`` answers replaced by its answer (None: left as
    it is); every other character unchanged. An answer is escaped for where it goes: inside
    quotes, its quote, backslash and newlines; an unquoted ``url()`` that would need escaping
    (a quote, parenthesis, backslash or white space: an absolute URL may hold ``)`` or ``'``)
    becomes a quoted one."""
    parts: list[str] = []
    at = 0
    for ref in css_refs(text):
        replacement = new_url(ref)
        if replacement is None:
            continue
        quote = text[ref.start - 1] if ref.start else ""
        parts.append(text[at : ref.start])
        parts.append(_in_context(replacement, quote if quote in ("'", '"') else ""))
        at = ref.end
    parts.append(text[at:])
    return "".join(parts)


def _in_context(url: str, quote: str) -> str:
    """``url`` as CSS text between ``quote`` characters, or unquoted (``quote`` empty)."""
    if not quote:
        if not _NEEDS_QUOTES.search(url):
            return url
        return '"' + _in_context(url, '"') + '"'
    url = url.replace("\\", "\\\\").replace(quote, "\\" + quote)
    return _NEWLINES.sub(lambda m: f"\\{ord(m.group()):x} ", url)
