"""A page's main text without its boilerplate, and the language it is written in. Pure.

``main_text(html)`` returns the article of a page (its headings and paragraphs, without
navigation, header, footer, sidebars, cookie banners, share buttons or comments) as plain text,
blocks separated by blank lines, with the text's language as an ISO 639-1 code. Resiliparse's
main-content extractor finds the text and CLD2 (pycld2) names the language: the probe
``bench/probes/maintext.py`` measured them against trafilatura, jusText, readability-lxml,
boilerpy3, py3langid, lingua and CLD3 for quality and CPU (docs/performance.md, "Main text and
language").

Bounded, and total for any ``str``:

- the text is at most ``max_chars`` characters, cut at a word boundary, or between two
  characters when there is none (``MainText.chars`` keeps the length before the cut);
- at most ``max_html_chars`` of the HTML are read: a longer page loses its ``<script>`` and
  ``<style>`` contents first (where a huge page's bytes often are), then is cut;
- a document nested deeper than ``MAX_DEPTH`` elements (``html`` and ``body`` count) has no
  main text (``None``): the extractor's heuristics cost time in proportion to the elements times
  their depth, and real pages nest tens of elements deep, not hundreds;
- lone surrogates become ``?`` (as in ``parse.py``); control characters (but tab, line feed and
  carriage return) and the first plane's noncharacters are dropped from the text; binary junk
  and unclosed markup are read as a browser reads them;
- the language is detected on the first ``LANGUAGE_CHARS`` characters of the text.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from dataclasses import dataclass
from typing import Final

import pycld2
from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.html import HTMLTree

log = logging.getLogger(__name__)

MAX_HTML_CHARS: Final = 1_000_000
MAX_DEPTH: Final = 256
LANGUAGE_CHARS: Final = 2048
# Matches an element with MAX_DEPTH ancestors: one query tells whether the tree is too deep.
_TOO_DEEP: Final = " > ".join(["*"] * (MAX_DEPTH + 1))
_RAW_TEXT_OPEN: Final = re.compile(r"<(script|style)\b", re.IGNORECASE)
_RAW_TEXT_CLOSE: Final = {
    "script": re.compile(r"</script", re.IGNORECASE),
    "style": re.compile(r"</style", re.IGNORECASE),
}
# Not text: C0 and C1 controls (but tab, line feed and carriage return), DEL, surrogates and the
# noncharacters of the first plane; CLD2 refuses them ("interchange valid" UTF-8 only). The
# noncharacters of the other planes are rare, and a class with them scans much slower: they
# are dropped only for CLD2, and only once it has refused a text.
_NOT_INTERCHANGE: Final = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufdd0-\ufdef\ufffe\uffff]"
)
_PLANE_ENDS: Final = re.compile(
    "[" + "".join(chr(p << 16 | 0xFFFE) + chr(p << 16 | 0xFFFF) for p in range(1, 17)) + "]"
)
# CLD2's codes that ISO 639-1 spells otherwise; its other codes of more than two letters (ISO
# 639-2 and -3 languages, "xx-Latn" scripts, "un" for unknown) have no ISO 639-1 code.
_CLD2_TO_ISO: Final = {"iw": "he", "jw": "jv", "in": "id", "ji": "yi", "mo": "ro"}


@dataclass(frozen=True, slots=True)
class MainText:
    """A page's main text: ``text`` (at most the ``max_chars`` asked for), ``language`` (an ISO
    639-1 code; ``None`` when the text is too short or mixed to tell, or its language has no
    two-letter code), and ``chars``, the length of the text before it was cut."""

    text: str
    language: str | None
    chars: int

    @property
    def truncated(self) -> bool:
        return self.chars > len(self.text)


def main_text(
    html: str,
    url: str | None = None,
    *,
    max_chars: int = 100_000,
    max_html_chars: int = MAX_HTML_CHARS,
) -> MainText | None:
    """The main text of the page ``html`` and its language; ``None`` when the page has none
    (no text outside its boilerplate, nesting deeper than ``MAX_DEPTH``, or markup the parser
    refused). ``url`` only names the page in the debug log. Never raises for any ``html``;
    ``max_chars`` and ``max_html_chars`` must be positive."""
    if max_chars < 1 or max_html_chars < 1:
        raise ValueError("max_chars and max_html_chars must be positive")
    text = _NOT_INTERCHANGE.sub("", _extract(_bounded(html, max_html_chars), url)).strip()
    if not text:
        return None
    return MainText(_cut(text, max_chars), language(text[:LANGUAGE_CHARS]), len(text))


def language(text: str) -> str | None:
    """The ISO 639-1 code of the language ``text`` is written in, or ``None`` (CLD2 could not
    tell, or the language has no two-letter code). Never raises."""
    text = _NOT_INTERCHANGE.sub(" ", text)
    try:
        _, _, details = pycld2.detect(text, isPlainText=True)
    except pycld2.error:
        try:
            _, _, details = pycld2.detect(_PLANE_ENDS.sub(" ", text), isPlainText=True)
        except pycld2.error:
            return None
    code = str(details[0][1]).split("-")[0]
    code = _CLD2_TO_ISO.get(code, code)
    return code if len(code) == 2 and code != "un" else None


def _bounded(html: str, limit: int) -> str:
    """``html``, or for a longer page its first ``limit`` characters once the contents of its
    ``script`` and ``style`` elements are dropped (in one pass: each search starts where the
    last ended)."""
    if len(html) <= limit:
        return html
    kept: list[str] = []
    size = pos = 0
    while size < limit and (opened := _RAW_TEXT_OPEN.search(html, pos)):
        kept.append(html[pos : opened.end()])
        size += opened.end() - pos
        closed = _RAW_TEXT_CLOSE[opened.group(1).lower()].search(html, opened.end())
        pos = closed.start() if closed else len(html)
    kept.append(html[pos : pos + max(0, limit - size)])
    return "".join(kept)[:limit]


def _extract(html: str, url: str | None) -> str:
    """The main text Resiliparse finds in ``html``; ``""`` for none."""
    try:
        tree = _parse(html)
        document = tree.document
        if document is None or document.query_selector(_TOO_DEEP) is not None:
            log.debug("no main text in %s: no document, or nested deeper than %d", url, MAX_DEPTH)
            return ""
        return extract_plain_text(tree, main_content=True, comments=False)
    except Exception as exc:  # the parser's refusals; a page must never stop the crawl
        log.debug("no main text in %s: %s", url, exc)
        return ""


def _parse(html: str) -> HTMLTree:
    try:
        return HTMLTree.parse(html)
    except UnicodeEncodeError:  # a lone surrogate cannot be encoded to UTF-8: it becomes "?"
        return HTMLTree.parse_from_bytes(html.encode("utf-8", "replace"))


def _cut(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters: at the last white space of its second half
    when there is one, else (CJK text, one huge word) before a character that does not combine
    with the one before it."""
    if len(text) <= limit:
        return text
    space = max(text.rfind(" ", limit // 2, limit + 1), text.rfind("\n", limit // 2, limit + 1))
    if space > 0:
        return text[:space].rstrip()
    end = limit
    while end > 0 and unicodedata.combining(text[end]):
        end -= 1
    return text[:end]
